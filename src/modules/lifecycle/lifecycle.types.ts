import type { DomainError } from '../../common/errors/domain-error';
import type { FinishedStatus, TerminationReason } from './vocabulary';

/** A worker's claim: what it can take (the internal API's DTOs have this shape, validated). */
export interface ClaimInput {
  worker_id: string;
  capacity: { cpu: number; memory_mib: number; gpu?: number };
  limit?: number;
  /** What the worker can run beyond plain processes: a container runtime lets it take jobs that ask for an image. */
  capabilities?: { container_runtime?: string };
}

export interface RunningInput {
  worker_id: string;
  provisioning_data?: Record<string, unknown>;
}

export interface HeartbeatInput {
  worker_id: string;
  runtime_data?: Record<string, unknown>;
}

export interface CompleteInput {
  worker_id: string;
  status: FinishedStatus;
  termination_reason: TerminationReason;
  exit_status?: number;
  runtime_data?: Record<string, unknown>;
}

/** One submission's answer in a worker's batched heartbeat. */
export interface HeartbeatItem {
  submission_id: string;
  /** False when the worker no longer holds it (finished, lapsed, another's, unknown): stop it, report nothing. */
  held: boolean;
  cancel_requested: boolean;
  /** With cancel_requested: the final status and reason to report once the process is stopped. */
  status: 'terminated' | 'aborted' | null;
  reason: TerminationReason | null;
  lease_expires_at: string | null;
}

/** A claimed submission as the worker gets it. */
export interface ClaimedSubmission {
  id: string;
  job_id: string;
  run_id: string;
  job_group_id: number;
  job_num: number;
  replica_num: number;
  job_name: string;
  run_name: string;
  submission_num: number;
  spec: unknown;
  lease_expires_at: string;
}

/** The answer to a final report: the outcome recorded, and the next submission if the job is retried. */
export interface CompleteResult {
  submission_id: string;
  status: string;
  termination_reason: string;
  retry_submission: { id: string; submission_num: number } | null;
}

/** The answer to `running`. */
export interface RunningAnswer {
  status: string;
  lease_expires_at: string | null;
}

/** The answer to a submission's heartbeat. */
export interface HeartbeatAnswer {
  cancel_requested: boolean;
  lease_expires_at: string;
}

/** A worker's report about one of its submissions, as one of the report routes (or a batch) carries it. */
export type Report =
  | { kind: 'running'; submissionId: string; body: RunningInput }
  | { kind: 'heartbeat'; submissionId: string; body: HeartbeatInput }
  | { kind: 'complete'; submissionId: string; body: CompleteInput };

export type ReportKind = Report['kind'];

/** What a report's route answers: the answer, or the error it would have been refused with. */
export type ReportOutcome =
  | { answer: RunningAnswer | HeartbeatAnswer | CompleteResult; error?: undefined }
  | { answer?: undefined; error: DomainError };
