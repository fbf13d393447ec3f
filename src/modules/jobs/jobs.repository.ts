import { Injectable } from '@nestjs/common';
import { timeOrderedUuid } from '../../common/ids/time-ordered-uuid';
import {
  CANCELLED_STATUSES,
  PROVISIONING_STATUSES,
  RETRY_QUEUED_STATUSES,
  RUNNING_STATUSES,
  statusesOfOutcome,
} from '../lifecycle/outcomes';
import { FINISHED_STATUSES, PENDING_STATUS, QUEUED_STATUSES, type SubmissionStatus } from '../lifecycle/vocabulary';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import type { NewJob } from './dto/job-spec';
import { Job } from './entities/job.entity';
import { HELD_PREDICATE, JobSubmission, PENDING_PREDICATE } from './entities/job-submission.entity';

/** Rows per INSERT statement: big enough to be fast, small enough to keep each statement's arrays modest. */
const INSERT_CHUNK = 5000;

/** Where a submission stands: enough for a reader of its output to know whether more may come. */
export interface SubmissionState {
  id: string;
  submissionNum: number;
  status: SubmissionStatus;
  terminationReason: string | null;
  finishedAt: Date | null;
}

/** A new job and its submission 0 start queued. */
const NEW_JOB_STATUS: SubmissionStatus = QUEUED_STATUSES[0];

@Injectable()
export class JobsRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * Jobs and their submission 0, in multi-row INSERTs of unnested arrays (no statement per job). Each starts in its
   * own status (queued by default; `pending` waiting for parents; ended by a parent that failed, then counted).
   */
  async insertJobs(m: EntityManager, runId: string, jobs: NewJob[], priority: number): Promise<void> {
    for (let start = 0; start < jobs.length; start += INSERT_CHUNK) {
      const chunk = jobs.slice(start, start + INSERT_CHUNK);
      const submissionIds = chunk.map(() => timeOrderedUuid());
      const statuses = chunk.map((j) => j.status ?? NEW_JOB_STATUS);
      const reasons = chunk.map((j) => j.terminationReason ?? null);
      const finished = statuses.map((st) => (FINISHED_STATUSES as readonly string[]).includes(st));
      await m.query(
        `INSERT INTO jobs (id, run_id, job_group_id, job_num, replica_num, job_name, spec, always_run,
                           status, termination_reason, n_parents, n_pending_parents, completion_counted,
                           latest_submission_id, latest_submission_num, submission_count)
         SELECT j.id, $1, j.g, j.num, j.replica, j.name, j.spec, j.always_run, j.status, j.reason, j.parents,
                j.pending, j.finished, j.sub, 0, 1
           FROM unnest($2::uuid[], $3::int[], $4::int[], $5::int[], $6::text[], $7::jsonb[], $8::bool[], $9::uuid[],
                       $10::text[], $11::text[], $12::int[], $13::bool[], $14::int[])
             AS j(id, g, num, replica, name, spec, always_run, sub, status, reason, pending, finished, parents)`,
        [
          runId,
          chunk.map((j) => j.id),
          chunk.map((j) => j.jobGroupId),
          chunk.map((j) => j.jobNum),
          chunk.map((j) => j.replicaNum),
          chunk.map((j) => j.jobName),
          chunk.map((j) => JSON.stringify(j.spec)),
          chunk.map((j) => j.alwaysRun),
          submissionIds,
          statuses,
          reasons,
          chunk.map((j) => j.nPendingParents ?? 0),
          finished,
          chunk.map((j) => j.nParents ?? 0),
        ],
      );
      await m.query(
        `INSERT INTO job_submissions (id, job_id, run_id, job_group_id, submission_num, status, termination_reason,
                                      finished_at, priority, cpu, memory_mib, gpu, needs_container)
         SELECT s.id, s.job, $1, s.g, 0, s.status, s.reason, CASE WHEN s.finished THEN now() END, $2, s.cpu, s.mem,
                s.gpu, s.container
           FROM unnest($3::uuid[], $4::uuid[], $5::int[], $6::numeric[], $7::int[], $8::int[], $9::text[], $10::bool[],
                       $11::text[], $12::bool[])
             AS s(id, job, g, cpu, mem, gpu, status, container, reason, finished)`,
        [
          runId,
          priority,
          submissionIds,
          chunk.map((j) => j.id),
          chunk.map((j) => j.jobGroupId),
          chunk.map((j) => j.spec.resources.cpu),
          chunk.map((j) => j.spec.resources.memory_mib),
          chunk.map((j) => j.spec.resources.gpu ?? 0),
          statuses,
          chunk.map((j) => typeof j.spec.image === 'string'),
          reasons,
          finished,
        ],
      );
    }
  }

  /** The next free job_num of a run (call with the root group's counters locked, which serialises additions). */
  async nextJobNum(m: EntityManager, runId: string): Promise<number> {
    const [row] = await m.query(`SELECT coalesce(max(job_num), -1) + 1 AS next FROM jobs WHERE run_id = $1`, [runId]);
    return Number(row.next);
  }

  /** Jobs by id, ordered by id. */
  jobsByIds(ids: string[]): Promise<Job[]> {
    if (ids.length === 0) return Promise.resolve([]);
    return this.dataSource
      .getRepository(Job)
      .createQueryBuilder('j')
      .where('j.id = ANY(:ids)', { ids })
      .orderBy('j.id')
      .getMany();
  }

  findJob(runId: string, jobId: string): Promise<Job | null> {
    return this.dataSource.getRepository(Job).findOneBy({ runId, id: jobId });
  }

  /**
   * Per run: its jobs in the given groups whose (latest) submission is on a worker, by status; always_run jobs only
   * in groups with `abort` set (a cancellation leaves them running, an abort counted them).
   */
  async activeInGroups(
    runIds: string[],
    groupIds: number[],
    aborts: boolean[],
    m: EntityManager = this.dataSource.manager,
  ): Promise<{ runId: string; status: string; n: number }[]> {
    if (runIds.length === 0) return [];
    // An active submission is always its job's latest; the lease index holds exactly the active ones.
    return m.query(
      `SELECT s.run_id AS "runId", s.status, count(*)::int AS n
         FROM job_submissions s
         JOIN unnest($1::uuid[], $2::int[], $3::bool[]) AS g(run_id, job_group_id, abort)
           ON s.run_id = g.run_id AND s.job_group_id = g.job_group_id
         JOIN jobs j ON j.id = s.job_id
        WHERE s.${HELD_PREDICATE} AND (g.abort OR NOT j.always_run)
        GROUP BY 1, 2`,
      [runIds, groupIds, aborts],
    );
  }

  /**
   * Per run, its jobs waiting for parents in the given groups (`abort` per group: always_run ones too): what a fresh
   * cancellation shows as cancelled until their parents finish. Read through the pending submissions' own index.
   */
  async pendingInGroups(
    runIds: string[],
    groupIds: number[],
    aborts: boolean[],
    m: EntityManager = this.dataSource.manager,
  ): Promise<{ runId: string; n: number }[]> {
    if (runIds.length === 0) return [];
    // A pending job's only submission is its submission 0, pending too.
    return m.query(
      `SELECT s.run_id AS "runId", count(*)::int AS n
         FROM job_submissions s
         JOIN unnest($1::uuid[], $2::int[], $3::bool[]) AS g(run_id, job_group_id, abort)
           ON s.run_id = g.run_id AND s.job_group_id = g.job_group_id
         JOIN jobs j ON j.id = s.job_id
        WHERE s.${PENDING_PREDICATE} AND (g.abort OR NOT j.always_run)
        GROUP BY 1`,
      [runIds, groupIds, aborts],
    );
  }

  /**
   * One submission of a run's job, by number (null = the job's latest): what a reader of its output needs. Null when
   * the job is not the run's or has no such submission.
   */
  async submissionOfJob(runId: string, jobId: string, submissionNum: number | null): Promise<SubmissionState | null> {
    const rows: SubmissionState[] = await this.dataSource.query(
      `SELECT s.id, s.submission_num AS "submissionNum", s.status, s.termination_reason AS "terminationReason",
              s.finished_at AS "finishedAt"
         FROM jobs j
         JOIN job_submissions s ON s.job_id = j.id AND s.submission_num = coalesce($3, j.latest_submission_num)
        WHERE j.run_id = $1 AND j.id = $2`,
      [runId, jobId, submissionNum],
    );
    return rows[0] ?? null;
  }

  /** A submission's status now (null once it no longer exists). */
  async submissionState(id: string): Promise<SubmissionState | null> {
    const rows: SubmissionState[] = await this.dataSource.query(
      `SELECT id, submission_num AS "submissionNum", status, termination_reason AS "terminationReason",
              finished_at AS "finishedAt"
         FROM job_submissions WHERE id = $1`,
      [id],
    );
    return rows[0] ?? null;
  }

  /** A job's submissions, newest first, before `beforeNum`. */
  history(jobId: string, beforeNum: number | undefined, limit: number): Promise<JobSubmission[]> {
    const qb = this.dataSource
      .getRepository(JobSubmission)
      .createQueryBuilder('s')
      .where('s.job_id = :jobId', { jobId });
    if (beforeNum !== undefined) qb.andWhere('s.submission_num < :beforeNum', { beforeNum });
    return qb.orderBy('s.submission_num', 'DESC').limit(limit).getMany();
  }

  submissionsByIds(ids: string[], m: EntityManager = this.dataSource.manager): Promise<JobSubmission[]> {
    if (ids.length === 0) return Promise.resolve([]);
    return m.getRepository(JobSubmission).createQueryBuilder('s').where('s.id = ANY(:ids)', { ids }).getMany();
  }

  /** Per (run, group): direct jobs by how their outcome stands (for the invariants check). */
  async outcomeCounts(): Promise<DirectOutcomes[]> {
    const rows: DirectOutcomes[] = await this.dataSource.query(
      `SELECT run_id AS "runId", job_group_id AS "jobGroupId", count(*)::int AS "nJobs",
              count(*) FILTER (WHERE completion_counted AND status = ANY($1::text[]))::int AS "nSucceeded",
              count(*) FILTER (WHERE completion_counted AND status = ANY($2::text[]))::int AS "nFailed",
              count(*) FILTER (WHERE completion_counted AND status = ANY($3::text[]))::int AS "nCancelled",
              count(*) FILTER (WHERE completion_counted AND status = ANY($4::text[]))::int AS "nAborted",
              count(*) FILTER (WHERE NOT completion_counted)::int AS "nUncounted",
              count(*) FILTER (WHERE NOT completion_counted AND always_run)::int AS "nUncountedAlwaysRun",
              count(*) FILTER (WHERE status = $5)::int AS "nPending"
         FROM jobs GROUP BY run_id, job_group_id`,
      [
        statusesOfOutcome('succeeded'),
        statusesOfOutcome('failed'),
        CANCELLED_STATUSES,
        statusesOfOutcome('aborted'),
        PENDING_STATUS,
      ],
    );
    return rows;
  }

  /** Per run: jobs on workers and queued retries, from the job rows. */
  async activeCounts(): Promise<
    { runId: string; nProvisioning: number; nRunning: number; nRetrying: number; nPending: number }[]
  > {
    return this.dataSource.query(
      `SELECT run_id AS "runId",
              count(*) FILTER (WHERE status = ANY($1::text[]))::int AS "nProvisioning",
              count(*) FILTER (WHERE status = ANY($2::text[]))::int AS "nRunning",
              count(*) FILTER (WHERE status = ANY($3::text[]) AND latest_submission_num > 0)::int AS "nRetrying",
              count(*) FILTER (WHERE status = $4)::int AS "nPending"
         FROM jobs GROUP BY run_id`,
      [PROVISIONING_STATUSES, RUNNING_STATUSES, RETRY_QUEUED_STATUSES, PENDING_STATUS],
    );
  }

  /** Jobs whose denormalised facts disagree with their submission rows. */
  async jobFactMismatches(limit: number): Promise<{ jobId: string; problem: string }[]> {
    return this.dataSource.query(
      `WITH s AS (
         SELECT job_id, count(*)::int AS n, max(submission_num) AS max_num FROM job_submissions GROUP BY job_id
       ), latest AS (
         SELECT j.id, j.latest_submission_id, j.latest_submission_num, j.submission_count, j.status,
                j.termination_reason, j.folded_submissions, s.n, s.max_num, l.id AS l_id, l.submission_num AS l_num,
                l.status AS l_status, l.termination_reason AS l_reason, l.job_id AS l_job
           FROM jobs j LEFT JOIN s ON s.job_id = j.id LEFT JOIN job_submissions l ON l.id = j.latest_submission_id
       )
       SELECT id AS "jobId", problem FROM (
         SELECT id, CASE
           WHEN l_id IS NULL OR l_job <> id THEN 'latest submission is missing or belongs to another job'
           WHEN l_num <> max_num OR latest_submission_num <> l_num THEN 'latest submission is not the newest'
           WHEN submission_count <> latest_submission_num + 1 THEN 'submission_count does not match numbering'
           WHEN n + coalesce((SELECT sum(v::int) FROM jsonb_each_text(folded_submissions) AS f(k, v)), 0)
                <> submission_count
             THEN 'existing plus folded submissions do not add up to submission_count'
           WHEN status <> l_status THEN 'job status differs from its latest submission'
           WHEN l_status = ANY($2::text[]) AND termination_reason IS DISTINCT FROM l_reason
             THEN 'termination reason differs from its latest submission'
         END AS problem FROM latest) x
       WHERE problem IS NOT NULL LIMIT $1`,
      [limit, FINISHED_STATUSES],
    );
  }
}

export interface DirectOutcomes {
  runId: string;
  jobGroupId: number;
  nJobs: number;
  nSucceeded: number;
  nFailed: number;
  nCancelled: number;
  nAborted: number;
  nUncounted: number;
  nUncountedAlwaysRun: number;
  /** Jobs waiting for their parents. */
  nPending: number;
}
