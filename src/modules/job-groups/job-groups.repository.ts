import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import type { Cancellation } from './dto/job-group.dto';
import { JobGroup, type JobGroupState, type StoredGroupStatus } from './entities/job-group.entity';
import { CANCELLATION } from './job-group-rows';
import { required } from '../../common/required';
import { COUNTER_TOKENS } from './counter-tokens';

export interface NewGroup {
  jobGroupId: number;
  parentId: number | null;
  depth: number;
  attributes: Record<string, unknown>;
  cancelAfterNFailures: number | null;
}

/** The group tree (groups, closure rows, states) and its cancellations; counters: JobGroupCountersRepository. */
@Injectable()
export class JobGroupsRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * Inserts groups with their closure rows and zeroed counters (COUNTER_TOKENS rows each). `ancestors` maps a group
   * to its [self, parent, ...].
   */
  async insertGroups(
    m: EntityManager,
    runId: string,
    groups: NewGroup[],
    ancestors: Map<number, number[]>,
  ): Promise<void> {
    if (groups.length === 0) return;
    await m.query(
      `INSERT INTO job_groups (run_id, job_group_id, parent_id, depth, attributes, cancel_after_n_failures)
       SELECT $1, * FROM unnest($2::int[], $3::int[], $4::int[], $5::jsonb[], $6::int[])`,
      [
        runId,
        groups.map((g) => g.jobGroupId),
        groups.map((g) => g.parentId),
        groups.map((g) => g.depth),
        groups.map((g) => JSON.stringify(g.attributes)),
        groups.map((g) => g.cancelAfterNFailures),
      ],
    );
    const closure = groups.flatMap((g) =>
      required(ancestors.get(g.jobGroupId), `the ancestors of group ${g.jobGroupId}`).map((a, level) => [
        g.jobGroupId,
        a,
        level,
      ]),
    );
    await m.query(
      `INSERT INTO job_group_self_and_ancestors (run_id, job_group_id, ancestor_id, level)
       SELECT $1, * FROM unnest($2::int[], $3::int[], $4::int[])`,
      [runId, closure.map((r) => r[0]), closure.map((r) => r[1]), closure.map((r) => r[2])],
    );
    await m.query(
      `INSERT INTO job_group_counters (run_id, job_group_id, token)
       SELECT $1, g, t FROM unnest($2::int[]) g CROSS JOIN generate_series(0, $3::int - 1) t`,
      [runId, groups.map((g) => g.jobGroupId), COUNTER_TOKENS],
    );
  }

  async nextGroupId(m: EntityManager, runId: string): Promise<number> {
    const [row] = await m.query(`SELECT coalesce(max(job_group_id), 0) + 1 AS next FROM job_groups WHERE run_id = $1`, [
      runId,
    ]);
    return Number(row.next);
  }

  findGroup(runId: string, jobGroupId: number, m: EntityManager = this.dataSource.manager): Promise<JobGroup | null> {
    return m.getRepository(JobGroup).findOneBy({ runId, jobGroupId });
  }

  /** Direct cancellations of a group or any ancestor, earliest first. */
  async chainCancellations(
    runId: string,
    jobGroupId: number,
    m: EntityManager = this.dataSource.manager,
  ): Promise<Cancellation[]> {
    return m.query(
      `SELECT ${CANCELLATION}
         FROM job_group_self_and_ancestors sa
         JOIN job_groups_cancelled x ON x.run_id = sa.run_id AND x.job_group_id = sa.ancestor_id
        WHERE sa.run_id = $1 AND sa.job_group_id = $2
        ORDER BY x.cancelled_at, sa.level DESC`,
      [runId, jobGroupId],
    );
  }

  /** The cancellations of group 0 (stops) of the given runs. */
  rootCancellations(
    runIds: string[],
    m: EntityManager = this.dataSource.manager,
  ): Promise<{ runId: string; reason: string }[]> {
    if (runIds.length === 0) return Promise.resolve([]);
    return m.query(
      `SELECT run_id AS "runId", reason FROM job_groups_cancelled WHERE run_id = ANY($1::uuid[]) AND job_group_id = 0`,
      [runIds],
    );
  }

  /** For every group of the given runs that lies under a cancelled group: the earliest such cancellation. */
  async effectiveCancellations(
    runIds: string[],
    m: EntityManager = this.dataSource.manager,
    reason: string | null = null,
  ): Promise<(Cancellation & { runId: string; groupId: number })[]> {
    if (runIds.length === 0) return [];
    return m.query(
      `SELECT DISTINCT ON (sa.run_id, sa.job_group_id) sa.run_id AS "runId", sa.job_group_id AS "groupId",
         ${CANCELLATION}
         FROM job_groups_cancelled x
         JOIN job_group_self_and_ancestors sa ON sa.run_id = x.run_id AND sa.ancestor_id = x.job_group_id
        WHERE x.run_id = ANY($1::uuid[]) AND ($2::text IS NULL OR x.reason = $2)
        ORDER BY sa.run_id, sa.job_group_id, x.cancelled_at, sa.level DESC`,
      [runIds, reason],
    );
  }

  /** Records groups' settled status and state (see RunStatusService's settle). */
  async setStatuses(
    m: EntityManager,
    runId: string,
    settled: { jobGroupId: number; status: StoredGroupStatus; state: JobGroupState }[],
  ): Promise<void> {
    if (settled.length === 0) return;
    await m.query(
      `UPDATE job_groups g SET status = v.status, state = v.state
         FROM unnest($2::int[], $3::text[], $4::text[]) AS v(id, status, state)
        WHERE g.run_id = $1 AND g.job_group_id = v.id`,
      [runId, settled.map((s) => s.jobGroupId), settled.map((s) => s.status), settled.map((s) => s.state)],
    );
  }

  async insertCancellation(
    m: EntityManager,
    runId: string,
    jobGroupId: number,
    by: string,
    reason: string,
  ): Promise<Cancellation> {
    const [row] = await m.query(
      `INSERT INTO job_groups_cancelled AS x (run_id, job_group_id, cancelled_by, reason) VALUES ($1, $2, $3, $4)
       RETURNING ${CANCELLATION}`,
      [runId, jobGroupId, by, reason],
    );
    return row;
  }

  async unswept(limit: number): Promise<(Cancellation & { runId: string })[]> {
    return this.dataSource.query(
      `SELECT x.run_id AS "runId", ${CANCELLATION} FROM job_groups_cancelled x
         WHERE x.swept_at IS NULL ORDER BY x.cancelled_at LIMIT $1`,
      [limit],
    );
  }

  async markSwept(m: EntityManager, runId: string, jobGroupId: number): Promise<void> {
    await m.query(`UPDATE job_groups_cancelled SET swept_at = now() WHERE run_id = $1 AND job_group_id = $2`, [
      runId,
      jobGroupId,
    ]);
  }

  async allClosure(): Promise<{ runId: string; jobGroupId: number; ancestorId: number }[]> {
    return this.dataSource.query(
      `SELECT run_id AS "runId", job_group_id AS "jobGroupId", ancestor_id AS "ancestorId"
         FROM job_group_self_and_ancestors`,
    );
  }

  async anyCancelled(runId: string): Promise<boolean> {
    const [row]: { any: boolean }[] = await this.dataSource.query(
      `SELECT EXISTS (SELECT 1 FROM job_groups_cancelled WHERE run_id = $1) AS any`,
      [runId],
    );
    return row.any;
  }

  async cancelledRunIds(): Promise<string[]> {
    return (await this.dataSource.query(`SELECT DISTINCT run_id AS "runId" FROM job_groups_cancelled`)).map(
      (r: { runId: string }) => r.runId,
    );
  }

  async children(runId: string, parentId: number, after: number | undefined, limit: number): Promise<JobGroup[]> {
    const qb = this.dataSource
      .getRepository(JobGroup)
      .createQueryBuilder('g')
      .where('g.run_id = :runId AND g.parent_id = :parentId', { runId, parentId });
    if (after !== undefined) qb.andWhere('g.job_group_id > :after', { after });
    return qb.orderBy('g.job_group_id', 'ASC').limit(limit).getMany();
  }

  /** The group and all its ancestors (0 included), without locking anything: the closure rows never change. */
  async selfAndAncestorIds(m: EntityManager, runId: string, jobGroupId: number): Promise<number[]> {
    const rows: { id: number }[] = await m.query(
      `SELECT ancestor_id AS id FROM job_group_self_and_ancestors
         WHERE run_id = $1 AND job_group_id = $2 ORDER BY level`,
      [runId, jobGroupId],
    );
    return rows.map((r) => r.id);
  }

  /** Each group's chain (itself first, then its ancestors up to 0), unlocked: closure rows never change. */
  async chainsOf(m: EntityManager, runId: string, groupIds: number[]): Promise<Map<number, number[]>> {
    if (groupIds.length === 0) return new Map();
    const rows: { id: number; chain: number[] }[] = await m.query(
      `SELECT job_group_id AS id, array_agg(ancestor_id ORDER BY level) AS chain FROM job_group_self_and_ancestors
         WHERE run_id = $1 AND job_group_id = ANY($2::int[]) GROUP BY job_group_id`,
      [runId, groupIds],
    );
    return new Map(rows.map((r) => [r.id, r.chain]));
  }

  /** The parent of each given group (null for the root); groups of no such id are left out. */
  async parentsOf(
    runId: string,
    jobGroupIds: number[],
    m: EntityManager = this.dataSource.manager,
  ): Promise<Map<number, number | null>> {
    const rows: { id: number; parentId: number | null }[] = await m.query(
      `SELECT job_group_id AS id, parent_id AS "parentId" FROM job_groups WHERE run_id = $1 AND job_group_id = ANY($2)`,
      [runId, jobGroupIds],
    );
    return new Map(rows.map((r) => [r.id, r.parentId]));
  }

  /** The group and every descendant. */
  async subtreeIds(runId: string, jobGroupId: number, m: EntityManager = this.dataSource.manager): Promise<number[]> {
    const rows: { id: number }[] = await m.query(
      `SELECT job_group_id AS id FROM job_group_self_and_ancestors WHERE run_id = $1 AND ancestor_id = $2`,
      [runId, jobGroupId],
    );
    return rows.map((r) => r.id);
  }
}
