import type { RetryEvent, RetryPolicy } from '../runs/dto/run-status';

const EVENT_OF_REASON: Record<string, RetryEvent> = {
  failed_to_start_due_to_no_capacity: 'no_capacity',
  interrupted_by_no_capacity: 'no_capacity',
  instance_unreachable: 'interruption',
  container_exited_with_error: 'error',
  executor_error: 'error',
};

/** Without a duration or an attempt limit, retries stop an hour after the job was submitted (as dstack's default). */
export const DEFAULT_RETRY_DURATION_S = 3600;

/** Whether a failed attempt is retried: its event is in the policy, within the attempt limit and the duration. */
export function shouldRetry(
  policy: RetryPolicy | undefined,
  status: string,
  reason: string,
  attemptsSoFar: number,
  jobSubmittedAt: Date,
  now = new Date(),
): boolean {
  if (!policy || (status !== 'failed' && status !== 'terminated')) return false;
  const event = EVENT_OF_REASON[reason];
  if (!event || !policy.on_events.includes(event)) return false;
  if (policy.max_attempts !== undefined && attemptsSoFar >= policy.max_attempts) return false;
  const duration = policy.duration_s ?? (policy.max_attempts === undefined ? DEFAULT_RETRY_DURATION_S : undefined);
  return duration === undefined || now.getTime() - jobSubmittedAt.getTime() < duration * 1000;
}
