import { Module } from '@nestjs/common';
import { BillingModule } from '../billing/billing.module';
import { EventsFeedModule } from '../events/events-feed.module';
import { EventsModule } from '../events/events.module';
import { JobGroupsModule } from '../job-groups/job-groups.module';
import { ProjectsModule } from '../projects/projects.module';
import { JobsModule } from '../jobs/jobs.module';
import { RunsModule } from '../runs/runs.module';
import { BackgroundLoopsService } from './background-loops.service';
import { BudgetEnforcerService } from './budget-enforcer.service';
import { WorkerLifecycleService } from './worker-lifecycle.service';
import { WorkersController } from './workers.controller';

/** The internal worker API and the background loops that keep the lifecycle moving without workers. */
@Module({
  imports: [JobsModule, JobGroupsModule, RunsModule, BillingModule, ProjectsModule, EventsModule, EventsFeedModule],
  controllers: [WorkersController],
  providers: [WorkerLifecycleService, BackgroundLoopsService, BudgetEnforcerService],
  exports: [WorkerLifecycleService, BackgroundLoopsService, BudgetEnforcerService],
})
export class WorkersModule {}
