import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ProjectsModule } from '../projects/projects.module';
import { UsersModule } from '../users/users.module';
import { BillingReportController } from './billing-report.controller';
import { BillingCostsRepository } from './billing-costs.repository';
import { BillingRepository } from './billing.repository';
import { BudgetService } from './budget.service';
import { BillingService } from './billing.service';
import { BillingAttempt } from './entities/billing-attempt.entity';
import { RequestableResource } from './entities/requestable-resource.entity';
import { Resource } from './entities/resource.entity';
import { SubmissionResource } from './entities/submission-resource.entity';
import { BillingDailyUsage, BillingGroupUsage, BillingJobUsage, BillingRunUsage } from './entities/usage.entities';
import { RequestableResourcesService } from './requestable-resources.service';
import { AdminResourcesController, ResourcesController } from './resources.controller';

/**
 * Billing: rates, pinned quantities, accrual, cost reads, the project report and the budget loop. Of the other
 * domain modules it uses only projects and users (callers pass the run, job and group ids it needs), so runs and
 * the lifecycle can use it; a run's and a group's cost routes are served under the run by their own modules.
 */
@Module({
  imports: [
    TypeOrmModule.forFeature([
      Resource,
      RequestableResource,
      BillingAttempt,
      SubmissionResource,
      BillingJobUsage,
      BillingGroupUsage,
      BillingRunUsage,
      BillingDailyUsage,
    ]),
    ProjectsModule,
    UsersModule,
  ],
  controllers: [ResourcesController, AdminResourcesController, BillingReportController],
  providers: [BillingRepository, BillingCostsRepository, BillingService, BudgetService, RequestableResourcesService],
  exports: [BillingService, BudgetService],
})
export class BillingModule {}
