import { Injectable } from '@nestjs/common';
import { FINISHED_RUN_STATUSES } from './dto/run-status';
import { InjectDataSource } from '@nestjs/typeorm';
import { Brackets, DataSource, EntityManager } from 'typeorm';
import { preparedQuery } from '../../infra/database/prepared';
import type { DerivedRunStatus, RetryPolicy, RunSpec } from './dto/run-status';
import { Run } from './entities/run.entity';

export interface NewRun {
  projectId: string;
  userId: string;
  runName: string;
  priority: number;
  spec: RunSpec;
  attributes: Record<string, unknown>;
}

export interface RunListFilter {
  /** undefined = every project (global admin). */
  projectIds?: string[];
  statuses: string[];
  userId?: string;
  onlyActive: boolean;
  ascending: boolean;
  after?: { submittedAt: string; id: string };
  limit: number;
}

@Injectable()
export class RunsRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async insertRun(m: EntityManager, run: NewRun): Promise<Run> {
    const repo = m.getRepository(Run);
    return repo.save(repo.create({ ...run, status: 'submitted', statusMessage: null }));
  }

  findRun(projectId: string, runId: string, m: EntityManager = this.dataSource.manager): Promise<Run | null> {
    return m.getRepository(Run).findOneBy({ projectId, id: runId, deleted: false });
  }

  findRunById(runId: string, m: EntityManager = this.dataSource.manager): Promise<Run | null> {
    return m.getRepository(Run).findOneBy({ id: runId });
  }

  /** Whether the run exists and is not deleted: one index read, on a hot path (every log chunk asks). */
  async isLive(m: EntityManager, runId: string): Promise<boolean> {
    const rows = await preparedQuery<{ live: boolean }>(
      m,
      'runs_is_live',
      `SELECT NOT deleted AS live FROM runs WHERE id = $1`,
      [runId],
    );
    return rows[0]?.live ?? false;
  }

  /** What never changes about runs: their project, owner and retry policy (fixed at submission). */
  factsOf(
    m: EntityManager,
    runIds: readonly string[],
  ): Promise<{ id: string; projectId: string; userId: string; retry: RetryPolicy | null }[]> {
    return preparedQuery(
      m,
      'runs_facts_of',
      `SELECT id, project_id AS "projectId", user_id AS "userId", spec -> 'retry' AS retry
         FROM runs WHERE id = ANY($1::uuid[])`,
      [runIds],
    );
  }

  /** Names of runs, by id (what a worker hands its jobs as RUNPLANE_RUN_NAME). */
  async runNames(m: EntityManager, runIds: string[]): Promise<{ id: string; runName: string }[]> {
    if (runIds.length === 0) return [];
    return preparedQuery<{ id: string; runName: string }>(
      m,
      'runs_names',
      `SELECT id, run_name AS "runName" FROM runs WHERE id = ANY($1::uuid[])`,
      [runIds],
    );
  }

  async lockRun(m: EntityManager, runId: string): Promise<Run | null> {
    return m
      .getRepository(Run)
      .createQueryBuilder('r')
      .setLock('pessimistic_write')
      .where('r.id = :runId', { runId })
      .getOne();
  }

  /** The recorded status of runs (what a settle compares the derived one with). */
  statusesOf(m: EntityManager, runIds: string[]): Promise<({ id: string } & DerivedRunStatus)[]> {
    if (runIds.length === 0) return Promise.resolve([]);
    return preparedQuery(
      m,
      'runs_statuses_of',
      `SELECT id, status, status_message AS "statusMessage", termination_reason AS "terminationReason"
         FROM runs WHERE id = ANY($1::uuid[])`,
      [runIds],
    );
  }

  /** Ids of unfinished runs after `after`, in id order (the settle loop walks them a slice at a time). */
  async unfinishedRunIdsAfter(after: string, limit: number): Promise<string[]> {
    const rows: { id: string }[] = await this.dataSource.query(
      `SELECT id FROM runs WHERE finished_at IS NULL AND id > $1 ORDER BY id LIMIT $2`,
      [after, limit],
    );
    return rows.map((r) => r.id);
  }

  async setStatus(m: EntityManager, runId: string, s: DerivedRunStatus, finished: boolean): Promise<void> {
    await m.query(
      `UPDATE runs SET status = $2, status_message = $3, termination_reason = $4,
              finished_at = CASE WHEN $5 THEN coalesce(finished_at, now()) ELSE NULL END
        WHERE id = $1`,
      [runId, s.status, s.statusMessage, s.terminationReason, finished],
    );
  }

  async markDeleted(m: EntityManager, runId: string): Promise<void> {
    await m.getRepository(Run).update({ id: runId }, { deleted: true });
  }

  /** A page of runs, keyset on (submitted_at, id) in either direction, from the partial indexes on non-deleted runs. */
  listRuns(f: RunListFilter): Promise<Run[]> {
    const qb = this.dataSource.getRepository(Run).createQueryBuilder('r').where('NOT r.deleted');
    if (f.projectIds) qb.andWhere('r.project_id = ANY(:projectIds)', { projectIds: f.projectIds });
    if (f.statuses.length > 0) qb.andWhere('r.status = ANY(:statuses)', { statuses: f.statuses });
    if (f.userId) qb.andWhere('r.user_id = :userId', { userId: f.userId });
    if (f.onlyActive) qb.andWhere(`r.status <> ALL(:finished)`, { finished: FINISHED_RUN_STATUSES });
    const dir = f.ascending ? 'ASC' : 'DESC';
    const after = f.after;
    if (after) {
      const op = f.ascending ? '>' : '<';
      qb.andWhere(
        new Brackets((w) =>
          w
            .where(`r.submitted_at ${op} :afterAt`, { afterAt: after.submittedAt })
            .orWhere(`r.submitted_at = :afterAt AND r.id ${op} :afterId`, { afterId: after.id }),
        ),
      );
    }
    return qb.orderBy('r.submitted_at', dir).addOrderBy('r.id', dir).limit(f.limit).getMany();
  }

  /** Every non-deleted run's stored status facts (invariants check). */
  allRuns(): Promise<Run[]> {
    return this.dataSource.getRepository(Run).find();
  }

  /** Ids of a project's runs that are not finished. */
  async activeRunIds(projectId: string, limit: number): Promise<string[]> {
    const rows = await this.dataSource
      .getRepository(Run)
      .createQueryBuilder('r')
      .select('r.id', 'id')
      .where(`r.project_id = :projectId AND NOT r.deleted AND r.status <> ALL(:finished)`, {
        projectId,
        finished: FINISHED_RUN_STATUSES,
      })
      .orderBy('r.submitted_at')
      .limit(limit)
      .getRawMany<{ id: string }>();
    return rows.map((r) => r.id);
  }

  /**
   * Serialises, per project, the transactions that add jobs while a queued-job limit is set (any other project
   * may share the lock by hash collision: that only serialises a little more).
   */
  async lockProjectQueue(m: EntityManager, projectId: string): Promise<void> {
    await m.query(`SELECT pg_advisory_xact_lock($1, hashtext($2))`, [0x72707175, projectId]);
  }

  /** When the oldest run that has not finished was submitted (null when every run has finished). */
  async oldestUnfinishedSubmittedAt(): Promise<Date | null> {
    const [row] = await this.dataSource.query(`SELECT min(submitted_at) AS at FROM runs WHERE finished_at IS NULL`);
    return row.at === null ? null : new Date(row.at);
  }

  async unfinishedRunIds(m: EntityManager, projectId: string): Promise<string[]> {
    const rows: { id: string }[] = await m.query(`SELECT id FROM runs WHERE project_id = $1 AND finished_at IS NULL`, [
      projectId,
    ]);
    return rows.map((r) => r.id);
  }
}
