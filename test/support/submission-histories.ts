import type { DataSource, EntityManager } from 'typeorm';
import type { SubmissionView } from './run-views';
import { required } from '../../src/common/required';

/*
 * Submission histories written straight into job_submissions (faster than driving a worker through hundreds of
 * retries), with the job rows' denormalised facts pointed at the newest row written, because the list and the
 * latest-submission walk trust those facts.
 */

/** Anything with the database: a TestApp, or a bare DataSource's holder in the repository tier. */
export interface Db {
  dataSource: DataSource;
}

/** Base time of the submissions the helpers write: submission n is submitted at BASE + n seconds. */
export const SUBMISSIONS_BASE = Date.parse('2025-06-01T00:00:00.000Z');
export const submittedAtOf = (num: number) => new Date(SUBMISSIONS_BASE + num * 1000).toISOString();
export const finishedAtOf = (num: number) => new Date(SUBMISSIONS_BASE + num * 1000 + 500).toISOString();

export type SubmissionInput = number | { num: number; status?: string; reason?: string | null };

export interface WrittenSubmission {
  id: string;
  num: number;
  status: string;
  reason: string | null;
}

/**
 * Gives job `jobId` exactly the submissions `subs` (its previous history is dropped), e.g. [0, 1, 2, 5, 6, 9].
 * Defaults: older submissions `failed`/`failed_to_start_due_to_no_capacity`, the newest `running` with no reason.
 * The job's facts (latest id/num, submission_count = newest num + 1, status, termination_reason) follow the newest.
 * Returns the written rows, ascending.
 */
export async function giveHistory(t: Db, jobId: string, subs: SubmissionInput[]): Promise<WrittenSubmission[]> {
  const specs = subs.map((s) => (typeof s === 'number' ? { num: s } : s)).sort((a, b) => a.num - b.num);
  if (specs.length === 0) throw new Error('a job keeps at least one submission');
  const maxNum = specs[specs.length - 1].num;
  const rows = specs.map((s) => ({
    num: s.num,
    status: s.status ?? (s.num === maxNum ? 'running' : 'failed'),
    reason: s.reason !== undefined ? s.reason : s.num === maxNum ? null : 'failed_to_start_due_to_no_capacity',
  }));
  return t.dataSource.transaction(async (m) => {
    await m.query('DELETE FROM job_submissions WHERE job_id = $1', [jobId]);
    const inserted: { id: string; submission_num: number }[] = await m.query(
      `INSERT INTO job_submissions (id, job_id, run_id, job_group_id, submission_num, status, termination_reason,
                                    priority, cpu, memory_mib, gpu, submitted_at, finished_at, provisioning_data,
                                    runtime_data)
       SELECT gen_random_uuid(), j.id, j.run_id, j.job_group_id, v.num, v.status, v.reason, 0,
              (j.spec->'resources'->>'cpu')::numeric, (j.spec->'resources'->>'memory_mib')::int,
              coalesce((j.spec->'resources'->>'gpu')::int, 0),
              $2::timestamptz + v.num * interval '1 second',
              CASE WHEN v.status IN ('done', 'failed', 'terminated', 'aborted')
                   THEN $2::timestamptz + v.num * interval '1 second' + interval '500 milliseconds' END,
              jsonb_build_object('attempt', v.num), jsonb_build_object('job', j.id::text, 'num', v.num)
         FROM jobs j, unnest($3::int[], $4::text[], $5::text[]) AS v(num, status, reason)
        WHERE j.id = $1
       RETURNING id, submission_num`,
      [
        jobId,
        new Date(SUBMISSIONS_BASE).toISOString(),
        rows.map((r) => r.num),
        rows.map((r) => r.status),
        rows.map((r) => r.reason),
      ],
    );
    if (inserted.length !== rows.length) throw new Error(`job ${jobId} not found`);
    await pointFactsAtNewest(m, [jobId]);
    const idOf = new Map(inserted.map((r) => [r.submission_num, r.id]));
    return rows.map((r) => ({ ...r, id: required(idOf.get(r.num), `submission ${r.num}`) }));
  });
}

/** Sets each job's denormalised facts from its newest existing submission. */
export async function pointFactsAtNewest(m: EntityManager, jobIds: string[]): Promise<void> {
  await m.query(
    `UPDATE jobs j
        SET latest_submission_id = s.id, latest_submission_num = s.submission_num,
            submission_count = s.submission_num + 1, status = s.status, termination_reason = s.termination_reason
       FROM (SELECT DISTINCT ON (job_id) job_id, id, submission_num, status, termination_reason
               FROM job_submissions WHERE job_id = ANY($1::uuid[]) ORDER BY job_id, submission_num DESC) s
      WHERE j.id = s.job_id`,
    [jobIds],
  );
}

/** The numbers seriesHistory writes: 0, then 1..to except those with n % mod = rem. */
export function seriesNums(to: number, gap?: { mod: number; rem: number }): number[] {
  const out = [0];
  for (let n = 1; n <= to; n++) if (!gap || n % gap.mod !== gap.rem) out.push(n);
  return out;
}

/**
 * Deep histories in one statement (generate_series) for many jobs: keeps submission 0 (made `failed`), adds
 * 1..to except n % mod = rem; the newest (`to`, which must be kept) is `running`.
 */
export async function seriesHistory(
  t: Db,
  jobIds: string[],
  to: number,
  gap?: { mod: number; rem: number },
): Promise<void> {
  if (gap && to % gap.mod === gap.rem) throw new Error('the newest submission must exist');
  await t.dataSource.transaction(async (m) => {
    await m.query(
      `UPDATE job_submissions SET status = 'failed', termination_reason = 'interrupted_by_no_capacity'
        WHERE job_id = ANY($1::uuid[]) AND submission_num = 0`,
      [jobIds],
    );
    await m.query(
      `INSERT INTO job_submissions (id, job_id, run_id, job_group_id, submission_num, status, termination_reason,
                                    priority, cpu, memory_mib, gpu, submitted_at, finished_at, provisioning_data,
                                    runtime_data)
       SELECT gen_random_uuid(), j.id, j.run_id, j.job_group_id, g,
              CASE WHEN g = $2 THEN 'running' ELSE 'failed' END,
              CASE WHEN g = $2 THEN NULL ELSE 'interrupted_by_no_capacity' END,
              0, 1, 1024, 0,
              $5::timestamptz + g * interval '1 second',
              CASE WHEN g = $2 THEN NULL
                   ELSE $5::timestamptz + g * interval '1 second' + interval '500 milliseconds' END,
              jsonb_build_object('attempt', g), jsonb_build_object('job', j.id::text, 'num', g)
         FROM jobs j CROSS JOIN generate_series(1, $2::int) AS g
        WHERE j.id = ANY($1::uuid[]) AND ($3::int IS NULL OR g % $3::int <> $4::int)`,
      [jobIds, to, gap?.mod ?? null, gap?.rem ?? 0, new Date(SUBMISSIONS_BASE).toISOString()],
    );
    await pointFactsAtNewest(m, jobIds);
  });
}

/** Ground truth straight from the table: the newest `n` submissions of a job, ascending. */
export async function newestInDb(t: Db, jobId: string, n: number): Promise<{ id: string; num: number }[]> {
  const rows: { id: string; submission_num: number }[] = await t.dataSource.query(
    `SELECT id, submission_num
       FROM (SELECT id, submission_num FROM job_submissions WHERE job_id = $1 ORDER BY submission_num DESC LIMIT $2) x
      ORDER BY submission_num`,
    [jobId, n],
  );
  return rows.map((r) => ({ id: r.id, num: r.submission_num }));
}

/** What the API must show for a submission the helpers wrote. */
export function expectedSubmission(jobId: string, s: WrittenSubmission): Omit<SubmissionView, 'cost_usd'> {
  const finished = ['done', 'failed', 'terminated', 'aborted'].includes(s.status);
  return {
    id: s.id,
    submission_num: s.num,
    status: s.status,
    termination_reason: s.reason,
    exit_status: null,
    submitted_at: submittedAtOf(s.num),
    started_at: null,
    finished_at: finished ? finishedAtOf(s.num) : null,
    provisioning_data: { attempt: s.num },
    runtime_data: { job: jobId, num: s.num },
  };
}
