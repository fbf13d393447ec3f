import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { JobGroup } from './entities/job-group.entity';
import { JobGroupCancellation } from './entities/job-group-cancellation.entity';
import { JobGroupCounters } from './entities/job-group-counters.entity';
import { JobGroupSelfAndAncestor } from './entities/job-group-self-and-ancestor.entity';
import { JobGroupCounterReadsRepository } from './job-group-counter-reads.repository';
import { JobGroupCounterDeltasRepository } from './job-group-counter-deltas.repository';
import { JobGroupCountersRepository } from './job-group-counters.repository';
import { JobGroupInvariantsService } from './job-group-invariants.service';
import { JobGroupViewsService } from './job-group-views.service';
import { JobGroupsRepository } from './job-groups.repository';
import { JobGroupsService } from './job-groups.service';
import { GroupCountingService } from './group-counting.service';

/**
 * The job-group tree (JobGroupsService), the counting of outcomes into its counters (GroupCountingService), its
 * cancellations and views. Its HTTP routes live in JobGroupsApiModule.
 */
@Module({
  imports: [TypeOrmModule.forFeature([JobGroup, JobGroupSelfAndAncestor, JobGroupCancellation, JobGroupCounters])],
  providers: [
    JobGroupsRepository,
    JobGroupCountersRepository,
    JobGroupCounterDeltasRepository,
    JobGroupCounterReadsRepository,
    JobGroupsService,
    GroupCountingService,
    JobGroupViewsService,
    JobGroupInvariantsService,
  ],
  exports: [JobGroupsService, GroupCountingService, JobGroupViewsService, JobGroupInvariantsService],
})
export class JobGroupsModule {}
