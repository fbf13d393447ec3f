import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { SubmissionsService } from '../jobs/submissions.service';
import { type Cancellation, stoppingCancellation } from './outcomes';

/** Which jobs below a cancellation go on anyway (claims hand them out, heartbeats do not stop them), and which stop. */
@Injectable()
export class SparedJobs {
  constructor(private readonly subs: SubmissionsService) {}

  /**
   * For jobs whose group may lie below a cancellation (`cancellations`: per run, the earliest over each group with
   * the abort over it, as JobGroupViewsService.effectiveCancellations gives them), the cancellation that stops each,
   * by job id: always_run jobs only an abort stops, the others any. Jobs below none, and the always_run jobs no abort
   * is over (spared), are left out. Reads nothing when none is below a cancellation (the usual case).
   */
  async stopping(
    m: EntityManager,
    jobs: readonly { runId: string; jobGroupId: number; jobId: string }[],
    cancellations: ReadonlyMap<string, ReadonlyMap<number, Cancellation>>,
  ): Promise<Map<string, Cancellation>> {
    const under = jobs.filter((j) => cancellations.get(j.runId)?.has(j.jobGroupId));
    const alwaysRun = await this.subs.alwaysRunJobs(
      m,
      under.map((j) => j.jobId),
    );
    const out = new Map<string, Cancellation>();
    for (const j of under) {
      const c = stoppingCancellation(cancellations.get(j.runId)?.get(j.jobGroupId), alwaysRun.has(j.jobId));
      if (c) out.set(j.jobId, c);
    }
    return out;
  }
}
