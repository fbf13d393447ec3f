import type { ExecutionResult } from './executor';

/** A final report, as `POST /internal/v1/submissions/{id}/complete` takes it. */
export interface FinalReport {
  status: 'done' | 'failed' | 'terminated' | 'aborted';
  termination_reason:
    | 'done_by_runner'
    | 'container_exited_with_error'
    | 'max_duration_exceeded'
    | 'log_quota_exceeded'
    | 'interrupted_by_no_capacity'
    | 'failed_to_start_due_to_no_capacity'
    | 'executor_error'
    | 'instance_unreachable'
    | string;
  exit_status?: number;
  runtime_data?: Record<string, unknown>;
}

/**
 * What to report for a job that ended, or null when nothing may be reported (the worker lost the submission).
 * Whatever made the worker stop the job decides; otherwise its exit status does. `started`: the server accepted
 * `running` for it (before that, only a failure to start, a cancellation or an abort may be reported).
 */
export function outcomeOf(result: ExecutionResult, started: boolean, memoryLimitMib: number): FinalReport | null {
  const cause = result.stoppedBy;
  if (cause?.kind === 'lost') return null;
  const runtime_data: Record<string, unknown> = {
    exit_status: result.exitStatus,
    wall_s: round(result.wallS, 3),
    cpu_s: result.cpuS === null ? null : round(result.cpuS, 3),
    peak_memory_mib: result.peakMemoryMib === null ? null : round(result.peakMemoryMib, 1),
    memory_limit_mib: memoryLimitMib,
    memory_enforcement: result.memoryMode,
  };
  if (cause) runtime_data.stopped_by = cause.kind;
  const report = (r: Omit<FinalReport, 'runtime_data'>): FinalReport => ({ ...r, runtime_data });
  const exit_status = result.exitStatus;
  switch (cause?.kind) {
    case 'cancel':
      return report({ status: cause.status, termination_reason: cause.reason, exit_status });
    case 'shutdown':
      return started
        ? report({ status: 'failed', termination_reason: 'interrupted_by_no_capacity', exit_status })
        : report({ status: 'failed', termination_reason: 'failed_to_start_due_to_no_capacity' });
    case 'max_duration':
      return report({ status: 'terminated', termination_reason: 'max_duration_exceeded', exit_status });
    case 'log_quota':
      return report({ status: 'failed', termination_reason: 'log_quota_exceeded', exit_status });
    case 'memory':
      runtime_data.oom_killed = true;
      return report({ status: 'failed', termination_reason: 'container_exited_with_error', exit_status });
    default:
      return exit_status === 0
        ? report({ status: 'done', termination_reason: 'done_by_runner', exit_status })
        : report({ status: 'failed', termination_reason: 'container_exited_with_error', exit_status });
  }
}

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;
