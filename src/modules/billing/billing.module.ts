import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { BillingRepository } from './billing.repository';
import { BillingService } from './billing.service';
import { BillingAttempt } from './entities/billing-attempt.entity';
import { RequestableResource } from './entities/requestable-resource.entity';
import { Resource } from './entities/resource.entity';
import { SubmissionResource } from './entities/submission-resource.entity';
import { BillingDailyUsage, BillingGroupUsage, BillingJobUsage, BillingRunUsage } from './entities/usage.entities';
import { RequestableResourcesService } from './requestable-resources.service';
import { AdminResourcesController, ResourcesController } from './resources.controller';

/**
 * Billing core: rates, pinned quantities, accrual and cost reads. It depends on no other domain module (callers
 * pass the ids it needs), so Runs and Workers can use it; the run-scoped cost routes live in BillingCostModule.
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
  ],
  controllers: [ResourcesController, AdminResourcesController],
  providers: [BillingRepository, BillingService, RequestableResourcesService],
  exports: [BillingService],
})
export class BillingModule {}
