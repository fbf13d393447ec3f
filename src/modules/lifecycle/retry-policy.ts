import { isRetryableStatus, RETRY_EVENT_OF_REASON, type RetryEvent, type TerminationReason } from './vocabulary';

export interface RetryPolicy {
  on_events: RetryEvent[];
  duration_s?: number;
  max_attempts?: number;
}

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
  if (!policy || !isRetryableStatus(status)) return false;
  const event = RETRY_EVENT_OF_REASON[reason as TerminationReason];
  if (!event || !policy.on_events.includes(event)) return false;
  if (policy.max_attempts !== undefined && attemptsSoFar >= policy.max_attempts) return false;
  const duration = policy.duration_s ?? (policy.max_attempts === undefined ? DEFAULT_RETRY_DURATION_S : undefined);
  return duration === undefined || now.getTime() - jobSubmittedAt.getTime() < duration * 1000;
}
