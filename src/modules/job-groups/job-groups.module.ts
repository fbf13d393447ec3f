import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { JobGroup } from './entities/job-group.entity';
import { JobGroupCancellation } from './entities/job-group-cancellation.entity';
import { JobGroupCounters } from './entities/job-group-counters.entity';
import { JobGroupSelfAndAncestor } from './entities/job-group-self-and-ancestor.entity';
import { JobGroupCountersRepository } from './job-group-counters.repository';
import { JobGroupInvariantsService } from './job-group-invariants.service';
import { JobGroupViewsService } from './job-group-views.service';
import { JobGroupsRepository } from './job-groups.repository';
import { JobGroupsService } from './job-groups.service';

/** The job-group tree, its counters and cancellations. Its HTTP routes live with the run routes (RunsModule). */
@Module({
  imports: [TypeOrmModule.forFeature([JobGroup, JobGroupSelfAndAncestor, JobGroupCancellation, JobGroupCounters])],
  providers: [
    JobGroupsRepository,
    JobGroupCountersRepository,
    JobGroupsService,
    JobGroupViewsService,
    JobGroupInvariantsService,
  ],
  exports: [JobGroupsService, JobGroupViewsService, JobGroupInvariantsService],
})
export class JobGroupsModule {}
