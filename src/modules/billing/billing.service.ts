import { Injectable, OnModuleInit } from '@nestjs/common';
import { randomInt } from 'node:crypto';
import { EntityManager } from 'typeorm';
import { DomainError, validationFailed } from '../../common/errors/domain-error';
import type { StatementRider } from '../../infra/database/rider';
import { TransactionRunner } from '../../infra/database/transaction.runner';
import { BackgroundLoopsService } from '../../infra/loops/background-loops.service';
import { InvariantsRegistry } from '../../infra/invariants/invariants.registry';
import { required } from '../../common/required';
import { BillingReportRow, CostReport, NewRateDto, ReportDimension, ResourceView } from './dto/billing.dto';
import { BillingCostsRepository, CostRow } from './billing-costs.repository';
import { BillingRepository, NewAttempt, ResourceRow, TOKENS } from './billing.repository';
import { RequestableResourcesService } from './requestable-resources.service';
import { FromReplica } from '../../infra/database/read-replica';

export type { NewAttempt };

/** Money and usage in responses: exact numeric in the database, rounded to 10 decimals only when turned into JSON. */
const num = (s: string) => Number(Number(s).toFixed(10));

function toCostReport(rows: CostRow[]): CostReport {
  const breakdown = rows.map((r) => ({
    resource: r.resource,
    usage: num(r.usage),
    unit: r.unit,
    cost_usd: num(r.cost),
  }));
  const total = rows.reduce((s, r) => s + Number(r.cost), 0);
  const running = rows.reduce((s, r) => s + Number(r.running), 0);
  return { total_usd: num(String(total)), running_usd: num(String(running)), breakdown };
}

const toResourceView = (r: ResourceRow): ResourceView => ({
  id: r.id,
  name: r.name,
  unit: r.unit,
  rate_usd_per_unit_hour: Number(r.rate),
  version: r.version,
  valid_from: new Date(r.validFrom).toISOString(),
});

/** The most rows one billing report answers (about 100 bytes each). */
export const MAX_REPORT_ROWS = 100_000;

/**
 * Billing: versioned rates, quantities pinned when a submission starts, usage accrued from a monotone rollup time
 * into aggregates per job, per group (every ancestor), per run and per project × user × UTC day. Methods taking an
 * EntityManager join the caller's lifecycle transaction; callers hand over every id billing needs.
 */
@Injectable()
export class BillingService implements OnModuleInit {
  constructor(
    private readonly tx: TransactionRunner,
    private readonly billing: BillingRepository,
    private readonly costs: BillingCostsRepository,
    private readonly loops: BackgroundLoopsService,
    private readonly invariants: InvariantsRegistry,
    private readonly requestable: RequestableResourcesService,
  ) {}

  onModuleInit(): void {
    this.loops.register({ name: 'billing_shards', everyMs: 300_000, pass: () => this.compactShards(1000) });
    this.invariants.register({ name: 'billing_usage', check: (limit) => this.usageMismatches(limit) });
  }

  async currentResources(): Promise<{ items: ResourceView[] }> {
    return { items: (await this.billing.currentResources()).map(toResourceView) };
  }

  /**
   * A new version of a rate; usage already pinned to older versions keeps their rates. Only a resource some
   * requestable key maps to can have one (anything else could never be billed), in that key's unit.
   */
  async addRateVersion(body: NewRateDto): Promise<ResourceView> {
    try {
      const row = await this.tx.run(async (m) => {
        const unit = await this.billing.unitOfBilledResource(m, body.name);
        if (unit === null) {
          throw validationFailed(
            'name',
            `is not a billed resource: no requestable resource key maps to ${body.name} (adding one is a migration)`,
          );
        }
        if (body.unit !== undefined && body.unit !== unit)
          throw validationFailed('unit', `must be ${unit}, the unit ${body.name} is billed in, or be left out`);
        return this.billing.insertVersion(m, body.name, body.rate_usd_per_unit_hour, unit);
      });
      this.requestable.invalidate();
      return toResourceView(row);
    } catch (err) {
      if ((err as { driverError?: { constraint?: string } }).driverError?.constraint === 'uq_resources_name_version') {
        throw new DomainError('CONFLICT', `a concurrent change of ${body.name}'s rate won; retry`);
      }
      throw err;
    }
  }

  /**
   * Checks the requested resources of a submit or add-jobs request's job entries against requestable_resources:
   * 400 naming `jobs[i].spec.resources.<key>` for an unknown key, a missing required one, a quantity out of its
   * bounds or decimals, or one above 0 for a resource without a rate.
   */
  checkRequestedResources(specs: readonly { resources: Record<string, unknown> }[]): Promise<void> {
    return this.requestable.check(specs);
  }

  /**
   * Starts each submission's clock (now) and pins, per requested key that maps to a billed resource with a rate, the
   * quantity in that resource's unit at its current rate version. One statement; repeats change nothing.
   */
  async startAttempts(m: EntityManager, attempts: readonly NewAttempt[]): Promise<void> {
    await this.billing.insertAttempts(m, attempts);
  }

  /**
   * Heartbeats: accrues the submissions' usage up to now, in one statement and one shard (two such transactions then
   * never take a run's shards in opposite orders).
   */
  async accrue(m: EntityManager, submissionIds: readonly string[]): Promise<void> {
    if (submissionIds.length === 0) return;
    await this.billing.accrue(m, submissionIds, true, false, randomInt(TOKENS));
  }

  /**
   * Attempts ended: accrues each up to now and closes it, or (a lapsed lease, `atLastRollup`) closes it where the
   * last heartbeat left the clock, in one statement. Closed attempts never accrue again. `rider` is written in the
   * same statement (the lifecycle's events of the ending attempts: see StatementRider).
   */
  async closeAttempts(
    m: EntityManager,
    submissionIds: readonly string[],
    atLastRollup = false,
    rider?: StatementRider,
  ): Promise<void> {
    if (submissionIds.length === 0) return;
    await this.billing.accrue(m, submissionIds, !atLastRollup, true, randomInt(TOKENS), rider);
  }

  async runCost(runId: string): Promise<CostReport> {
    return required((await this.runCosts([runId])).get(runId), `the cost of run ${runId}`);
  }

  /** Costs of many runs in one statement, exact now. */
  async runCosts(runIds: string[], m?: EntityManager): Promise<Map<string, CostReport>> {
    const rows = await this.costs.runCosts(runIds, m);
    return new Map(runIds.map((id) => [id, toCostReport(rows.filter((r) => r.key === id))]));
  }

  /** Cost so far of each submission (0 for one that never ran), in one statement. */
  async submissionCosts(submissionIds: string[], m?: EntityManager): Promise<Map<string, number>> {
    const rows = await this.costs.submissionCosts(submissionIds, m);
    return new Map(rows.map((r) => [r.id, num(r.cost)]));
  }

  async groupCost(runId: string, jobGroupId: number): Promise<CostReport> {
    return toCostReport(await this.costs.groupCost(runId, jobGroupId));
  }

  async projectCost(projectId: string): Promise<CostReport> {
    return toCostReport(await this.costs.projectCost(projectId));
  }

  /** 402 when the project's accrued cost (running work included) is at or over its limit. */
  async assertWithinLimit(projectId: string, limitUsd: number | null): Promise<void> {
    if (limitUsd === null || limitUsd === undefined) return;
    const { total_usd } = await this.projectCost(projectId);
    if (total_usd >= Number(limitUsd)) {
      throw new DomainError(
        'BILLING_LIMIT_EXCEEDED',
        `the project has accrued ${total_usd} USD, at or over its billing limit of ${limitUsd} USD`,
      );
    }
  }

  /** A project's billing report between two UTC dates (inclusive), grouped by any of user, day, resource. */
  @FromReplica()
  async report(
    projectId: string,
    from: string,
    to: string,
    by: ReportDimension[],
  ): Promise<(Omit<BillingReportRow, 'user'> & { userId?: string })[]> {
    if (Number.isNaN(Date.parse(`${from}T00:00:00Z`))) throw validationFailed('from', 'is not a valid date');
    if (Number.isNaN(Date.parse(`${to}T00:00:00Z`))) throw validationFailed('to', 'is not a valid date');
    if (to < from) throw validationFailed('to', 'must not be before from');
    // One more than the maximum tells a report too big for one answer: refused, never cut silently.
    const rows = await this.costs.report(projectId, from, to, by, MAX_REPORT_ROWS + 1);
    if (rows.length > MAX_REPORT_ROWS) {
      throw validationFailed(
        'to',
        `the report would have more than ${MAX_REPORT_ROWS} rows; ` +
          'narrow from/to or group by fewer of user, day, resource',
      );
    }
    return rows.map((r) => ({
      ...(r.userId !== undefined ? { userId: r.userId } : {}),
      ...(r.day !== undefined ? { day: r.day } : {}),
      ...(r.resource !== undefined ? { resource: r.resource, unit: r.unit, usage: num(r.usage) } : {}),
      cost_usd: num(r.cost),
    }));
  }

  /**
   * Maintenance: folds token shards of aggregate rows into their token-0 row, beside live accruals (see the
   * repository for why READ COMMITTED is exact here). Returns the rows removed.
   */
  compactShards(limit: number): Promise<number> {
    return this.tx.run((m) => this.billing.compactShards(m, limit));
  }

  /** Usage recomputed from attempts × quantities against every aggregate. */
  async usageMismatches(limit: number): Promise<string[]> {
    const rows = await this.billing.usageMismatches(limit);
    return rows.map((r) => `${r.scope}: aggregates hold ${r.actual} unit-seconds, attempts say ${r.expected}`);
  }
}
