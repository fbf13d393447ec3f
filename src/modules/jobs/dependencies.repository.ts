import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { returning } from '../../infra/database/returning';
import type { SubmissionStatus } from '../lifecycle/vocabulary';
import type { Edges, ExistingParent } from './dependency-plan';

/** Edges per INSERT statement. */
const EDGE_CHUNK = 20_000;

/** A job ended by the cascade or released by its last parent: what its event and counters need. */
export interface TouchedJob {
  jobId: string;
  runId: string;
  jobGroupId: number;
  submissionNum: number;
}

/** Every query on job_parents and on jobs' pending-parents counts. */
@Injectable()
export class DependenciesRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * Existing jobs a request names as parents, locked in id order and marked `has_dependents`: a parent cannot finish
   * (its finisher locks it FOR UPDATE) between this read of its status and the commit of the edges to it, so no
   * release is missed, and its finisher reads the mark with the job. (Locked for update, not shared: two requests
   * sharing a parent would each wait for the other to upgrade its lock.)
   */
  lockParents(m: EntityManager, ids: string[]): Promise<ExistingParent[]> {
    if (ids.length === 0) return Promise.resolve([]);
    return returning<ExistingParent>(
      m,
      `WITH locked AS (SELECT id FROM jobs WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE)
       UPDATE jobs j SET has_dependents = true FROM locked l WHERE j.id = l.id
       RETURNING j.id, j.run_id AS "runId", j.status`,
      [ids],
    );
  }

  async insertEdges(m: EntityManager, runId: string, edges: Edges): Promise<void> {
    for (let start = 0; start < edges.jobIds.length; start += EDGE_CHUNK) {
      await m.query(
        `INSERT INTO job_parents (job_id, parent_id, run_id)
         SELECT e.job_id, e.parent_id, $1 FROM unnest($2::uuid[], $3::uuid[]) AS e(job_id, parent_id)`,
        [runId, edges.jobIds.slice(start, start + EDGE_CHUNK), edges.parentIds.slice(start, start + EDGE_CHUNK)],
      );
    }
    // Parents created by this request (existing ones were marked when locked).
    await m.query(`UPDATE jobs SET has_dependents = true WHERE id = ANY($1::uuid[]) AND NOT has_dependents`, [
      [...new Set(edges.parentIds)],
    ]);
  }

  /**
   * Every not-yet-started (`pending`) descendant of `failedIds` reached through jobs that are not always_run,
   * transitively (one recursive statement, each edge read once), locked in id order. always_run descendants stop
   * the walk: they run, and their own outcome decides for their children.
   */
  lockDoomed(m: EntityManager, failedIds: string[], pending: SubmissionStatus): Promise<TouchedJob[]> {
    if (failedIds.length === 0) return Promise.resolve([]);
    return m.query(
      `WITH RECURSIVE doomed(id) AS (
         SELECT p.job_id FROM job_parents p JOIN jobs j ON j.id = p.job_id
          WHERE p.parent_id = ANY($1::uuid[]) AND NOT j.always_run AND j.status = $2
         UNION
         SELECT p.job_id FROM doomed d JOIN job_parents p ON p.parent_id = d.id JOIN jobs j ON j.id = p.job_id
          WHERE NOT j.always_run AND j.status = $2
       )
       SELECT j.id AS "jobId", j.run_id AS "runId", j.job_group_id AS "jobGroupId",
              j.latest_submission_num AS "submissionNum"
         FROM jobs j
        WHERE j.id IN (SELECT id FROM doomed) AND j.status = $2
        ORDER BY j.id
          FOR UPDATE`,
      [failedIds, pending],
    );
  }

  /**
   * Ends locked pending jobs and their latest submission; jobs of `uncountedGroups` are left uncounted. Both updates
   * go by primary key over the given ids (never a join the planner could turn into a scan of every submission).
   */
  async endJobs(
    m: EntityManager,
    ids: string[],
    status: SubmissionStatus,
    reason: string,
    uncountedGroups: number[],
  ): Promise<void> {
    if (ids.length === 0) return;
    const ended = await returning<{ sub: string }>(
      m,
      `UPDATE jobs j
          SET status = $2, termination_reason = $3, completion_counted = NOT (j.job_group_id = ANY($4::int[]))
         FROM unnest($1::uuid[]) AS v(id)
        WHERE j.id = v.id
        RETURNING j.latest_submission_id AS sub`,
      [ids, status, reason, uncountedGroups],
    );
    await m.query(
      `UPDATE job_submissions s SET status = $2, termination_reason = $3, finished_at = now()
         FROM unnest($1::uuid[]) AS v(id)
        WHERE s.id = v.id`,
      [ended.map((e) => e.sub), status, reason],
    );
  }

  /**
   * The finished jobs `finishedIds` release their children: each child's pending-parents count drops by its edges
   * from them (children locked in id order, so concurrent releases never deadlock), and a `pending` child whose count
   * reaches 0 becomes `queued`, with its submission 0, unless it is one of `staying`. Three statements for all
   * children, each by primary key over arrays; returns the released ones.
   */
  async release(
    m: EntityManager,
    finishedIds: string[],
    pending: SubmissionStatus,
    queued: SubmissionStatus,
    staying: string[] = [],
  ): Promise<TouchedJob[]> {
    if (finishedIds.length === 0) return [];
    const children: { id: string; k: number }[] = await m.query(
      `SELECT j.id, e.k
         FROM (SELECT job_id, count(*)::int AS k FROM job_parents WHERE parent_id = ANY($1::uuid[]) GROUP BY job_id) e
         JOIN jobs j ON j.id = e.job_id
        ORDER BY j.id
          FOR UPDATE OF j`,
      [finishedIds],
    );
    if (children.length === 0) return [];
    const stay = new Set(staying);
    const released = await returning<TouchedJob & { sub: string }>(
      m,
      `UPDATE jobs j SET n_pending_parents = j.n_pending_parents - v.k,
              status = CASE WHEN j.status = $3 AND j.n_pending_parents = v.k AND NOT v.stay THEN $4 ELSE j.status END
         FROM unnest($1::uuid[], $2::int[], $5::bool[]) AS v(id, k, stay)
        WHERE j.id = v.id
        RETURNING j.id AS "jobId", j.run_id AS "runId", j.job_group_id AS "jobGroupId",
                  j.latest_submission_num AS "submissionNum", j.latest_submission_id AS sub,
                  (j.status = $4 AND j.n_pending_parents = 0) AS released`,
      [children.map((c) => c.id), children.map((c) => c.k), pending, queued, children.map((c) => stay.has(c.id))],
    ).then((rows) => (rows as (TouchedJob & { sub: string; released: boolean })[]).filter((r) => r.released));
    if (released.length === 0) return [];
    await m.query(
      `UPDATE job_submissions s SET status = $2 FROM unnest($1::uuid[]) AS v(id) WHERE s.id = v.id AND s.status = $3`,
      [released.map((r) => r.sub), queued, pending],
    );
    return released.map((r) => ({
      jobId: r.jobId,
      runId: r.runId,
      jobGroupId: r.jobGroupId,
      submissionNum: r.submissionNum,
    }));
  }

  /** Parent ids of each given job. */
  async parentsOf(jobIds: string[], m: EntityManager = this.dataSource.manager): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    if (jobIds.length === 0) return out;
    const rows: { jobId: string; parentId: string }[] = await m.query(
      `SELECT job_id AS "jobId", parent_id AS "parentId" FROM job_parents WHERE job_id = ANY($1::uuid[])
        ORDER BY job_id, parent_id`,
      [jobIds],
    );
    for (const r of rows) {
      const list = out.get(r.jobId) ?? [];
      list.push(r.parentId);
      out.set(r.jobId, list);
    }
    return out;
  }

  /** Children of a job, keyset-paginated by child id. */
  childrenOf(jobId: string, after: string | undefined, limit: number): Promise<{ jobId: string }[]> {
    return this.dataSource.query(
      `SELECT job_id AS "jobId" FROM job_parents WHERE parent_id = $1 AND ($2::uuid IS NULL OR job_id > $2)
        ORDER BY job_id LIMIT $3`,
      [jobId, after ?? null, limit],
    );
  }

  /** Jobs whose pending-parents count differs from their unfinished parents, recounted from the edges. */
  pendingCountMismatches(finished: readonly string[], limit: number): Promise<{ jobId: string; problem: string }[]> {
    return this.dataSource.query(
      `SELECT j.id AS "jobId",
              'n_pending_parents ' || j.n_pending_parents || ' but ' || coalesce(u.n, 0) || ' unfinished parents'
                AS problem
         FROM jobs j
         LEFT JOIN (
           SELECT e.job_id, count(*) FILTER (WHERE NOT (p.status = ANY($1::text[])))::int AS n
             FROM job_parents e JOIN jobs p ON p.id = e.parent_id GROUP BY e.job_id
         ) u ON u.job_id = j.id
        WHERE j.n_pending_parents <> coalesce(u.n, 0)
        LIMIT $2`,
      [finished, limit],
    );
  }

  /**
   * Jobs that were claimed (a submission has claimed_at) while a parent had not finished: a parent with no finished
   * final attempt, or whose final attempt finished after the child's first claim. Also pending jobs with no
   * pending parent and queued jobs with one.
   */
  claimedBeforeParents(
    finished: readonly string[],
    pending: SubmissionStatus,
    limit: number,
  ): Promise<{ jobId: string; problem: string }[]> {
    return this.dataSource.query(
      `WITH first_claim AS (
         SELECT s.job_id, min(s.claimed_at) AS at FROM job_submissions s
          WHERE s.claimed_at IS NOT NULL AND s.job_id IN (SELECT job_id FROM job_parents)
          GROUP BY s.job_id
       )
       SELECT c.job_id AS "jobId", 'claimed at ' || c.at || ' before parent ' || p.id || ' finished' AS problem
         FROM first_claim c
         JOIN job_parents e ON e.job_id = c.job_id
         JOIN jobs p ON p.id = e.parent_id
         JOIN job_submissions ps ON ps.id = p.latest_submission_id
        WHERE NOT (p.status = ANY($1::text[])) OR ps.finished_at IS NULL OR ps.finished_at > c.at
       UNION ALL
       SELECT j.id, 'pending with no unfinished parent' FROM jobs j WHERE j.status = $2 AND j.n_pending_parents = 0
       LIMIT $3`,
      [finished, pending, limit],
    );
  }
}
