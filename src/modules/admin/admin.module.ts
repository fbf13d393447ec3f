import { Module } from '@nestjs/common';
import { BillingModule } from '../billing/billing.module';
import { EventsFeedModule } from '../events/events-feed.module';
import { JobGroupsModule } from '../job-groups/job-groups.module';
import { JobsModule } from '../jobs/jobs.module';
import { RunsModule } from '../runs/runs.module';
import { WorkersModule } from '../workers/workers.module';
import { AdminController } from './admin.controller';
import { InvariantsService } from './invariants.service';
import { MaintenanceService } from './maintenance.service';

@Module({
  imports: [JobsModule, JobGroupsModule, RunsModule, BillingModule, WorkersModule, EventsFeedModule],
  controllers: [AdminController],
  providers: [InvariantsService, MaintenanceService],
})
export class AdminModule {}
