import type { ActiveCounts, Counts } from '../job-groups/job-groups.service';
import type { SubmissionStatus } from '../jobs/dto/job-spec';
import type { JobCounts } from './dto/run-view.dto';

/**
 * A run's jobs by the status its views show, from its root group's counters: done, failed, aborted and terminated
 * are counted outcomes (a cancellation counts the jobs it stops when it happens, so a job under a cancelled group
 * is `terminated`/`aborted` here as in the job views); the jobs not yet counted are split by the run's active
 * counts and its pending jobs (waiting for parents), less `cancelled` (jobs still on workers or pending below a
 * cancellation: those show as cancelled).
 *
 * The counters keep `running` and `terminating` as one count (no transition sets `terminating` today); they show
 * as `running`.
 */
export function deriveJobCounts(
  root: Counts & ActiveCounts,
  cancelled: Partial<Record<SubmissionStatus, number>> = {},
): JobCounts {
  const notCounted = root.nJobs - root.nCompleted;
  const pending = root.nPending - (cancelled.pending ?? 0);
  const provisioning = root.nProvisioning - (cancelled.provisioning ?? 0);
  const running = root.nRunning - (cancelled.running ?? 0) - (cancelled.terminating ?? 0);
  const all: JobCounts = {
    pending,
    submitted: notCounted - pending - provisioning - running,
    provisioning,
    running,
    done: root.nSucceeded,
    failed: root.nFailed,
    terminated: root.nCancelled - root.nAborted,
    aborted: root.nAborted,
  };
  const out: JobCounts = {};
  for (const [status, n] of Object.entries(all) as [SubmissionStatus, number][]) if (n !== 0) out[status] = n;
  return out;
}
