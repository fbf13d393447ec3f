import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { Job } from './entities/job.entity';
import { JobSubmission } from './entities/job-submission.entity';

/**
 * The latest-submission fetch: for each job, its N newest existing submissions, read newest-first from
 * uq_job_submissions_job_id_submission_num with a per-job LIMIT (LATERAL), in one statement for all jobs. Its cost
 * is jobs × N index reads, whatever history holds; numbering gaps don't matter because it counts rows, not numbers.
 */
@Injectable()
export class LatestSubmissionsRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Map job id → its newest `n` submissions, ascending. `n` = null means all of them. */
  async latestPerJob(jobIds: string[], n: number | null, m: EntityManager = this.dataSource.manager): Promise<Map<string, JobSubmission[]>> {
    const out = new Map<string, JobSubmission[]>(jobIds.map((id) => [id, []]));
    if (jobIds.length === 0 || n === 0) return out;
    const metadata = this.dataSource.getMetadata(JobSubmission);
    const qb = m
      .createQueryBuilder()
      .select('s.*')
      .from(Job, 'j')
      .innerJoin(
        (sub) => {
          sub.select('x.*').from(JobSubmission, 'x').where('x.job_id = j.id').orderBy('x.submission_num', 'DESC');
          return n === null ? sub : sub.limit(n);
        },
        's',
        'true',
      )
      .where('j.id = ANY(:jobIds)', { jobIds });
    // TypeORM has no LATERAL join helper: the join keyword is rewritten on the generated SQL, nothing else.
    const [sql, params] = qb.getQueryAndParameters();
    const rows: Record<string, unknown>[] = await m.query(sql.replace('INNER JOIN (', 'INNER JOIN LATERAL ('), params);
    const submissions = rows.map((r) => m.create(JobSubmission, hydrate(metadata, r)));
    for (const s of submissions.sort((a, b) => a.submissionNum - b.submissionNum)) out.get(s.jobId)!.push(s);
    return out;
  }
}

function hydrate(metadata: ReturnType<DataSource['getMetadata']>, row: Record<string, unknown>): Partial<JobSubmission> {
  const entity: Record<string, unknown> = {};
  for (const column of metadata.columns) {
    const raw = row[column.databaseName];
    entity[column.propertyName] = column.transformer && !Array.isArray(column.transformer) ? column.transformer.from(raw) : raw;
  }
  return entity as Partial<JobSubmission>;
}
