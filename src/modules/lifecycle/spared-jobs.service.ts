import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { JobGroupViewsService } from '../job-groups/job-group-views.service';
import { SubmissionsService } from '../jobs/submissions.service';
import { stopsAlwaysRun } from './outcomes';

/** Which jobs below a cancellation go on anyway (claims hand them out, heartbeats do not stop them). */
@Injectable()
export class SparedJobs {
  constructor(
    private readonly subs: SubmissionsService,
    private readonly groups: JobGroupViewsService,
  ) {}

  /**
   * Of submissions below a cancellation, the jobs that go on anyway: always_run jobs, unless an abort is among the
   * cancellations over them. Reads nothing when none is below a cancellation (the usual case).
   */
  async of(
    m: EntityManager,
    under: readonly { runId: string; jobGroupId: number; jobId: string }[],
  ): Promise<Set<string>> {
    const alwaysRun = await this.subs.alwaysRunJobs(
      m,
      under.map((s) => s.jobId),
    );
    const out = new Set<string>();
    const aborted = new Map<string, boolean>();
    for (const s of under) {
      if (!alwaysRun.has(s.jobId)) continue;
      const key = `${s.runId}/${s.jobGroupId}`;
      let abort = aborted.get(key);
      if (abort === undefined) {
        abort = (await this.groups.chainCancellations(s.runId, s.jobGroupId, m)).some(stopsAlwaysRun);
        aborted.set(key, abort);
      }
      if (!abort) out.add(s.jobId);
    }
    return out;
  }
}
