import { Module } from '@nestjs/common';
import { BillingModule } from '../billing/billing.module';
import { EventsModule } from '../events/events.module';
import { JobsModule } from '../jobs/jobs.module';
import { RunsModule } from '../runs/runs.module';
import { JobGroupRequestsService } from './job-group-requests.service';
import { JobGroupsController } from './job-groups.controller';
import { JobGroupsModule } from './job-groups.module';

/**
 * The job-group routes under a run (create, add jobs, read, children, jobs, cancel, cost). They sit above the runs
 * module (they check run access and re-derive run status through it), while the tree itself (JobGroupsModule)
 * sits below it (a run's submission creates its tree): two layers of one domain, so neither imports the other
 * in a circle.
 */
@Module({
  imports: [JobGroupsModule, RunsModule, JobsModule, BillingModule, EventsModule],
  controllers: [JobGroupsController],
  providers: [JobGroupRequestsService],
})
export class JobGroupsApiModule {}
