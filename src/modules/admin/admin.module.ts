import { Module } from '@nestjs/common';
import { BillingModule } from '../billing/billing.module';
import { JobGroupsModule } from '../job-groups/job-groups.module';
import { JobsModule } from '../jobs/jobs.module';
import { RunsModule } from '../runs/runs.module';
import { AdminController } from './admin.controller';
import { InvariantsService } from './invariants.service';

@Module({ imports: [JobsModule, JobGroupsModule, RunsModule, BillingModule], controllers: [AdminController], providers: [InvariantsService] })
export class AdminModule {}
