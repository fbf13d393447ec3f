import { useEffect, useState } from 'preact/hooks';
import { api, call, type Job } from '../api';
import { enc, Link } from '../router';
import { CopyId, Status } from '../ui';
import { jobCache } from './jobs-table';
import { useKeysetPages } from '../keyset';

type Path = { project: string; runId: string };

/** `#3.1 name`: how the console names a job everywhere. */
export const jobLabel = (j: Job) => `#${j.job_num}${j.replica_num > 0 ? `.${j.replica_num}` : ''} ${j.job_name}`;

/** Runs whose first jobs were already read into the cache this session (names and parents never change). */
const runsRead = new Map<string, Promise<void>>();
const FALLBACK_JOBS = 1000;

/**
 * The first 1,000 jobs of the run (without their submissions) into the cache, once per run: the API has no
 * single-job route, and a job page opened by a deep link (or a parent not seen yet) has nothing else to go on.
 */
function readRunJobs({ project, runId }: Path): Promise<void> {
  let p = runsRead.get(runId);
  if (!p) {
    p = call(
      api().GET('/api/v1/projects/{project}/runs/{runId}', {
        params: {
          path: { project, runId },
          // Names and statuses only: no submission, and no documents on the latest one.
          query: { jobs_limit: FALLBACK_JOBS, job_submissions_limit: 0, submission_data: 'none' },
        },
      }),
    ).then(
      (run) => run.jobs.forEach((j) => jobCache.has(j.id) || jobCache.set(j.id, j)),
      (e: unknown) => {
        runsRead.delete(runId); // a later page may try again
        throw e;
      },
    );
    runsRead.set(runId, p);
  }
  return p;
}

/**
 * The job's view: from the cache (filled by the jobs table and the dependents list), else from the run's first
 * jobs. `null` once it is known not to be found that way (a job past the first 1,000 of a big run).
 */
export function useJobView(path: Path, jobId: string): Job | null | undefined {
  const [tried, setTried] = useState<string>();
  useEffect(() => {
    if (jobCache.has(jobId)) return;
    let live = true;
    const done = () => live && setTried(jobId);
    void readRunJobs(path).then(done, done);
    return () => void (live = false);
  }, [path.project, path.runId, jobId]);
  return jobCache.get(jobId) ?? (tried === jobId ? null : undefined);
}

/** A link to another job of the run, by name when the cache knows it, else by its id. */
function JobLink({ path, id }: { path: Path; id: string }) {
  const j = jobCache.get(id);
  const href = `/projects/${enc(path.project)}/runs/${path.runId}/jobs/${id}`;
  if (j)
    return (
      <>
        <Link href={href}>{jobLabel(j)}</Link> <Status status={j.status} />
      </>
    );
  return (
    <>
      <Link href={href}>job {id.slice(0, 8)}</Link> <CopyId id={id} label="job id" />
    </>
  );
}

/** Parents of the job (links), how many are still unfinished while it waits, and whether it is always_run. */
export function DependsOn({ path, job, waiting }: { path: Path; job: Job; waiting: boolean }) {
  const [, bump] = useState(0);
  // Parents not in the cache yet: one read of the run's first jobs names them (ids stay as they are past those).
  useEffect(() => {
    if (!job.depends_on.every((id) => jobCache.has(id)))
      void readRunJobs(path).then(
        () => bump((n) => n + 1),
        () => undefined, // the ids stay shown as ids
      );
  }, [job.id]);
  const alwaysRun = job.always_run === true;
  if (job.depends_on.length === 0 && !alwaysRun) return null;
  return (
    <section aria-labelledby="depends-on" data-testid="depends-on">
      <h2 id="depends-on">Depends on</h2>
      {alwaysRun && (
        <p>
          <span class="chip">always_run</span> runs once its parents have finished, whatever their outcome, and is not
          stopped by a group cancellation.
        </p>
      )}
      {waiting && job.n_pending_parents > 0 && (
        <p data-testid="pending-parents">
          Waiting on {job.n_pending_parents} of {job.depends_on.length} parent
          {job.depends_on.length === 1 ? '' : 's'}.
        </p>
      )}
      {job.depends_on.length === 0 ? (
        <p class="muted">No parents.</p>
      ) : (
        <ul class="job-list">
          {job.depends_on.map((id) => (
            <li key={id}>
              <JobLink path={path} id={id} />
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

/** Children of the job (jobs whose depends_on names it), one keyset page at a time. */
export function Dependents({ path, jobId }: { path: Path; jobId: string }) {
  const { items, next, error, more } = useKeysetPages<Job>(
    (cursor) =>
      call(
        api().GET('/api/v1/projects/{project}/runs/{runId}/jobs/{jobId}/dependents', {
          params: { path: { ...path, jobId }, query: { limit: 50, cursor } },
        }),
      ).then((page) => {
        page.items.forEach((j) => jobCache.set(j.id, j));
        return page;
      }),
    [path.project, path.runId, jobId],
  );

  // Nothing to say about a job no other job waits on.
  if (next === null && items.length === 0 && error === undefined) return null;
  return (
    <section aria-labelledby="dependents" data-testid="dependents">
      <h2 id="dependents">Dependents</h2>
      {error !== undefined && (
        <p role="alert" class="error">
          Could not load the dependents: {(error as Error).message}
        </p>
      )}
      {next === undefined && error === undefined && <p class="muted">Loading dependents…</p>}
      <ul class="job-list">
        {items.map((j) => (
          <li key={j.id}>
            <JobLink path={path} id={j.id} />
          </li>
        ))}
      </ul>
      {next && (
        <button type="button" onClick={() => void more()}>
          More dependents
        </button>
      )}
    </section>
  );
}
