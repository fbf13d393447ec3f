import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import type { SubmissionStatus } from '../lifecycle/vocabulary';
import { Job } from './entities/job.entity';
import { withOrderedIndexScans } from './ordered-index-scans';

/** A job row's columns but its spec, by the Job property each fills (complete: the type says which are missing). */
const VIEW_COLUMNS: Record<Exclude<keyof Job, 'spec'>, string> = {
  id: 'id',
  runId: 'run_id',
  jobGroupId: 'job_group_id',
  jobNum: 'job_num',
  replicaNum: 'replica_num',
  jobName: 'job_name',
  alwaysRun: 'always_run',
  status: 'status',
  terminationReason: 'termination_reason',
  latestSubmissionId: 'latest_submission_id',
  latestSubmissionNum: 'latest_submission_num',
  submissionCount: 'submission_count',
  foldedSubmissions: 'folded_submissions',
  completionCounted: 'completion_counted',
  nParents: 'n_parents',
  nPendingParents: 'n_pending_parents',
  hasDependents: 'has_dependents',
  createdAt: 'created_at',
};

/** Every column of a job row but its spec, from alias `alias`, named as Job's properties. */
const viewColumns = (alias: string) =>
  Object.entries(VIEW_COLUMNS)
    .map(([property, column]) => `${alias}.${column} AS "${property}"`)
    .join(', ');

export interface JobListFilter {
  groupIds?: number[];
  /** Effective statuses to keep; empty = all. */
  statuses: string[];
  /** Groups under a cancellation whose not-yet-counted jobs show as `terminated` / `aborted`. */
  terminatedGroups: number[];
  abortedGroups: number[];
  /** Groups with an abort over them (always_run jobs there show as aborted even below an earlier cancellation). */
  abortOverGroups: number[];
  after?: [number, number];
  limit: number;
}

/**
 * Pages of a run's jobs as views show them, without their spec (views don't show it; it is kilobytes each), each
 * reading index entries in proportion to what it returns, never to what the run holds: a run of 1,000,000 jobs pages
 * as fast as one of 10,000.
 */
@Injectable()
export class JobPagesRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * The first `perRun` jobs of each given run by (job_num, replica_num): a LATERAL LIMIT per run down
   * uq_jobs_run_id_job_num_replica_num, so a page over runs of 10,000 jobs reads perRun index entries per run, not
   * every job. Rows come in run order as given, then job order.
   *
   * With skewed statistics (most runs small, a few huge) the planner was seen to prefer a bitmap scan of the run's
   * every job plus a sort (15,000 rows read for 303 shown over three 5,000-job runs); bitmap scans, sorts and
   * sequential scans are switched off for this one statement (set_config local to its own transaction, or put back
   * after it inside the caller's), which leaves the ordered index walk as the only plan worth having.
   */
  async firstJobsOfRuns(runIds: string[], perRun: number, m: EntityManager = this.dataSource.manager): Promise<Job[]> {
    if (runIds.length === 0 || perRun <= 0) return [];
    const text = `SELECT ${viewColumns('j')}
         FROM unnest($1::uuid[]) WITH ORDINALITY AS r(id, ord)
        CROSS JOIN LATERAL (
          SELECT x.* FROM jobs x WHERE x.run_id = r.id ORDER BY x.job_num, x.replica_num LIMIT $2
        ) j
        ORDER BY r.ord, j.job_num, j.replica_num`;
    return this.withOrderedWalk(m, text, [runIds, perRun]);
  }

  /**
   * A page of a run's jobs (optionally of some groups) by effective status, keyset on (job_num, replica_num).
   *
   * Of some groups: one ordered walk per group down idx_jobs_run_id_job_group_id, each stopping at `limit`, merged:
   * at most groups × limit entries read, wherever in the run the groups' jobs lie (a filter on the run's walk
   * read every job numbered before the group's first: 620,000 rows for a page of a group added late to a 1,000,000-
   * job run, 109 ms). The cursor is a row comparison, so each walk starts at it (an OR of the two columns is a
   * filter, and page k read the k − 1 pages before it). A status filter is applied to the rows walked: a page of a
   * rare status still reads on until it has `limit` of them. The walks are the only plan allowed (see
   * firstJobsOfRuns): with the statistics of a worker database of the test suite, the planner read each group whole
   * through a bitmap and sorted it (291 rows for a page of 50 over two groups of 150).
   */
  async listJobs(runId: string, f: JobListFilter): Promise<Job[]> {
    const params: unknown[] = [runId];
    const conditions: string[] = [];
    if (f.after)
      conditions.push(`(x.job_num, x.replica_num) > ($${params.push(f.after[0])}, $${params.push(f.after[1])})`);
    if (f.statuses.length > 0) {
      const aborted: SubmissionStatus = 'aborted';
      const terminated: SubmissionStatus = 'terminated';
      const [abortedGroups, abortOver, terminatedGroups, abortedStatus, terminatedStatus, statuses] = [
        f.abortedGroups,
        f.abortOverGroups,
        f.terminatedGroups,
        aborted,
        terminated,
        f.statuses,
      ].map((v) => `$${params.push(v)}`);
      conditions.push(
        `(CASE WHEN NOT x.completion_counted AND x.job_group_id = ANY(${abortedGroups}::int[])
                 THEN ${abortedStatus}::text
               WHEN NOT x.completion_counted AND x.always_run AND x.job_group_id = ANY(${abortOver}::int[])
                 THEN ${abortedStatus}::text
               WHEN NOT x.completion_counted AND NOT x.always_run AND x.job_group_id = ANY(${terminatedGroups}::int[])
                 THEN ${terminatedStatus}::text
               ELSE x.status END) = ANY(${statuses}::text[])`,
      );
    }
    const limit = `$${params.push(f.limit)}`;
    const walk = (group: string) =>
      `SELECT x.* FROM jobs x WHERE x.run_id = $1 AND ${[group, ...conditions].join(' AND ')}
        ORDER BY x.job_num, x.replica_num LIMIT ${limit}`;
    const m = this.dataSource.manager;
    if (!f.groupIds) {
      const text = `SELECT ${viewColumns('j')} FROM (${walk('true')}) j`;
      // A page of a status few jobs have reads on either way: there the planner may prefer a scan and a sort.
      return f.statuses.length > 0 ? m.query(text, params) : this.withOrderedWalk(m, text, params);
    }
    return this.withOrderedWalk(
      m,
      `SELECT ${viewColumns('j')}
         FROM unnest($${params.push(f.groupIds)}::int[]) AS g(id)
        CROSS JOIN LATERAL (${walk('x.job_group_id = g.id')}) j
        ORDER BY j.job_num, j.replica_num
        LIMIT ${limit}`,
      params,
    );
  }

  /** Jobs of a run numbered in [fromJobNum, toJobNum) (the ones a request just added), in job order. */
  jobsBetween(m: EntityManager, runId: string, fromJobNum: number, toJobNum: number): Promise<Job[]> {
    return m.query(
      `SELECT ${viewColumns('j')} FROM jobs j
        WHERE j.run_id = $1 AND j.job_num >= $2 AND j.job_num < $3
        ORDER BY j.job_num, j.replica_num`,
      [runId, fromJobNum, toJobNum],
    );
  }

  /** Runs `text` with bitmap scans, sorts and sequential scans off for it alone (see withOrderedIndexScans). */
  private withOrderedWalk(m: EntityManager, text: string, params: unknown[]): Promise<Job[]> {
    return withOrderedIndexScans(m, (em) => em.query(text, params));
  }
}
