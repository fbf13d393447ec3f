import { Injectable, OnModuleInit } from '@nestjs/common';
import { InvariantsRegistry } from '../../infra/invariants/invariants.registry';
import { JobGroupInvariantsService } from '../job-groups/job-group-invariants.service';
import { JobsService } from '../jobs/jobs.service';
import { RunStatusService } from '../runs/run-status.service';

/**
 * The invariants the state machine keeps between modules: every group's counters equal the outcomes of the jobs
 * of its subtree (invariant 1), and every run's active counts and status are what its jobs and counters derive
 * (invariant 6). The jobs module hands the tallies; the job-groups and runs modules compare their own rows.
 */
@Injectable()
export class LifecycleInvariants implements OnModuleInit {
  constructor(
    private readonly jobs: JobsService,
    private readonly groups: JobGroupInvariantsService,
    private readonly runStatus: RunStatusService,
    private readonly registry: InvariantsRegistry,
  ) {}

  onModuleInit(): void {
    this.registry.register({
      name: 'group_counters',
      check: async () => this.groups.counterMismatches(await this.jobs.outcomeCounts()),
    });
    this.registry.register({
      name: 'run_status',
      check: async () => this.runStatus.runMismatches(await this.jobs.activeCounts()),
    });
  }
}
