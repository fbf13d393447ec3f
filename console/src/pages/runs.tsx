import { useEffect, useState } from 'preact/hooks';
import { api, auth, call, money, type Run } from '../api';
import { enc, Link, navigate, query } from '../router';
import { followSse } from '../sse';
import { CopyId, ErrorState, Loading, Status, Time } from '../ui';

const STATUSES = ['pending', 'submitted', 'provisioning', 'running', 'terminating', 'terminated', 'failed', 'done'];

/** Runs of a project: filters in the URL, keyset pages (a stack of cursors to go back), live via the event feed. */
export function RunsPage({ project, q }: { project: string; q: URLSearchParams }) {
  const status = q.get('status') ?? '';
  const user = q.get('user') ?? '';
  const cursor = q.get('cursor') ?? undefined;
  const [back, setBack] = useState<(string | undefined)[]>([]);
  const [runs, setRuns] = useState<Run[]>();
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<unknown>();
  const [live, setLive] = useState(false);
  const [reloads, setReloads] = useState(0);
  const [userInput, setUserInput] = useState(user);

  useEffect(() => setUserInput(user), [user]);
  useEffect(() => {
    let current = true;
    setError(undefined);
    call(
      api().GET('/api/v1/projects/{project}/runs', {
        params: {
          path: { project },
          query: { limit: 20, cursor, status: status || undefined, user: user || undefined, include_jobs: false },
        },
      }),
    ).then(
      (page) => {
        if (!current) return;
        setRuns(page.items);
        setNext(page.next_cursor ?? null);
      },
      (e: unknown) => current && setError(e),
    );
    return () => void (current = false);
  }, [project, status, user, cursor, reloads]);

  // Live: a run's status event patches its row; a run this page does not show yet reloads the first page.
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stop = followSse(`/api/v1/projects/${enc(project)}/events?type=run.status`, auth.token ?? '', {
      onOpen: () => setLive(true),
      onError: () => setLive(false),
      onMessage: (m) => {
        if (m.event !== 'run.status') return;
        const ev = JSON.parse(m.data) as { run_id: string; status: Run['status'] };
        setRuns((rs) => {
          if (rs?.some((r) => r.id === ev.run_id))
            return rs.map((r) => (r.id === ev.run_id ? { ...r, status: ev.status } : r));
          if (!cursor) {
            clearTimeout(timer);
            timer = setTimeout(() => setReloads((n) => n + 1), 300);
          }
          return rs;
        });
      },
    });
    return () => {
      clearTimeout(timer);
      stop();
      setLive(false);
    };
  }, [project, cursor]);

  const go = (params: Record<string, string | undefined>) =>
    navigate(`/projects/${enc(project)}/runs${query({ status, user, ...params })}`);

  return (
    <section>
      <div class="title-row">
        <h1>
          Runs <span class="muted">in {project}</span>
        </h1>
        <span class={live ? 'live on' : 'live'} role="status">
          {live ? '● live' : '○ not live'}
        </span>
      </div>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          setBack([]);
          go({ user: userInput.trim() || undefined, cursor: undefined });
        }}
      >
        <label>
          Status
          <select
            value={status}
            onChange={(e) => {
              setBack([]);
              go({ status: e.currentTarget.value || undefined, cursor: undefined });
            }}
          >
            <option value="">any</option>
            <option value="pending,submitted,provisioning,running,terminating">active</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label>
          User
          <input value={userInput} onInput={(e) => setUserInput(e.currentTarget.value)} placeholder="any user" />
        </label>
        <button type="submit">Filter</button>
      </form>
      {error !== undefined && <ErrorState error={error} what="project" retry={() => setReloads((n) => n + 1)} />}
      {runs === undefined && error === undefined && <Loading what="runs" />}
      {runs && runs.length === 0 && <p>No runs match.</p>}
      {runs && runs.length > 0 && (
        <div class="table-wrap">
          <table class="runs">
            <thead>
              <tr>
                <th scope="col">Run</th>
                <th scope="col">Id</th>
                <th scope="col">Status</th>
                <th scope="col">User</th>
                <th scope="col">Submitted</th>
                <th scope="col">Finished</th>
                <th scope="col">Jobs</th>
                <th scope="col">Cost</th>
              </tr>
            </thead>
            <tbody>
              {runs.map((r) => (
                <tr key={r.id} data-run={r.id}>
                  <td>
                    <Link href={`/projects/${enc(project)}/runs/${r.id}`}>{r.run_name}</Link>
                  </td>
                  <td>
                    <CopyId id={r.id} label="run id" />
                  </td>
                  <td>
                    <Status status={r.status} title={r.status_message ?? undefined} />
                  </td>
                  <td>{r.user}</td>
                  <td>
                    <Time at={r.submitted_at} />
                  </td>
                  <td>
                    <Time at={r.finished_at} />
                  </td>
                  <td>{Object.values((r.job_counts ?? {}) as Record<string, number>).reduce((a, b) => a + b, 0)}</td>
                  <td>{money(r.cost.total_usd)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <nav class="pager" aria-label="Pages of runs">
        <button
          type="button"
          disabled={back.length === 0}
          onClick={() => {
            const prev = back[back.length - 1];
            setBack(back.slice(0, -1));
            go({ cursor: prev });
          }}
        >
          ← Newer
        </button>
        <button
          type="button"
          disabled={!next}
          onClick={() => {
            setBack([...back, cursor]);
            go({ cursor: next ?? undefined });
          }}
        >
          Older →
        </button>
      </nav>
    </section>
  );
}
