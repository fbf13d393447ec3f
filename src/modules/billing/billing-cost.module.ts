import { Module } from '@nestjs/common';
import { JobGroupsModule } from '../job-groups/job-groups.module';
import { ProjectsModule } from '../projects/projects.module';
import { RunsModule } from '../runs/runs.module';
import { UsersModule } from '../users/users.module';
import { BillingModule } from './billing.module';
import { CostController } from './cost.controller';

/** The cost routes under a run: they check run access through RunsModule, which itself uses BillingModule. */
@Module({
  imports: [BillingModule, RunsModule, JobGroupsModule, ProjectsModule, UsersModule],
  controllers: [CostController],
})
export class BillingCostModule {}
