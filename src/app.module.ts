import { Module } from '@nestjs/common';
import { IdempotencyModule } from './common/idempotency/idempotency.module';
import { ConfigModule } from './config/config.module';
import { DatabaseModule } from './infra/database/database.module';
import { HealthModule } from './infra/health/health.module';
import { LoggingModule } from './infra/logging/logging.module';
import { MetricsModule } from './infra/metrics/metrics.module';
import { ProjectsModule } from './modules/projects/projects.module';
import { RunsModule } from './modules/runs/runs.module';
import { UsersModule } from './modules/users/users.module';

@Module({
  imports: [
    ConfigModule,
    LoggingModule,
    DatabaseModule,
    MetricsModule,
    HealthModule,
    IdempotencyModule,
    UsersModule,
    ProjectsModule,
    RunsModule,
  ],
})
export class AppModule {}
