import { MigrationInterface, QueryRunner } from 'typeorm';

/** How many token rows each group's counters are spread over (COUNTER_TOKENS in the job-groups module). */
const TOKENS = 16;

/**
 * A group's counters become TOKENS rows (run_id, job_group_id, token), every one present from the group's creation:
 * a transaction adds its deltas to the rows of its own token, readers sum the rows. Completions in one run then no
 * longer queue on one root row. What held per row and no longer can (a job counted on one token, started on another)
 * moves to the invariants report, which checks the sums against the jobs; what every delta keeps per row stays.
 *
 * Groups also keep the status their views last showed (`status`): with counts spread over rows no transaction sees
 * the whole of, a status change is found after the commits that make it, by comparing the derived status with this
 * column (RunStatusService's settle), which then records the `group.status` event.
 */
export class ShardJobGroupCounters1766620800000 implements MigrationInterface {
  name = 'ShardJobGroupCounters1766620800000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE job_groups ADD COLUMN status varchar(16) NOT NULL DEFAULT 'success'`);
    await q.query(
      `ALTER TABLE job_groups ADD CONSTRAINT ck_job_groups_status
         CHECK (status IN ('running', 'success', 'failure', 'cancelled'))`,
    );
    // Each group's status as its view shows it now (see group-counts.ts: effectiveCounts, groupStatus).
    await q.query(
      `WITH chain AS (
         SELECT sa.run_id, sa.job_group_id,
                bool_or(x.run_id IS NOT NULL) AS cancelled,
                bool_or(x.reason = 'aborted_by_user') AS aborted
           FROM job_group_self_and_ancestors sa
           LEFT JOIN job_groups_cancelled x ON x.run_id = sa.run_id AND x.job_group_id = sa.ancestor_id
          GROUP BY sa.run_id, sa.job_group_id
       ), eff AS (
         SELECT c.run_id, c.job_group_id, c.n_jobs, c.n_failed,
                c.n_completed + p.stopped AS completed, c.n_cancelled + p.stopped AS cancelled_jobs, ch.cancelled
           FROM job_group_counters c
           JOIN chain ch ON ch.run_id = c.run_id AND ch.job_group_id = c.job_group_id
           CROSS JOIN LATERAL (
             SELECT CASE WHEN ch.cancelled
                         THEN c.n_jobs - c.n_completed - CASE WHEN ch.aborted THEN 0 ELSE c.n_always_run_open END
                         ELSE 0 END AS stopped
           ) p
       )
       UPDATE job_groups g
          SET status = CASE WHEN e.n_failed > 0 THEN 'failure'
                            WHEN e.cancelled OR (e.completed = e.n_jobs AND e.cancelled_jobs > 0) THEN 'cancelled'
                            WHEN e.completed = e.n_jobs THEN 'success'
                            ELSE 'running' END
         FROM eff e
        WHERE g.run_id = e.run_id AND g.job_group_id = e.job_group_id`,
    );

    await q.query(`ALTER TABLE job_group_counters DROP CONSTRAINT pk_job_group_counters`);
    await q.query(`ALTER TABLE job_group_counters ADD COLUMN token smallint NOT NULL DEFAULT 0`);
    await q.query(
      `ALTER TABLE job_group_counters ADD CONSTRAINT pk_job_group_counters PRIMARY KEY (run_id, job_group_id, token)`,
    );
    await q.query(
      `ALTER TABLE job_group_counters ADD CONSTRAINT ck_job_group_counters_token
         CHECK (token BETWEEN 0 AND ${TOKENS - 1})`,
    );
    await q.query(
      `INSERT INTO job_group_counters (run_id, job_group_id, token, cancelled)
       SELECT c.run_id, c.job_group_id, t, c.cancelled FROM job_group_counters c CROSS JOIN generate_series(1, $1) t`,
      [TOKENS - 1],
    );
    // Per row now: a row's own deltas keep these; the rest (no negative sum, none past n_jobs) is checked on sums.
    await q.query(`ALTER TABLE job_group_counters DROP CONSTRAINT ck_job_group_counters_active`);
    await q.query(
      `ALTER TABLE job_group_counters ADD CONSTRAINT ck_job_group_counters_active
         CHECK (job_group_id = 0 OR (n_provisioning = 0 AND n_running = 0 AND n_retrying = 0))`,
    );
    await q.query(`ALTER TABLE job_group_counters DROP CONSTRAINT ck_job_group_counters_sum`);
    await q.query(
      `ALTER TABLE job_group_counters ADD CONSTRAINT ck_job_group_counters_sum
         CHECK (n_completed = n_succeeded + n_failed + n_cancelled)`,
    );
    await q.query(`ALTER TABLE job_group_counters DROP CONSTRAINT ck_job_group_counters_always_run_open`);
    await q.query(`ALTER TABLE job_group_counters DROP CONSTRAINT ck_job_group_counters_pending`);
    // The settle loop walks unfinished runs by id, a slice per pass, past however many finished ones there are.
    await q.query(`CREATE INDEX idx_runs_unfinished ON runs (id) WHERE finished_at IS NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX idx_runs_unfinished`);
    await q.query(
      `WITH folded AS (
         DELETE FROM job_group_counters WHERE token <> 0
         RETURNING run_id, job_group_id, n_jobs, n_completed, n_succeeded, n_failed, n_cancelled, n_aborted,
                   n_always_run_open, n_provisioning, n_running, n_retrying, n_pending
       ), sums AS (
         SELECT run_id, job_group_id, sum(n_jobs) AS n_jobs, sum(n_completed) AS n_completed,
                sum(n_succeeded) AS n_succeeded, sum(n_failed) AS n_failed, sum(n_cancelled) AS n_cancelled,
                sum(n_aborted) AS n_aborted, sum(n_always_run_open) AS n_always_run_open,
                sum(n_provisioning) AS n_provisioning, sum(n_running) AS n_running, sum(n_retrying) AS n_retrying,
                sum(n_pending) AS n_pending
           FROM folded GROUP BY run_id, job_group_id
       )
       UPDATE job_group_counters c
          SET n_jobs = c.n_jobs + s.n_jobs, n_completed = c.n_completed + s.n_completed,
              n_succeeded = c.n_succeeded + s.n_succeeded, n_failed = c.n_failed + s.n_failed,
              n_cancelled = c.n_cancelled + s.n_cancelled, n_aborted = c.n_aborted + s.n_aborted,
              n_always_run_open = c.n_always_run_open + s.n_always_run_open,
              n_provisioning = c.n_provisioning + s.n_provisioning, n_running = c.n_running + s.n_running,
              n_retrying = c.n_retrying + s.n_retrying, n_pending = c.n_pending + s.n_pending
         FROM sums s
        WHERE c.run_id = s.run_id AND c.job_group_id = s.job_group_id AND c.token = 0`,
    );
    await q.query(`ALTER TABLE job_group_counters DROP CONSTRAINT ck_job_group_counters_token`);
    await q.query(`ALTER TABLE job_group_counters DROP CONSTRAINT pk_job_group_counters`);
    await q.query(`ALTER TABLE job_group_counters DROP COLUMN token`);
    await q.query(
      `ALTER TABLE job_group_counters ADD CONSTRAINT pk_job_group_counters PRIMARY KEY (run_id, job_group_id)`,
    );
    await q.query(`ALTER TABLE job_group_counters DROP CONSTRAINT ck_job_group_counters_active`);
    await q.query(
      `ALTER TABLE job_group_counters ADD CONSTRAINT ck_job_group_counters_active
         CHECK (n_provisioning >= 0 AND n_running >= 0 AND n_retrying >= 0
                AND (job_group_id = 0 OR n_provisioning + n_running + n_retrying = 0))`,
    );
    await q.query(`ALTER TABLE job_group_counters DROP CONSTRAINT ck_job_group_counters_sum`);
    await q.query(
      `ALTER TABLE job_group_counters ADD CONSTRAINT ck_job_group_counters_sum
         CHECK (n_completed = n_succeeded + n_failed + n_cancelled AND n_completed <= n_jobs AND n_completed >= 0)`,
    );
    await q.query(
      `ALTER TABLE job_group_counters ADD CONSTRAINT ck_job_group_counters_always_run_open
         CHECK (n_always_run_open >= 0 AND n_always_run_open <= n_jobs - n_completed)`,
    );
    await q.query(`ALTER TABLE job_group_counters ADD CONSTRAINT ck_job_group_counters_pending CHECK (n_pending >= 0)`);
    await q.query(`ALTER TABLE job_groups DROP CONSTRAINT ck_job_groups_status`);
    await q.query(`ALTER TABLE job_groups DROP COLUMN status`);
  }
}
