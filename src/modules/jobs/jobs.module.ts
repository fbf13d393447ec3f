import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Job } from './entities/job.entity';
import { JobSubmission } from './entities/job-submission.entity';
import { JobsRepository } from './jobs.repository';
import { JobsService } from './jobs.service';
import { LatestSubmissionsRepository } from './latest-submissions.repository';
import { SubmissionsRepository } from './submissions.repository';
import { SubmissionsService } from './submissions.service';

/** Jobs and their submissions. HTTP routes live with the run routes (RunsModule) and the worker API. */
@Module({
  imports: [TypeOrmModule.forFeature([Job, JobSubmission])],
  providers: [JobsRepository, LatestSubmissionsRepository, SubmissionsRepository, JobsService, SubmissionsService],
  exports: [JobsService, SubmissionsService],
})
export class JobsModule {}
