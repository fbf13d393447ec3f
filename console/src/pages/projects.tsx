import { useState } from 'preact/hooks';
import { api, call, money } from '../api';
import { enc, Link } from '../router';
import { ErrorState, Loading, Time, useLoad } from '../ui';

/** The projects the signed-in user may see, each a way into its runs and billing. */
export function ProjectsPage({ me }: { me: { name: string; global_role: string } | undefined }) {
  const [cursor, setCursor] = useState<string | undefined>();
  const page = useLoad(
    () => call(api().GET('/api/v1/projects', { params: { query: { limit: 50, cursor } } })),
    [cursor],
  );
  return (
    <section>
      <h1>Projects</h1>
      {page.loading && !page.data && <Loading what="projects" />}
      {page.error !== undefined && <ErrorState error={page.error} what="projects" retry={page.reload} />}
      {page.data && page.data.items.length === 0 && (
        <p>
          {me?.name ?? 'You'} is a member of no project yet. Create one with <code>POST /api/v1/projects</code>.
        </p>
      )}
      {page.data && page.data.items.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Project</th>
                <th scope="col">Members</th>
                <th scope="col">Billing limit</th>
                <th scope="col">Created</th>
                <th scope="col">Billing</th>
              </tr>
            </thead>
            <tbody>
              {page.data.items.map((p) => (
                <tr key={p.id}>
                  <td>
                    <Link href={`/projects/${enc(p.name)}/runs`}>{p.name}</Link>
                  </td>
                  <td>{p.members.length}</td>
                  <td>{p.billing_limit_usd === null ? 'none' : money(p.billing_limit_usd)}</td>
                  <td>
                    <Time at={p.created_at} />
                  </td>
                  <td>
                    <Link href={`/projects/${enc(p.name)}/billing`}>Usage of {p.name}</Link>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {page.data?.next_cursor && (
        <button type="button" onClick={() => setCursor(page.data?.next_cursor ?? undefined)}>
          More projects
        </button>
      )}
    </section>
  );
}
