import 'reflect-metadata';
import { plainToInstance } from 'class-transformer';
import { validateSync } from 'class-validator';
import { cancelledJobOutcome } from '../../src/modules/lifecycle/outcomes';
import { SYSTEM_CANCEL_REASONS } from '../../src/modules/lifecycle/vocabulary';
import {
  FINISHED_STATUSES,
  heldStatusesAllowing,
  isAllowedPair,
  isAllowedTransition,
  isWorkerReportable,
  SUBMISSION_STATUSES,
  TERMINATION_REASONS,
} from '../../src/modules/lifecycle/vocabulary';
import { CompleteDto } from '../../src/modules/workers/dto/worker.dto';

/**
 * The expected state machine, written out here independently of the table in src/: every combination of the
 * vocabulary is checked against it, so a change to either one that the other does not share fails.
 */
const CANCEL = 'stopped_by_user job_group_cancelled fail_fast budget_exceeded';
const FAILED =
  'failed_to_start_due_to_no_capacity interrupted_by_no_capacity instance_unreachable container_exited_with_error ' +
  'executor_error log_quota_exceeded';
const PAIRS = `
  done: done_by_runner
  failed: ${FAILED}
  terminated: ${CANCEL} max_duration_exceeded dependency_failed
  aborted: aborted_by_user`;
const FROM_STARTED = `
  done: done_by_runner
  failed: ${FAILED}
  terminated: ${CANCEL} max_duration_exceeded
  aborted: aborted_by_user`;
const MOVES: Record<string, string> = {
  pending: `
    submitted
    terminated: ${CANCEL} dependency_failed
    aborted: aborted_by_user`,
  submitted: `
    provisioning
    terminated: ${CANCEL} dependency_failed
    aborted: aborted_by_user`,
  provisioning: `
    running
    terminating
    failed: failed_to_start_due_to_no_capacity executor_error instance_unreachable
    terminated: ${CANCEL}
    aborted: aborted_by_user`,
  running: `terminating ${FROM_STARTED}`,
  terminating: FROM_STARTED,
  done: '',
  failed: '',
  terminated: '',
  aborted: '',
};

/** `to: r1 r2` lines (or bare `to` words for moves without a reason) → the set of "to" and "to/reason" keys. */
function parse(text: string): Set<string> {
  const keys = new Set<string>();
  for (const line of text
    .trim()
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)) {
    const m = /^(\w+): (.+)$/.exec(line);
    if (m) for (const r of m[2].split(' ')) keys.add(`${m[1]}/${r}`);
    else for (const to of line.split(' ')) keys.add(to);
  }
  return keys;
}

const reasonsOrNone = [undefined, ...TERMINATION_REASONS];

describe('lifecycle vocabulary: the state machine as data', () => {
  it('every (status, reason) pair is allowed or refused as the expected table says', () => {
    const expected = parse(PAIRS);
    const checked: string[] = [];
    for (const status of [...SUBMISSION_STATUSES, 'bogus']) {
      for (const reason of [...TERMINATION_REASONS, 'bogus']) {
        expect([status, reason, isAllowedPair(status, reason)]).toEqual([
          status,
          reason,
          expected.has(`${status}/${reason}`),
        ]);
        checked.push(`${status}/${reason}`);
      }
    }
    expect(checked).toHaveLength(10 * 15); // 9 statuses and a bogus one, 14 reasons and a bogus one
    // Every reason belongs to exactly one final status.
    for (const reason of TERMINATION_REASONS)
      expect([reason, FINISHED_STATUSES.filter((s) => isAllowedPair(s, reason)).length]).toEqual([reason, 1]);
  });

  it('every transition (from, to, reason) is allowed or refused as the expected table says', () => {
    for (const from of SUBMISSION_STATUSES) {
      const expected = parse(MOVES[from]);
      for (const to of SUBMISSION_STATUSES) {
        for (const reason of reasonsOrNone) {
          const key = reason === undefined ? to : `${to}/${reason}`;
          expect([from, key, isAllowedTransition(from, to, reason)]).toEqual([from, key, expected.has(key)]);
        }
      }
    }
  });

  it('every allowed final move carries an allowed pair, and nothing leaves a finished status', () => {
    for (const from of SUBMISSION_STATUSES) {
      for (const to of FINISHED_STATUSES) {
        for (const reason of TERMINATION_REASONS)
          if (isAllowedTransition(from, to, reason))
            expect([to, reason, isAllowedPair(to, reason)]).toEqual([to, reason, true]);
      }
    }
    for (const from of FINISHED_STATUSES)
      for (const to of SUBMISSION_STATUSES)
        for (const reason of reasonsOrNone) expect(isAllowedTransition(from, to, reason)).toBe(false);
  });

  it('a worker may report every pair but the server-only dependency_failed, from the held statuses allowed', () => {
    const expected = parse(PAIRS);
    expected.delete('terminated/dependency_failed');
    for (const status of FINISHED_STATUSES)
      for (const reason of TERMINATION_REASONS)
        expect([status, reason, isWorkerReportable(status, reason)]).toEqual([
          status,
          reason,
          expected.has(`${status}/${reason}`),
        ]);
    expect(heldStatusesAllowing('done', 'done_by_runner')).toEqual(['running', 'terminating']);
    expect(heldStatusesAllowing('failed', 'executor_error')).toEqual(['provisioning', 'running', 'terminating']);
    expect(heldStatusesAllowing('failed', 'container_exited_with_error')).toEqual(['running', 'terminating']);
    expect(heldStatusesAllowing('terminated', 'dependency_failed')).toEqual([]);
  });

  it('the complete DTO accepts exactly the worker-reportable pairs, naming termination_reason otherwise', () => {
    for (const status of [...FINISHED_STATUSES, 'bogus']) {
      for (const reason of [...TERMINATION_REASONS, 'bogus', 42]) {
        const dto = plainToInstance(CompleteDto, { worker_id: 'w', status, termination_reason: reason });
        const fields = validateSync(dto).map((e) => e.property);
        const statusOk = (FINISHED_STATUSES as readonly string[]).includes(status);
        const pairOk = typeof reason === 'string' && isWorkerReportable(status, reason);
        expect([status, reason, fields.includes('status')]).toEqual([status, reason, !statusOk]);
        // With a bad status, the reason is judged on its own (refused only if no status allows it).
        const reasonOk = statusOk
          ? pairOk
          : FINISHED_STATUSES.some((s) => typeof reason === 'string' && isWorkerReportable(s, reason));
        expect([status, reason, fields.includes('termination_reason')]).toEqual([status, reason, !reasonOk]);
      }
    }
  });

  it("what the server itself writes fits the table: a cancellation's outcome for queued work, the lapsed lease", () => {
    for (const reason of [...SYSTEM_CANCEL_REASONS, 'job_group_cancelled']) {
      const outcome = cancelledJobOutcome({ reason } as Parameters<typeof cancelledJobOutcome>[0]);
      expect(isAllowedTransition('submitted', outcome.status, outcome.terminationReason)).toBe(true);
      // A job still waiting for its parents is ended the same way.
      expect(isAllowedTransition('pending', outcome.status, outcome.terminationReason)).toBe(true);
      // A worker that sees the cancellation (before or after starting) may report the same outcome.
      expect(isAllowedTransition('provisioning', outcome.status, outcome.terminationReason)).toBe(true);
      expect(isAllowedTransition('running', outcome.status, outcome.terminationReason)).toBe(true);
    }
    for (const from of ['provisioning', 'running', 'terminating'] as const)
      expect(isAllowedTransition(from, 'failed', 'instance_unreachable')).toBe(true);
  });
});
