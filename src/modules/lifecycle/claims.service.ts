import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { Env } from '../../config/env';
import type { Principal } from '../../common/auth/principal';
import { required } from '../../common/required';
import { TransactionRunner } from '../../infra/database/transaction.runner';
import { JobGroupViewsService } from '../job-groups/job-group-views.service';
import { type Capacity, type Candidate, SubmissionsService } from '../jobs/submissions.service';
import { RunAccessService } from '../runs/run-access.service';
import { RunStatusService } from '../runs/run-status.service';
import { DependencyRelease } from './dependency-release.service';
import { LifecycleEvents } from './lifecycle-events.service';
import type { ClaimInput, ClaimedSubmission } from './lifecycle.types';
import { type ActiveDelta, activeDelta, addDelta, type Cancellation, cancelledJobOutcome } from './outcomes';
import { SparedJobs } from './spared-jobs.service';

/**
 * How many times a claim locks more of the queue when what it locked did not all fit together or was below a
 * cancellation. Each read leaves out what this claim has seen.
 */
const CLAIM_READS = 10;
/** The most candidates one read of a claim locks (a read past a cancelled subtree's queued jobs grows to this). */
const MAX_READ = 200;

/** Capacity left, cpu in thousandths of a core (the column's scale): floats would make 0.3 − 0.1 − 0.1 < 0.1. */
interface Room {
  milliCpu: number;
  memoryMib: number;
  gpu: number;
}

const fits = (room: Room, c: Candidate) =>
  Math.round(c.cpu * 1000) <= room.milliCpu && c.memoryMib <= room.memoryMib && c.gpu <= room.gpu;

function take(room: Room, c: Candidate): void {
  room.milliCpu -= Math.round(c.cpu * 1000);
  room.memoryMib -= c.memoryMib;
  room.gpu -= c.gpu;
}

/** A queued submission below a cancellation that does not spare it: the claim ends it instead of handing it out. */
interface Doomed {
  candidate: Candidate;
  cancellation: Cancellation;
}

/** The claim: queued submissions handed out to a worker, best first, packed into its capacity. */
@Injectable()
export class ClaimsService {
  constructor(
    private readonly tx: TransactionRunner,
    private readonly subs: SubmissionsService,
    private readonly groups: JobGroupViewsService,
    private readonly runStatus: RunStatusService,
    private readonly runAccess: RunAccessService,
    private readonly env: Env,
    private readonly events: LifecycleEvents,
    private readonly dependents: DependencyRelease,
    private readonly spares: SparedJobs,
  ) {}

  /** Hands out queued submissions that fit the capacity, best first; concurrent claimers never share one. */
  async claim(principal: Principal, body: ClaimInput): Promise<{ submissions: ClaimedSubmission[] }> {
    const limit = body.limit ?? 1;
    const cap = { cpu: body.capacity.cpu, memoryMib: body.capacity.memory_mib, gpu: body.capacity.gpu ?? 0 };
    const containers = body.capabilities?.container_runtime !== undefined;
    const { claimed, runNames } = await this.tx.run(async (m) => {
      const { picked, doomed } = await this.pick(m, cap, limit, containers);
      const deltas = new Map<string, ActiveDelta>();
      const bump = (runId: string, d: ActiveDelta) => deltas.set(runId, addDelta(deltas.get(runId) ?? {}, d));
      // Queued under a cancelled group: ended here rather than handed out (the sweep would, later), one statement for
      // each run and outcome. (A cancellation that came between two reads of the queue may cover a submission this
      // claim already took: that one is handed out, its heartbeat will ask to stop it.)
      const ends = new Map<
        string,
        { runId: string; status: 'terminated' | 'aborted'; reason: string; ids: string[] }
      >();
      for (const { candidate: c, cancellation } of doomed) {
        const outcome = cancelledJobOutcome(cancellation);
        const key = `${c.runId}/${outcome.status}/${outcome.terminationReason}`;
        const end = ends.get(key) ?? {
          runId: c.runId,
          status: outcome.status,
          reason: outcome.terminationReason,
          ids: [],
        };
        end.ids.push(c.id);
        ends.set(key, end);
      }
      for (const end of [...ends.values()].sort((a, b) => (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0))) {
        const done = await this.subs.terminateQueuedIds(m, end.ids, end.status, end.reason);
        if (done.retries > 0) bump(end.runId, { nRetrying: -done.retries });
        const cascade = await this.dependents.afterFinal(
          m,
          end.runId,
          done.jobIds.map((jobId) => ({ jobId, status: end.status })),
        );
        bump(end.runId, cascade.pending);
      }
      for (const c of picked)
        bump(c.runId, addDelta({ nProvisioning: 1 }, activeDelta('submitted', -1, c.submissionNum)));
      const rows = await this.subs.markClaimed(
        m,
        picked.map((p) => p.id),
        body.worker_id,
        principal.userId,
        this.env.RUNPLANE_LEASE_SECONDS,
      );
      for (const runId of [...deltas.keys()].sort()) {
        await this.runStatus.moveActive(
          m,
          runId,
          required(deltas.get(runId), `the active-count delta of run ${runId}`),
        );
      }
      await this.events.jobs(m, rows, 'provisioning');
      const names =
        rows.length > 0
          ? await this.runAccess.runNames(
              m,
              rows.map((r) => r.runId),
            )
          : new Map<string, string>();
      return { claimed: rows, runNames: names };
    });
    return {
      submissions: claimed.map((r) => ({
        id: r.id,
        job_id: r.jobId,
        run_id: r.runId,
        job_group_id: r.jobGroupId,
        job_num: r.jobNum,
        replica_num: r.replicaNum,
        job_name: r.jobName,
        run_name: runNames.get(r.runId) ?? '',
        submission_num: r.submissionNum,
        spec: r.spec,
        lease_expires_at: new Date(r.leaseExpiresAt).toISOString(),
      })),
    };
  }

  /**
   * What the claim takes. It locks the best queued candidates that fit its capacity each alone, as many as it may
   * still take, skipping those other claims hold (SKIP LOCKED, never waiting): concurrent claimers take disjoint
   * rows and none comes back empty while fitting work waits. It packs them in order into what is left of its
   * capacity; where some did not fit together, or lie below a cancellation that does not spare them (`doomed`: the
   * claim ends them), it locks more, leaving out what it has seen, up to CLAIM_READS times. Candidates seen and not
   * taken stay locked until the claim commits (milliseconds): at most `limit` a read.
   */
  private async pick(
    m: EntityManager,
    cap: Capacity,
    limit: number,
    containers: boolean,
  ): Promise<{ picked: Candidate[]; doomed: Doomed[] }> {
    const left: Room = { milliCpu: Math.round(cap.cpu * 1000), memoryMib: cap.memoryMib, gpu: cap.gpu };
    const picked: Candidate[] = [];
    const doomed: Doomed[] = [];
    const seen: string[] = [];
    for (let read = 0, size = limit; read < CLAIM_READS && picked.length < limit; read++) {
      const candidates = await this.subs.lockCandidates(m, cap, size, containers, seen);
      if (candidates.length === 0) break;
      const before = doomed.length;
      const cancellations = await this.groups.effectiveCancellations([...new Set(candidates.map((c) => c.runId))], m);
      const stopping = await this.spares.stopping(m, candidates, cancellations);
      for (const c of candidates) {
        seen.push(c.id);
        const cancellation = stopping.get(c.jobId);
        if (cancellation) doomed.push({ candidate: c, cancellation });
        else if (picked.length < limit && fits(left, c)) {
          picked.push(c);
          take(left, c);
        }
      }
      // Past a cancelled subtree's queued jobs (the sweep ends them in the background), read further, and more each
      // time: this claim ends those it meets, and finds the fitting work queued behind them.
      const wasDoomed = doomed.length - before;
      size = wasDoomed > 0 ? Math.min(MAX_READ, limit - picked.length + 2 * wasDoomed) : limit - picked.length;
    }
    return { picked, doomed };
  }
}
