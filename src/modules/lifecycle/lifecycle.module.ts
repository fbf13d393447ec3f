import { Module } from '@nestjs/common';
import { BillingModule } from '../billing/billing.module';
import { JobGroupsModule } from '../job-groups/job-groups.module';
import { JobsModule } from '../jobs/jobs.module';
import { RunsModule } from '../runs/runs.module';
import { EventsModule } from '../events/events.module';
import { ClaimsService } from './claims.service';
import { DependencyRelease } from './dependency-release.service';
import { HeartbeatsService } from './heartbeats.service';
import { ReportApplier } from './report-applier.service';
import { JobFinisher } from './job-finisher.service';
import { LifecycleEvents } from './lifecycle-events.service';
import { LifecycleInvariants } from './lifecycle-invariants.service';
import { ServerTransitionsService } from './server-transitions.service';
import { SparedJobs } from './spared-jobs.service';
import { WorkerReportsService } from './worker-reports.service';

/**
 * The job/submission state machine: its vocabulary (vocabulary.ts), arithmetic (outcomes.ts), lock order
 * (lock-order.ts), and every transition of a submission after it is queued — the worker's reports and the
 * server's own (lapsed leases, time limits, sweeps below cancellations). It drives the jobs, job-groups, runs and
 * billing modules through their services, in one transaction per transition.
 */
@Module({
  imports: [JobsModule, JobGroupsModule, RunsModule, BillingModule, EventsModule],
  providers: [
    DependencyRelease,
    ClaimsService,
    SparedJobs,
    WorkerReportsService,
    ReportApplier,
    HeartbeatsService,
    ServerTransitionsService,
    JobFinisher,
    LifecycleInvariants,
    LifecycleEvents,
  ],
  exports: [ClaimsService, WorkerReportsService, HeartbeatsService, ServerTransitionsService],
})
export class LifecycleModule {}
