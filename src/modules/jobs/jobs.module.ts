import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DependenciesRepository } from './dependencies.repository';
import { DependenciesService } from './dependencies.service';
import { Job } from './entities/job.entity';
import { JobParent } from './entities/job-parent.entity';
import { JobSubmission } from './entities/job-submission.entity';
import { JobPagesRepository } from './job-pages.repository';
import { JobsRepository } from './jobs.repository';
import { JobsService } from './jobs.service';
import { LatestSubmissionsRepository } from './latest-submissions.repository';
import { SubmissionClaimsRepository } from './submission-claims.repository';
import { SubmissionLocksRepository } from './submission-locks.repository';
import { SubmissionsRepository } from './submissions.repository';
import { SubmissionsService } from './submissions.service';

/** Jobs and their submissions. HTTP routes live with the run routes (RunsModule) and the worker API. */
@Module({
  imports: [TypeOrmModule.forFeature([Job, JobSubmission, JobParent])],
  providers: [
    DependenciesRepository,
    DependenciesService,
    JobPagesRepository,
    JobsRepository,
    LatestSubmissionsRepository,
    SubmissionClaimsRepository,
    SubmissionLocksRepository,
    SubmissionsRepository,
    JobsService,
    SubmissionsService,
  ],
  exports: [JobsService, SubmissionsService, DependenciesService],
})
export class JobsModule {}
