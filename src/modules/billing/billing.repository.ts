import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { preparedQuery } from '../../infra/database/prepared';
import { type StatementRider, withRider } from '../../infra/database/rider';

export interface NewAttempt {
  submissionId: string;
  runId: string;
  jobId: string;
  projectId: string;
  userId: string;
  jobGroupIds: number[];
  /** The job spec's `resources`, key → requested quantity; keys map to billed resources in requestable_resources. */
  requested: Record<string, number>;
}

/** A row of requestable_resources, and whether its resource has a rate yet. */
export interface RequestableRow {
  specKey: string;
  resourceName: string;
  unit: string;
  factor: string;
  scale: number;
  minQuantity: string;
  maxQuantity: string;
  required: boolean;
  rated: boolean;
}

export interface ResourceRow {
  id: number;
  name: string;
  unit: string;
  rate: string;
  version: number;
  validFrom: Date;
}

/**
 * Hot aggregate rows are spread over this many shards; readers sum them (at most TOKENS rows per key and resource
 * until compaction folds them). With 8 workers completing jobs of one run, 16 shards made two transactions pick
 * the same shard about a third of the time, the second then waiting for the first's commit: 64 measured +5–9%
 * completions per second (lifecycle bench, three alternated pairs).
 */
export const TOKENS = 64;

/** The sharded aggregate tables and the key columns of one logical row (without the token). */
const SHARDED = [
  { table: 'billing_group_usage', keys: ['run_id', 'job_group_id', 'resource_id'] },
  { table: 'billing_run_usage', keys: ['run_id', 'resource_id'] },
  { table: 'billing_daily_usage', keys: ['project_id', 'user_id', 'day', 'resource_id'] },
];

const RESOURCE = `id, name, unit, rate_usd_per_unit_hour::text AS rate, version, valid_from AS "validFrom"`;
const CURRENT = `SELECT DISTINCT ON (name) id, name, unit, rate_usd_per_unit_hour, version, valid_from FROM resources
                   ORDER BY name, version DESC`;

@Injectable()
export class BillingRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  currentResources(m: EntityManager = this.dataSource.manager): Promise<ResourceRow[]> {
    return m.query(`SELECT ${RESOURCE} FROM (${CURRENT}) r ORDER BY name`);
  }

  /** Every requestable key with its billing mapping and bounds (a handful of rows), and whether it has a rate. */
  requestableResources(m: EntityManager = this.dataSource.manager): Promise<RequestableRow[]> {
    return m.query(
      `SELECT q.spec_key AS "specKey", q.resource_name AS "resourceName", q.unit, q.factor::text AS factor, q.scale,
              q.min_quantity::text AS "minQuantity", q.max_quantity::text AS "maxQuantity", q.required,
              EXISTS (SELECT 1 FROM resources r WHERE r.name = q.resource_name) AS rated
         FROM requestable_resources q
        ORDER BY q.spec_key`,
    );
  }

  /** The unit a billed resource is measured in, from the requestable key that maps to it; null when none does. */
  async unitOfBilledResource(m: EntityManager, name: string): Promise<string | null> {
    const rows: { unit: string }[] = await m.query(`SELECT unit FROM requestable_resources WHERE resource_name = $1`, [
      name,
    ]);
    return rows[0]?.unit ?? null;
  }

  /** A new version of a rate, in `unit` (the one its requestable key bills in). */
  async insertVersion(m: EntityManager, name: string, rate: number, unit: string): Promise<ResourceRow> {
    const rows: ResourceRow[] = await m.query(
      `INSERT INTO resources (name, unit, rate_usd_per_unit_hour, version)
       SELECT $1::varchar, $3::varchar, $2::numeric,
              COALESCE((SELECT max(r.version) FROM resources r WHERE r.name = $1::varchar), 0) + 1
       RETURNING ${RESOURCE}`,
      [name, rate, unit],
    );
    return rows[0];
  }

  /**
   * Starts billing submissions, in one statement: each attempt (its clock starts now) and, when it is new, one pinned
   * quantity per requested key whose billed resource has a rate: the requested quantity × the key's factor (exact:
   * the table's checks keep it within 10 decimals), against the resource's current rate version. Zero quantities and
   * keys of no table row are left out. An attempt that already was changes nothing (a repeated `running`). Returns
   * the ids of the attempts started.
   */
  async insertAttempts(m: EntityManager, attempts: readonly NewAttempt[]): Promise<string[]> {
    if (attempts.length === 0) return [];
    const sorted = [...attempts].sort((a, b) => (a.submissionId < b.submissionId ? -1 : 1));
    const rows = await preparedQuery<{ id: string }>(
      m,
      'billing_start_attempts',
      `WITH v AS (
         SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], $5::uuid[], $6::text[], $7::jsonb[])
           AS v(submission_id, run_id, job_id, project_id, user_id, job_group_ids, requested)
       ), a AS (
         INSERT INTO billing_attempts
           (submission_id, run_id, job_id, project_id, user_id, job_group_ids, started_at, rolled_up_to)
         SELECT submission_id, run_id, job_id, project_id, user_id, job_group_ids::int[], now(), now() FROM v
          ORDER BY submission_id
         ON CONFLICT (submission_id) DO NOTHING RETURNING submission_id
       ), q AS (
         SELECT v.submission_id, k.resource_name AS name, req.value::numeric * k.factor AS quantity
           FROM v CROSS JOIN LATERAL jsonb_each_text(v.requested) req
           JOIN requestable_resources k ON k.spec_key = req.key
       ), pinned AS (
         INSERT INTO submission_resources (submission_id, resource_id, quantity)
         SELECT a.submission_id, r.id, q.quantity
           FROM a JOIN q ON q.submission_id = a.submission_id JOIN (${CURRENT}) r ON r.name = q.name
          WHERE q.quantity > 0
         RETURNING 1
       )
       SELECT submission_id AS id FROM a`,
      [
        sorted.map((a) => a.submissionId),
        sorted.map((a) => a.runId),
        sorted.map((a) => a.jobId),
        sorted.map((a) => a.projectId),
        sorted.map((a) => a.userId),
        sorted.map((a) => `{${a.jobGroupIds.join(',')}}`),
        sorted.map((a) => JSON.stringify(a.requested)),
      ],
    );
    return rows.map((r) => r.id);
  }

  /**
   * Rolls open attempts up to now (`toNow`) or leaves their rollup where it is, closing them if asked, and adds what
   * accrued to every aggregate (job; each group of the chain; run; project × user × UTC day), all in one statement:
   * one round trip inside the lifecycle transaction, whatever the number of attempts. The rollup time only moves
   * forward (GREATEST), so a repeated or late report accrues nothing; an unknown or closed attempt changes nothing.
   * Usage is the pinned quantity × the seconds of each UTC day, summed in numeric (nothing rounded), and each
   * aggregate row gets one sum of its attempts. Rows are taken in one fixed order (attempts by id; then job, groups,
   * run, day rows, each by key; the scalar subqueries below run the inserts in that order), so concurrent accruals
   * never deadlock; shard `token` spreads the hot rows. The attempts are found by key alone, their being open checked
   * after: with `closed_at IS NULL` beside the key, a generic plan made while few attempts ran scanned every open
   * attempt's entry of the open-attempts index to keep a few (2,000 read to close two: billing-accrual.spec; a
   * transaction of completions read 1,145 on average through the throughput bench). `rider` (another module's
   * write, see StatementRider) goes in the same round trip. Returns whether anything accrued.
   */
  async accrue(
    m: EntityManager,
    submissionIds: readonly string[],
    toNow: boolean,
    close: boolean,
    token: number,
    rider?: StatementRider,
  ): Promise<boolean> {
    const q = withRider(
      'billing_accrue',
      `WITH o AS MATERIALIZED (
         SELECT submission_id, rolled_up_to AS prev, closed_at FROM billing_attempts
           WHERE submission_id = ANY($1::uuid[]) ORDER BY submission_id FOR UPDATE
       ), u AS (
         UPDATE billing_attempts b
            SET rolled_up_to = CASE WHEN $2 THEN GREATEST(o.prev, now()) ELSE o.prev END,
                closed_at = CASE WHEN $3 THEN (CASE WHEN $2 THEN GREATEST(o.prev, now()) ELSE o.prev END) END
           FROM o WHERE b.submission_id = o.submission_id AND o.closed_at IS NULL
         RETURNING b.submission_id, b.run_id, b.job_id, b.project_id, b.user_id, b.job_group_ids, o.prev,
                   b.rolled_up_to AS next
       ), days AS (
         SELECT u.submission_id, d.day::date AS day,
                GREATEST(u.prev, d.day AT TIME ZONE 'UTC') AS s,
                LEAST(u.next, (d.day + interval '1 day') AT TIME ZONE 'UTC') AS e
           FROM u, generate_series(date_trunc('day', u.prev AT TIME ZONE 'UTC'),
                                   date_trunc('day', u.next AT TIME ZONE 'UTC'), interval '1 day') d(day)
          WHERE u.next > u.prev
       ), d AS (
         SELECT days.submission_id, days.day, sr.resource_id,
                sr.quantity * EXTRACT(EPOCH FROM (days.e - days.s)) AS usage
           FROM days JOIN submission_resources sr ON sr.submission_id = days.submission_id
          WHERE days.e > days.s
       ), per_attempt AS (
         SELECT u.*, p.resource_id, p.usage
           FROM u JOIN (SELECT submission_id, resource_id, SUM(usage) AS usage FROM d GROUP BY 1, 2) p
             ON p.submission_id = u.submission_id
       ), job AS (
         INSERT INTO billing_job_usage AS x (job_id, resource_id, run_id, usage)
         SELECT job_id, resource_id, run_id, SUM(usage) FROM per_attempt
          GROUP BY job_id, resource_id, run_id ORDER BY job_id, resource_id
         ON CONFLICT (job_id, resource_id) DO UPDATE SET usage = x.usage + EXCLUDED.usage
         RETURNING 1
       ), grp AS (
         INSERT INTO billing_group_usage AS x (run_id, job_group_id, resource_id, token, usage)
         SELECT a.run_id, g.id, a.resource_id, $4, SUM(a.usage)
           FROM per_attempt a CROSS JOIN LATERAL (SELECT DISTINCT unnest(a.job_group_ids) AS id) g
          GROUP BY a.run_id, g.id, a.resource_id ORDER BY a.run_id, g.id, a.resource_id
         ON CONFLICT (run_id, job_group_id, resource_id, token) DO UPDATE SET usage = x.usage + EXCLUDED.usage
         RETURNING 1
       ), run AS (
         INSERT INTO billing_run_usage AS x (run_id, resource_id, token, usage)
         SELECT run_id, resource_id, $4, SUM(usage) FROM per_attempt
          GROUP BY run_id, resource_id ORDER BY run_id, resource_id
         ON CONFLICT (run_id, resource_id, token) DO UPDATE SET usage = x.usage + EXCLUDED.usage
         RETURNING 1
       ), daily AS (
         INSERT INTO billing_daily_usage AS x (project_id, user_id, day, resource_id, token, usage)
         SELECT u.project_id, u.user_id, d.day, d.resource_id, $4, SUM(d.usage)
           FROM u JOIN d ON d.submission_id = u.submission_id
          GROUP BY u.project_id, u.user_id, d.day, d.resource_id
          ORDER BY u.project_id, u.user_id, d.day, d.resource_id
         ON CONFLICT (project_id, user_id, day, resource_id, token) DO UPDATE SET usage = x.usage + EXCLUDED.usage
         RETURNING 1
       )`,
      `SELECT (SELECT count(*) FROM job) + (SELECT count(*) FROM grp) + (SELECT count(*) FROM run) +
              (SELECT count(*) FROM daily) AS n`,
      [[...submissionIds].sort(), toNow, close, token],
      rider,
    );
    const [row] = await preparedQuery<{ n: string }>(m, q.name, q.text, q.params);
    return Number(row.n) > 0;
  }

  /**
   * Compacts token shards: for up to `limit` (scope, resource) sets spread over several tokens, folds the rows on
   * tokens other than 0 into the token-0 row, in one statement per table. Returns the rows removed.
   *
   * Runs under READ COMMITTED, beside live accruals: a shard row an accrual updated meanwhile is deleted in its
   * newest version (the DELETE follows the update), so RETURNING carries every second it holds; an accrual that
   * meets a row being deleted waits and then inserts a fresh one; the token-0 row is never deleted, only added to,
   * so a token-0 row an accrual inserted meanwhile is added to (ON CONFLICT) instead of colliding with. Nothing is
   * counted twice or lost, and no pass is refused for a concurrent update.
   */
  async compactShards(m: EntityManager, limit: number): Promise<number> {
    let removed = 0;
    for (const t of SHARDED) {
      const keys = t.keys.join(', ');
      const [row]: { removed: number }[] = await m.query(
        `WITH spread AS (
           SELECT ${keys} FROM ${t.table} GROUP BY ${keys} HAVING count(*) > 1 ORDER BY ${keys} LIMIT $1
         ), gone AS (
           DELETE FROM ${t.table} x USING spread s
            WHERE ${t.keys.map((k) => `x.${k} = s.${k}`).join(' AND ')} AND x.token <> 0
           RETURNING x.*
         ), folded AS (
           INSERT INTO ${t.table} AS x (${keys}, token, usage)
           SELECT ${keys}, 0, SUM(usage) FROM gone GROUP BY ${keys}
           ON CONFLICT (${keys}, token) DO UPDATE SET usage = x.usage + EXCLUDED.usage
           RETURNING (x.xmax = 0) AS inserted
         )
         SELECT (SELECT count(*) FROM gone)::int - (SELECT count(*) FROM folded WHERE inserted)::int AS removed`,
        [limit],
      );
      removed += row.removed;
    }
    return removed;
  }

  /**
   * Recomputes usage from attempts × pinned quantities (quantity × (rolled_up_to − started_at)) and lists every
   * aggregate row set that disagrees: per job, per group (each id of the chain), per run, per project × user.
   */
  async usageMismatches(limit: number): Promise<{ scope: string; expected: string; actual: string }[]> {
    return this.dataSource.query(
      `WITH usage AS (
         SELECT a.*, sr.resource_id, sr.quantity * EXTRACT(EPOCH FROM (a.rolled_up_to - a.started_at)) AS usage
           FROM billing_attempts a JOIN submission_resources sr ON sr.submission_id = a.submission_id
       ), expected AS (
         SELECT 'job ' || job_id || ' resource ' || resource_id AS scope, SUM(usage) AS usage FROM usage
           GROUP BY job_id, resource_id
         UNION ALL
         SELECT 'run ' || run_id || ' group ' || g || ' resource ' || resource_id, SUM(usage)
           FROM usage, unnest(job_group_ids) g GROUP BY run_id, g, resource_id
         UNION ALL
         SELECT 'run ' || run_id || ' resource ' || resource_id, SUM(usage) FROM usage GROUP BY run_id, resource_id
         UNION ALL
         SELECT 'project ' || project_id || ' user ' || user_id || ' resource ' || resource_id, SUM(usage) FROM usage
           GROUP BY project_id, user_id, resource_id
       ), actual AS (
         SELECT 'job ' || job_id || ' resource ' || resource_id AS scope, SUM(usage) AS usage FROM billing_job_usage
           GROUP BY job_id, resource_id
         UNION ALL
         SELECT 'run ' || run_id || ' group ' || job_group_id || ' resource ' || resource_id, SUM(usage)
           FROM billing_group_usage GROUP BY run_id, job_group_id, resource_id
         UNION ALL
         SELECT 'run ' || run_id || ' resource ' || resource_id, SUM(usage) FROM billing_run_usage
           GROUP BY run_id, resource_id
         UNION ALL
         SELECT 'project ' || project_id || ' user ' || user_id || ' resource ' || resource_id, SUM(usage)
           FROM billing_daily_usage GROUP BY project_id, user_id, resource_id
       )
       SELECT COALESCE(e.scope, a.scope) AS scope, COALESCE(e.usage, 0)::text AS expected,
              COALESCE(a.usage, 0)::text AS actual
         FROM expected e FULL JOIN actual a ON a.scope = e.scope
        WHERE COALESCE(e.usage, 0) <> COALESCE(a.usage, 0)
        ORDER BY 1 LIMIT $1`,
      [limit],
    );
  }
}
