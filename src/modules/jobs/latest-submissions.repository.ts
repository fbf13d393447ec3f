import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { RawJson } from '../../common/json/raw-json';

/** Per job: its chosen submissions as one JSON array (ascending) and its newest one, built by PostgreSQL. */
export interface JobSubmissionsJson {
  submissions: RawJson;
  newest: RawJson;
  newestId: string;
}

const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** A submission of alias `s` in the API's Submission shape (same keys, same order as SubmissionView). */
const SUBMISSION_DOC = `json_build_object(
  'id', s.id, 'submission_num', s.submission_num, 'status', s.status, 'termination_reason', s.termination_reason,
  'exit_status', s.exit_status, 'submitted_at', ${iso('s.submitted_at')}, 'started_at', ${iso('s.started_at')},
  'finished_at', ${iso('s.finished_at')}, 'provisioning_data', s.provisioning_data, 'runtime_data', s.runtime_data,
  'cost_usd', 0)`;

/** Folds picked rows (`picked`: job_id, submission_num, id, doc) into one row per job. */
const PER_JOB = `SELECT job_id AS "jobId", json_agg(doc ORDER BY submission_num)::text AS submissions,
         (array_agg(doc::text ORDER BY submission_num DESC))[1] AS newest,
         (array_agg(id ORDER BY submission_num DESC))[1] AS "newestId"
    FROM picked GROUP BY job_id`;

/**
 * The latest-submission fetch: for each job, its N newest existing submissions, in one statement for all jobs.
 *
 * It walks uq_job_submissions_job_id_submission_num newest-first from each job's latest_submission_num, one step
 * per submission (`max(submission_num) < previous`, an index probe), so the database touches jobs × N index
 * entries whatever history holds, and gaps in the numbering cost nothing. A LATERAL `ORDER BY ... LIMIT N` reads
 * the same rows when the planner picks the index, but with skewed statistics (most jobs with one submission, a few
 * with thousands) it was measured to choose a bitmap scan plus sort that reads a deep job's whole history;
 * the walk leaves it no such choice.
 *
 * PostgreSQL also builds the JSON (one array per job), which the response splices in as text (RawJson): list pages
 * carry megabytes of provisioning/runtime data, and parsing it into objects in Node only to serialise it again was
 * most of a request's cost.
 */
@Injectable()
export class LatestSubmissionsRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Job id → its newest `n` submissions (null = all); jobs without any are absent. */
  async latestPerJob(jobIds: string[], n: number | null, m: EntityManager = this.dataSource.manager): Promise<Map<string, JobSubmissionsJson>> {
    if (jobIds.length === 0 || n === 0) return new Map();
    const rows: { jobId: string; submissions: string; newest: string; newestId: string }[] =
      n === null
        ? await m.query(
            `WITH picked AS (SELECT s.job_id, s.submission_num, s.id, ${SUBMISSION_DOC} AS doc FROM job_submissions s WHERE s.job_id = ANY($1::uuid[]))
             ${PER_JOB}`,
            [jobIds],
          )
        : await m.query(
            `WITH RECURSIVE walk (job_id, num, k) AS (
               SELECT j.id, j.latest_submission_num, 1 FROM jobs j WHERE j.id = ANY($1::uuid[])
               UNION ALL
               SELECT w.job_id,
                      (SELECT max(x.submission_num) FROM job_submissions x WHERE x.job_id = w.job_id AND x.submission_num < w.num),
                      w.k + 1
                 FROM walk w
                WHERE w.k < $2 AND w.num IS NOT NULL
             ), picked AS (
               -- OFFSET 0 keeps this a per-step index probe (never a hash join over the whole table).
               SELECT s.job_id, s.submission_num, s.id, ${SUBMISSION_DOC} AS doc
                 FROM walk w
                CROSS JOIN LATERAL (SELECT * FROM job_submissions x WHERE x.job_id = w.job_id AND x.submission_num = w.num OFFSET 0) s
             )
             ${PER_JOB}`,
            [jobIds, n],
          );
    return new Map(rows.map((r) => [r.jobId, { submissions: new RawJson(r.submissions), newest: new RawJson(r.newest), newestId: r.newestId }]));
  }

  /** Submissions by id, as API documents (each job's latest, when no history is asked for). */
  async byIds(ids: string[], m: EntityManager = this.dataSource.manager): Promise<Map<string, RawJson>> {
    if (ids.length === 0) return new Map();
    const rows: { id: string; doc: string }[] = await m.query(`SELECT s.id, ${SUBMISSION_DOC}::text AS doc FROM job_submissions s WHERE s.id = ANY($1::uuid[])`, [ids]);
    return new Map(rows.map((r) => [r.id, new RawJson(r.doc)]));
  }
}
