import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { JobGroup } from './entities/job-group.entity';
import { JobGroupCancellation } from './entities/job-group-cancellation.entity';
import { JobGroupCounters } from './entities/job-group-counters.entity';
import { JobGroupSelfAndAncestor } from './entities/job-group-self-and-ancestor.entity';
import { JobGroupsRepository } from './job-groups.repository';
import { JobGroupsService } from './job-groups.service';

/** The job-group tree, its counters and cancellations. Its HTTP routes live with the run routes (RunsModule). */
@Module({
  imports: [TypeOrmModule.forFeature([JobGroup, JobGroupSelfAndAncestor, JobGroupCancellation, JobGroupCounters])],
  providers: [JobGroupsRepository, JobGroupsService],
  exports: [JobGroupsService],
})
export class JobGroupsModule {}
