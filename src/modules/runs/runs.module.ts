import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { BillingModule } from '../billing/billing.module';
import { EventsModule } from '../events/events.module';
import { JobGroupsModule } from '../job-groups/job-groups.module';
import { JobsModule } from '../jobs/jobs.module';
import { ProjectsModule } from '../projects/projects.module';
import { UsersModule } from '../users/users.module';
import { Run } from './entities/run.entity';
import { JobGroupsController } from './job-groups.controller';
import { RunJobGroupsService } from './run-job-groups.service';
import { RunsController } from './runs.controller';
import { RunsRepository } from './runs.repository';
import { RunsService } from './runs.service';

/** Runs and the public routes under a run (its job groups, jobs and submission history). */
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
  controllers: [RunsController, JobGroupsController],
  providers: [RunsRepository, RunsService, RunJobGroupsService],
  exports: [RunsService],
})
export class RunsModule {}
