import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { JobsModule } from '../jobs/jobs.module';
import { LifecycleModule } from '../lifecycle/lifecycle.module';
import { RunsModule } from '../runs/runs.module';
import { LogChunk } from './entities/log-chunk.entity';
import { SubmissionLog } from './entities/submission-log.entity';
import { LOG_STORE } from './log-store';
import { LogsInternalController } from './logs-internal.controller';
import { LogsController } from './logs.controller';
import { LogsService } from './logs.service';
import { PostgresLogStore } from './postgres-log-store';

/**
 * Jobs' output: the worker's chunks (internal API) and the users' pages and follows (public API), over a LogStore
 * (PostgreSQL rows here; bind LOG_STORE to another implementation to keep the bytes elsewhere). Above the lifecycle
 * (who holds a submission) and runs (who may read a run; a deleted run's logs go in its deletion's transaction).
 */
@Module({
  imports: [TypeOrmModule.forFeature([LogChunk, SubmissionLog]), LifecycleModule, RunsModule, JobsModule],
  controllers: [LogsController, LogsInternalController],
  providers: [PostgresLogStore, { provide: LOG_STORE, useExisting: PostgresLogStore }, LogsService],
})
export class LogsModule {}
