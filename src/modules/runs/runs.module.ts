import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { BillingModule } from '../billing/billing.module';
import { EventsModule } from '../events/events.module';
import { JobGroupsModule } from '../job-groups/job-groups.module';
import { JobsModule } from '../jobs/jobs.module';
import { ProjectsModule } from '../projects/projects.module';
import { UsersModule } from '../users/users.module';
import { Run } from './entities/run.entity';
import { RunAccessService } from './run-access.service';
import { RunCommandsService } from './run-commands.service';
import { RunStatusService } from './run-status.service';
import { RunViewsService } from './run-views.service';
import { RunsController } from './runs.controller';
import { RunsRepository } from './runs.repository';

/**
 * Runs: submit, stop, delete (RunCommandsService), their views and the list (RunViewsService), their status
 * derived from the root group's counters (RunStatusService), and who may see which run (RunAccessService). The
 * last three are what other modules use, and RunCommandsService's hooks (what goes with a deleted run).
 */
@Module({
  imports: [
    TypeOrmModule.forFeature([Run]),
    ProjectsModule,
    UsersModule,
    JobGroupsModule,
    JobsModule,
    BillingModule,
    EventsModule,
  ],
  controllers: [RunsController],
  providers: [RunsRepository, RunAccessService, RunCommandsService, RunStatusService, RunViewsService],
  exports: [RunAccessService, RunCommandsService, RunStatusService, RunViewsService],
})
export class RunsModule {}
