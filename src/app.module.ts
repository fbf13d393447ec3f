import { Module } from '@nestjs/common';
import { AdminModule } from './modules/admin/admin.module';
import { BillingModule } from './modules/billing/billing.module';
import { ScheduleModule } from '@nestjs/schedule';
import { IdempotencyModule } from './common/idempotency/idempotency.module';
import { ConfigModule } from './config/config.module';
import { EventsFeedModule } from './modules/events/events-feed.module';
import { DatabaseModule } from './infra/database/database.module';
import { TransactionsModule } from './infra/database/transactions.module';
import { HealthModule } from './infra/health/health.module';
import { LoggingModule } from './infra/logging/logging.module';
import { MetricsModule } from './infra/metrics/metrics.module';
import { ProjectsModule } from './modules/projects/projects.module';
import { JobGroupsApiModule } from './modules/job-groups/job-groups-api.module';
import { LoopsModule } from './infra/loops/loops.module';
import { LogsModule } from './modules/logs/logs.module';
import { InvariantsModule } from './infra/invariants/invariants.module';
import { RunsModule } from './modules/runs/runs.module';
import { RunFilesModule } from './modules/run-files/run-files.module';
import { UsersModule } from './modules/users/users.module';
import { WorkersModule } from './modules/workers/workers.module';

@Module({
  imports: [
    ConfigModule,
    LoggingModule,
    DatabaseModule,
    TransactionsModule,
    MetricsModule,
    LoopsModule,
    InvariantsModule,
    HealthModule,
    IdempotencyModule,
    UsersModule,
    ProjectsModule,
    RunsModule,
    WorkersModule,
    BillingModule,
    JobGroupsApiModule,
    LogsModule,
    EventsFeedModule,
    AdminModule,
    RunFilesModule,
    ScheduleModule.forRoot(),
  ],
})
export class AppModule {}
