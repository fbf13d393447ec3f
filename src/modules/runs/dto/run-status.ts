export const RUN_STATUSES = [
  'pending',
  'submitted',
  'provisioning',
  'running',
  'terminating',
  'terminated',
  'failed',
  'done',
] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export const FINISHED_RUN_STATUSES: readonly RunStatus[] = ['terminated', 'failed', 'done'];

export { RETRY_EVENTS, type RetryEvent } from '../../lifecycle/vocabulary';
export type { RetryPolicy } from '../../lifecycle/retry-policy';
import type { RetryPolicy } from '../../lifecycle/retry-policy';

export interface RunSpec {
  retry?: RetryPolicy;
}

/** What run status is derived from: the root group's recursive counters, active counts, and a stop. */
export interface RunFacts {
  nJobs: number;
  nCompleted: number;
  nSucceeded: number;
  nFailed: number;
  nCancelled: number;
  nProvisioning: number;
  nRunning: number;
  nRetrying: number;
  /** Reason the run (job group 0) was cancelled, if it was. */
  stopReason: string | null;
}

export interface DerivedRunStatus {
  status: RunStatus;
  statusMessage: string | null;
  terminationReason: string | null;
}

/**
 * Run status from counters alone, never from history. A run is finished when every job is counted complete and
 * nothing still runs on a worker; until then it shows the most advanced activity of its jobs.
 */
export function deriveRunStatus(f: RunFacts): DerivedRunStatus {
  const onWorkers = f.nProvisioning + f.nRunning;
  const allCounted = f.nCompleted >= f.nJobs;
  if (f.stopReason !== null) {
    if (onWorkers > 0 || !allCounted)
      return { status: 'terminating', statusMessage: 'stopping', terminationReason: f.stopReason };
    return { status: 'terminated', statusMessage: null, terminationReason: f.stopReason };
  }
  if (f.nJobs === 0) return { status: 'submitted', statusMessage: 'no jobs yet', terminationReason: null };
  if (allCounted) {
    if (onWorkers > 0)
      return { status: 'terminating', statusMessage: 'stopping cancelled jobs', terminationReason: null };
    if (f.nFailed > 0) return { status: 'failed', statusMessage: null, terminationReason: 'job_failed' };
    if (f.nSucceeded === f.nJobs) return { status: 'done', statusMessage: null, terminationReason: 'all_jobs_done' };
    return { status: 'terminated', statusMessage: null, terminationReason: 'job_group_cancelled' };
  }
  const retrying = f.nRetrying > 0 ? 'retrying' : null;
  if (f.nRunning > 0) return { status: 'running', statusMessage: retrying, terminationReason: null };
  if (f.nProvisioning > 0) return { status: 'provisioning', statusMessage: retrying, terminationReason: null };
  if (f.nRetrying > 0 && f.nRetrying >= f.nJobs - f.nCompleted)
    return { status: 'pending', statusMessage: 'retrying', terminationReason: null };
  return { status: 'submitted', statusMessage: retrying, terminationReason: null };
}
