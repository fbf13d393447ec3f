import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { JobSubmission } from './entities/job-submission.entity';

/**
 * The latest-submission fetch: for each job, its N newest existing submissions, in one statement for all jobs.
 *
 * It walks uq_job_submissions_job_id_submission_num newest-first from each job's latest_submission_num, one step
 * per submission (`max(submission_num) < previous`, an index probe), so the database touches jobs × N index
 * entries whatever history holds, and gaps in the numbering cost nothing. A LATERAL `ORDER BY ... LIMIT N` reads
 * the same rows when the planner picks the index, but with skewed statistics (most jobs with one submission, a few
 * with thousands) it was measured to choose a bitmap scan plus sort that reads a deep job's whole history;
 * the walk leaves it no such choice.
 */
@Injectable()
export class LatestSubmissionsRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Map job id → its newest `n` submissions, ascending. `n` = null means all of them. */
  async latestPerJob(jobIds: string[], n: number | null, m: EntityManager = this.dataSource.manager): Promise<Map<string, JobSubmission[]>> {
    const out = new Map<string, JobSubmission[]>(jobIds.map((id) => [id, []]));
    if (jobIds.length === 0 || n === 0) return out;
    const rows =
      n === null
        ? await m
            .getRepository(JobSubmission)
            .createQueryBuilder('s')
            .where('s.job_id = ANY(:jobIds)', { jobIds })
            .orderBy('s.job_id')
            .addOrderBy('s.submission_num')
            .getMany()
        : await this.walkNewest(m, jobIds, n);
    for (const s of rows.sort((a, b) => a.submissionNum - b.submissionNum)) out.get(s.jobId)!.push(s);
    return out;
  }

  private async walkNewest(m: EntityManager, jobIds: string[], n: number): Promise<JobSubmission[]> {
    const rows: Record<string, unknown>[] = await m.query(
      `WITH RECURSIVE walk (job_id, num, k) AS (
         SELECT j.id, j.latest_submission_num, 1 FROM jobs j WHERE j.id = ANY($1::uuid[])
         UNION ALL
         SELECT w.job_id,
                (SELECT max(x.submission_num) FROM job_submissions x WHERE x.job_id = w.job_id AND x.submission_num < w.num),
                w.k + 1
           FROM walk w
          WHERE w.k < $2 AND w.num IS NOT NULL
       )
       -- OFFSET 0 keeps this a per-step index probe (never a hash join over the whole table).
       SELECT s.* FROM walk w
        CROSS JOIN LATERAL (SELECT * FROM job_submissions x WHERE x.job_id = w.job_id AND x.submission_num = w.num OFFSET 0) s`,
      [jobIds, n],
    );
    const metadata = m.connection.getMetadata(JobSubmission);
    return rows.map((row) => {
      const entity: Record<string, unknown> = {};
      for (const column of metadata.columns) {
        const raw = row[column.databaseName];
        entity[column.propertyName] = column.transformer && !Array.isArray(column.transformer) ? column.transformer.from(raw) : raw;
      }
      return m.create(JobSubmission, entity as Partial<JobSubmission>);
    });
  }
}
