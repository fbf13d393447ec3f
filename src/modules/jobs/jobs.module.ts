import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Job } from './entities/job.entity';
import { JobSubmission } from './entities/job-submission.entity';
import { JobsRepository } from './jobs.repository';
import { JobsService } from './jobs.service';
import { LatestSubmissionsRepository } from './latest-submissions.repository';

/** Jobs and their submissions. HTTP routes live with the run routes (RunsModule) and the worker API. */
@Module({
  imports: [TypeOrmModule.forFeature([Job, JobSubmission])],
  providers: [JobsRepository, LatestSubmissionsRepository, JobsService],
  exports: [JobsService],
})
export class JobsModule {}
