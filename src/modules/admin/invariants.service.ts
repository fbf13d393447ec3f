import { Injectable } from '@nestjs/common';
import { ApiProperty } from '@nestjs/swagger';
import { BillingService } from '../billing/billing.service';
import { JobGroupsService } from '../job-groups/job-groups.service';
import { JobsService } from '../jobs/jobs.service';
import { RunsService } from '../runs/runs.service';

export class InvariantMismatch {
  @ApiProperty()
  invariant!: string;

  @ApiProperty()
  detail!: string;
}

export class InvariantsReport {
  @ApiProperty({ format: 'date-time' })
  checked_at!: string;

  @ApiProperty({ description: 'No mismatch.' })
  ok!: boolean;

  @ApiProperty({ type: () => InvariantMismatch, isArray: true, maxItems: 1000 })
  mismatches!: InvariantMismatch[];
}

const MAX_REPORTED = 1000;

/** Each module checks its own rows against the facts other modules hand it; this only collects the answers. */
@Injectable()
export class InvariantsService {
  constructor(
    private readonly jobs: JobsService,
    private readonly groups: JobGroupsService,
    private readonly runs: RunsService,
    private readonly billing: BillingService,
  ) {}

  async check(): Promise<InvariantsReport> {
    const checkedAt = new Date().toISOString();
    const [outcomes, active, facts] = await Promise.all([
      this.jobs.outcomeCounts(),
      this.jobs.activeCounts(),
      this.jobs.jobFactMismatches(MAX_REPORTED),
    ]);
    const counters = await this.groups.counterMismatches(outcomes);
    const runs = await this.runs.runMismatches(active);
    const usage = await this.billing.usageMismatches(MAX_REPORTED);
    const mismatches = [
      ...counters.map((detail) => ({ invariant: 'group_counters', detail })),
      ...facts.map((f) => ({ invariant: 'job_facts', detail: `job ${f.jobId}: ${f.problem}` })),
      ...runs.map((detail) => ({ invariant: 'run_status', detail })),
      ...usage.map((detail) => ({ invariant: 'billing_usage', detail })),
    ].slice(0, MAX_REPORTED);
    return { checked_at: checkedAt, ok: mismatches.length === 0, mismatches };
  }
}
