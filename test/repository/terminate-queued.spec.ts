import { DataSource } from 'typeorm';
import { SubmissionsRepository } from '../../src/modules/jobs/submissions.repository';
import { inRolledBackTransaction, openDataSource, seedJob, seedRun } from '../support/repository-tier';
import { measure, rowsVisited } from '../support/sql-counting';

/**
 * Ending the queued submissions below a cancellation (the sweep, and a claim that meets them): only queued ones of
 * the given groups, always_run ones spared when asked, and never one the caller keeps (a claim's own, locked to
 * hand out: ending it too would count it twice and release its job's dependents twice).
 */
describe('SubmissionsRepository.terminateQueued', () => {
  let ds: DataSource;
  const repo = new SubmissionsRepository();
  beforeAll(async () => {
    ds = await openDataSource();
  });
  afterAll(() => ds.destroy());

  it('ends the queued submissions of the groups and their jobs, but those kept and other groups', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const run = await seedRun(m, { 1: 0, 2: 0 });
      const kept = await seedJob(m, run.runId, 1, 0);
      const ended = await seedJob(m, run.runId, 1, 1);
      const running = await seedJob(m, run.runId, 1, 2, { status: 'running', workerId: 'w-1' });
      const elsewhere = await seedJob(m, run.runId, 2, 3);
      const done = await repo.terminateQueued(m, run.runId, [1], 'terminated', 'job_group_cancelled', 10, true, [
        kept.submissionId,
      ]);
      expect(done).toEqual({ n: 1, retries: 0, jobIds: [ended.jobId] });
      const rows: { id: string; status: string; job_status: string }[] = await m.query(
        `SELECT s.id, s.status, j.status AS job_status FROM job_submissions s JOIN jobs j ON j.id = s.job_id
          WHERE s.run_id = $1 ORDER BY j.job_num`,
        [run.runId],
      );
      expect(rows.map((r) => [r.id, r.status, r.job_status])).toEqual([
        [kept.submissionId, 'submitted', 'submitted'],
        [ended.submissionId, 'terminated', 'terminated'],
        [running.submissionId, 'running', 'running'],
        [elsewhere.submissionId, 'submitted', 'submitted'],
      ]);
    });
  });
});

describe('SubmissionsRepository.terminateQueued in a big database', () => {
  let ds: DataSource;
  const repo = new SubmissionsRepository();
  beforeAll(async () => {
    ds = await openDataSource();
  });
  afterAll(() => ds.destroy());

  it("probes each victim's job by key: never reads all the database's jobs (they were hashed first)", async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const run = await seedRun(m, { 1: 0 });
      // 20,000 queued jobs under the cancelled group, each with its submission 0.
      await m.query(
        `WITH j AS (
           INSERT INTO jobs (id, run_id, job_group_id, job_num, replica_num, job_name, spec, status,
                             latest_submission_id, latest_submission_num, submission_count)
           SELECT gen_random_uuid(), $1, 1, k, 0, 'j', '{"commands": ["true"]}', 'submitted', gen_random_uuid(), 0, 1
             FROM generate_series(0, 19999) AS k
           RETURNING id, latest_submission_id
         )
         INSERT INTO job_submissions (id, job_id, run_id, job_group_id, submission_num, status, cpu, memory_mib)
         SELECT j.latest_submission_id, j.id, $1, 1, 0, 'submitted', 1, 1024 FROM j`,
        [run.runId],
      );
      await m.query('ANALYZE jobs, job_submissions');
      const measured = await measure({ dataSource: ds }, () =>
        repo.terminateQueued(m, run.runId, [1], 'terminated', 'job_group_cancelled', 10, true, []),
      );
      // EXPLAIN ANALYZE in the same transaction (the statement ends 10 more there, rolled back with the rest).
      const { visited } = await rowsVisited(m, measured, 'jobs');
      expect(visited).toBeLessThanOrEqual(3 * 10);
    });
  });
});
