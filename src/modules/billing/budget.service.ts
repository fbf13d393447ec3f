import { Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { BackgroundLoopsService } from '../../infra/loops/background-loops.service';
import { ProjectsService } from '../projects/projects.service';
import { BillingService } from './billing.service';

/** Stops up to `limit` active runs of a project for `budget_exceeded`; returns how many it stopped. */
export type StopProjectRuns = (projectId: string, limit: number) => Promise<number>;

/**
 * Billing limits: a project whose accrued cost (running work included) reaches its limit has its active runs
 * stopped with reason `budget_exceeded` (new runs and jobs are refused at submission). Bounded passes that walk
 * the projects with a limit, resuming where the previous pass stopped. Stopping runs is the runs module's: it
 * hands its action here at start (billing never reads or writes runs).
 */
@Injectable()
export class BudgetService implements OnModuleInit {
  private readonly logger = new Logger(BudgetService.name);
  private after: string | undefined;
  private stopProjectRuns?: StopProjectRuns;

  constructor(
    private readonly projects: ProjectsService,
    private readonly billing: BillingService,
    private readonly loops: BackgroundLoopsService,
  ) {}

  onModuleInit(): void {
    this.loops.register({ name: 'budget', everyMs: 5000, pass: () => this.enforce(100) });
  }

  /** Called once by the module that owns runs. */
  onBudgetExceeded(stop: StopProjectRuns): void {
    this.stopProjectRuns = stop;
  }

  /** One pass over at most `maxProjects` projects; returns the number of runs stopped. */
  async enforce(maxProjects: number, maxRunsPerProject = 100): Promise<number> {
    if (!this.stopProjectRuns) throw new Error('no module stops runs over budget');
    const page = await this.projects.withBillingLimit(this.after, maxProjects);
    this.after = page.length < maxProjects ? undefined : page[page.length - 1].projectId;
    let stopped = 0;
    for (const p of page) {
      const cost = await this.billing.projectCost(p.projectId);
      if (cost.total_usd < p.billingLimitUsd) continue;
      const n = await this.stopProjectRuns(p.projectId, maxRunsPerProject);
      if (n > 0) {
        const fields = { project: p.projectId, cost: cost.total_usd, limit: p.billingLimitUsd, runs: n };
        this.logger.warn(fields, 'billing limit reached: runs stopped');
      }
      stopped += n;
    }
    return stopped;
  }
}
