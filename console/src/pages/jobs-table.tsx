import { useEffect, useRef, useState } from 'preact/hooks';
import { api, call, money, type Job, type Submission } from '../api';
import { enc, Link } from '../router';
import { Status, Time } from '../ui';

const ROW = 34;
const VIEW = 460;
/** Jobs views the job page can show at once when opened from here (the API has no single-job route). */
export const jobCache = new Map<string, Job>();

/**
 * The jobs of a group (with subgroups or not) in a virtualised table: only the rows in view (plus a margin) are in
 * the DOM, and keyset pages of 100 load as the scroll nears the end of what is loaded.
 */
export function JobsTable(props: {
  project: string;
  runId: string;
  group: number;
  recursive: boolean;
  version: number;
}) {
  const [jobs, setJobs] = useState<Job[]>([]);
  const [next, setNext] = useState<string | null | undefined>(undefined);
  const [error, setError] = useState<unknown>();
  const [top, setTop] = useState(0);
  const loading = useRef(false);
  const gen = useRef(0);

  const load = async (cursor: string | undefined, replace: boolean, limit = 100) => {
    const mine = gen.current;
    loading.current = true;
    try {
      const page = await call(
        api().GET('/api/v1/projects/{project}/runs/{runId}/job-groups/{g}/jobs', {
          params: {
            path: { project: props.project, runId: props.runId, g: props.group },
            query: { limit, cursor, recursive: props.recursive },
          },
        }),
      );
      if (mine !== gen.current) return;
      page.items.forEach((j) => jobCache.set(j.id, j));
      setJobs((old) => (replace ? page.items : [...old, ...page.items]));
      setNext(page.next_cursor ?? null);
    } catch (e) {
      if (mine === gen.current) setError(e);
    } finally {
      if (mine === gen.current) loading.current = false;
    }
  };

  useEffect(() => {
    gen.current++;
    loading.current = false;
    setJobs([]);
    setNext(undefined);
    setError(undefined);
    setTop(0);
    void load(undefined, true);
  }, [props.project, props.runId, props.group, props.recursive]);

  // A refresh re-reads the first page and keeps later ones (events rarely touch rows far down, and rows stay put).
  // It leaves `gen` alone: a page load in flight stays valid.
  useEffect(() => {
    if (props.version === 0) return;
    const mine = gen.current;
    void call(
      api().GET('/api/v1/projects/{project}/runs/{runId}/job-groups/{g}/jobs', {
        params: {
          path: { project: props.project, runId: props.runId, g: props.group },
          query: { limit: 100, recursive: props.recursive },
        },
      }),
    ).then((page) => {
      if (mine !== gen.current) return;
      page.items.forEach((j) => jobCache.set(j.id, j));
      setJobs((old) => [...page.items, ...old.slice(page.items.length)]);
      // Later pages keep their cursor; a first page that is now the whole list ends the paging.
      if (!page.next_cursor) setNext(null);
    }, setError);
  }, [props.version]);

  const first = Math.max(0, Math.floor(top / ROW) - 10);
  const last = Math.min(jobs.length, Math.ceil((top + VIEW) / ROW) + 10);
  useEffect(() => {
    if (next && !loading.current && last >= jobs.length - 20) void load(next, false);
  }, [last, jobs.length, next]);

  if (error)
    return (
      <p role="alert" class="error">
        Could not load the jobs: {(error as Error).message}
      </p>
    );
  return (
    <div
      class="vtable"
      style={{ maxHeight: `${VIEW}px` }}
      onScroll={(e) => setTop(e.currentTarget.scrollTop)}
      tabIndex={0}
      role="region"
      aria-label={`Jobs of group ${props.group}`}
    >
      <table class="jobs" aria-rowcount={jobs.length + 1}>
        <thead>
          <tr>
            <th scope="col">Job</th>
            <th scope="col">Name</th>
            <th scope="col">Group</th>
            <th scope="col">Status</th>
            <th scope="col">Reason</th>
            <th scope="col">Tries</th>
            <th scope="col">Latest submission</th>
            <th scope="col">Cost</th>
          </tr>
        </thead>
        <tbody>
          {first > 0 && (
            <tr aria-hidden="true" style={{ height: `${first * ROW}px` }}>
              <td colSpan={8} />
            </tr>
          )}
          {jobs.slice(first, last).map((j, i) => {
            const s = j.latest_job_submission as Submission | null;
            return (
              <tr key={j.id} style={{ height: `${ROW}px` }} data-testid="job-row" aria-rowindex={first + i + 2}>
                <td>
                  <Link href={`/projects/${enc(props.project)}/runs/${props.runId}/jobs/${j.id}`}>
                    #{j.job_num}
                    {j.replica_num > 0 ? `.${j.replica_num}` : ''}
                  </Link>
                </td>
                <td class="ellipsis">{j.job_name}</td>
                <td>{j.job_group_id}</td>
                <td>
                  <Status status={j.status} />
                  {j.status === 'pending' && j.n_pending_parents > 0 && (
                    <span class="hint" data-testid="waits-on">
                      {' '}
                      waits on {j.n_pending_parents}
                    </span>
                  )}
                </td>
                <td class="ellipsis">
                  {j.termination_reason ?? ''}
                  {j.cancelled_job_group_id !== null && j.cancelled_job_group_id !== undefined
                    ? ` (group ${j.cancelled_job_group_id})`
                    : ''}
                </td>
                <td>{j.submission_count}</td>
                <td>
                  {s ? (
                    <>
                      #{s.submission_num} <Time at={s.finished_at ?? s.started_at ?? s.submitted_at} />
                    </>
                  ) : (
                    '–'
                  )}
                </td>
                <td>{money(s?.cost_usd)}</td>
              </tr>
            );
          })}
          {last < jobs.length && (
            <tr aria-hidden="true" style={{ height: `${(jobs.length - last) * ROW}px` }}>
              <td colSpan={8} />
            </tr>
          )}
          {next !== null && (
            <tr>
              <td colSpan={8} class="muted" role="status">
                Loading jobs…
              </td>
            </tr>
          )}
          {next === null && jobs.length === 0 && (
            <tr>
              <td colSpan={8} class="muted">
                No jobs in this group{props.recursive ? ' or below it' : ''}.
              </td>
            </tr>
          )}
        </tbody>
      </table>
    </div>
  );
}
