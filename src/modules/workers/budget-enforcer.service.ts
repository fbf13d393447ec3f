import { Injectable, Logger } from '@nestjs/common';
import { BillingService } from '../billing/billing.service';
import { budgetExceededEvent } from '../events/event-types';
import { ProjectsService } from '../projects/projects.service';
import { RunsService } from '../runs/runs.service';

/**
 * Billing limits: a project whose accrued cost (running work included) reaches its limit has its active runs
 * stopped with reason `budget_exceeded` (new runs and jobs are refused at submission). Bounded passes that walk
 * the projects with a limit, resuming where the previous pass stopped.
 */
@Injectable()
export class BudgetEnforcerService {
  private readonly logger = new Logger(BudgetEnforcerService.name);
  private after: string | undefined;

  constructor(
    private readonly projects: ProjectsService,
    private readonly billing: BillingService,
    private readonly runs: RunsService,
  ) {}

  /** One pass over at most `maxProjects` projects; returns the number of runs stopped. */
  async enforce(maxProjects: number, maxRunsPerProject = 100): Promise<number> {
    const page = await this.projects.withBillingLimit(this.after, maxProjects);
    this.after = page.length < maxProjects ? undefined : page[page.length - 1].projectId;
    let stopped = 0;
    for (const p of page) {
      const cost = await this.billing.projectCost(p.projectId);
      if (cost.total_usd < p.billingLimitUsd) continue;
      const n = await this.runs.stopActiveRuns(p.projectId, 'budget_exceeded', maxRunsPerProject, [
        budgetExceededEvent(p.projectId),
      ]);
      if (n > 0)
        this.logger.warn(
          { project: p.projectId, cost: cost.total_usd, limit: p.billingLimitUsd, runs: n },
          'billing limit reached: runs stopped',
        );
      stopped += n;
    }
    return stopped;
  }
}
