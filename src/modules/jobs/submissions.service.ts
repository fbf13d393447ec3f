import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import type { RequestedResources, SubmissionStatus } from './dto/job-spec';
import { JobSubmission } from './entities/job-submission.entity';
import {
  type Candidate,
  type Capacity,
  type ClaimedRow,
  SubmissionClaimsRepository,
} from './submission-claims.repository';
import { type HolderFacts, SubmissionLocksRepository } from './submission-locks.repository';
import type { JobFacts, SubmissionFacts } from './submission-rows';
import { type FinishedAttempt, type FinishingReport, SubmissionsRepository } from './submissions.repository';

export type { Candidate, Capacity, ClaimedRow, FinishingReport, HolderFacts, JobFacts, SubmissionFacts };

/** Submission transitions of the worker lifecycle; every method runs in the caller's transaction. */
@Injectable()
export class SubmissionsService {
  constructor(
    private readonly claims: SubmissionClaimsRepository,
    private readonly locks: SubmissionLocksRepository,
    private readonly subs: SubmissionsRepository,
  ) {}

  /**
   * Up to `limit` queued submissions that fit alone, best first, locked, skipping others' and `excluded`.
   * `containers`: the claimer has a container runtime (else jobs asking for an image are never candidates).
   */
  lockCandidates(
    m: EntityManager,
    cap: Capacity,
    limit: number,
    containers: boolean,
    excluded: string[],
  ): Promise<Candidate[]> {
    return this.claims.lockCandidates(m, cap, limit, containers, excluded);
  }

  /** The lease is held by `workerId` under the service account `userId`. */
  markClaimed(
    m: EntityManager,
    ids: string[],
    workerId: string,
    userId: string,
    leaseSeconds: number,
  ): Promise<ClaimedRow[]> {
    return this.claims.markClaimed(m, ids, workerId, userId, leaseSeconds);
  }

  /** The submission and its job, both locked (in that order, as every lifecycle transaction does). */
  lockWithJob(m: EntityManager, submissionId: string): Promise<{ submission: SubmissionFacts; job: JobFacts } | null> {
    return this.locks.lockWithJob(m, submissionId);
  }

  /** Many submissions with their jobs, locked in one round trip in submission id order (unknown ids left out). */
  lockWithJobs(
    m: EntityManager,
    submissionIds: string[],
  ): Promise<Map<string, { submission: SubmissionFacts; job: JobFacts }>> {
    return this.locks.lockWithJobs(m, submissionIds);
  }

  /** Starts attempts (rows locked): each lease's end and its job's requested resources, by submission id. */
  async startAll(
    m: EntityManager,
    items: readonly { id: string; jobId: string; provisioningData: Record<string, unknown> | null }[],
    leaseSeconds: number,
  ): Promise<Map<string, { leaseExpiresAt: Date; resources: RequestedResources }>> {
    const rows = await this.claims.setRunningAll(m, items, leaseSeconds);
    return new Map(rows.map((r) => [r.id, { leaseExpiresAt: r.leaseExpiresAt, resources: r.resources }]));
  }

  /** Heartbeats (rows locked): new leases and runtime data where sent; each lease's end by id. */
  heartbeatAll(
    m: EntityManager,
    items: readonly { id: string; runtimeData: Record<string, unknown> | null }[],
    leaseSeconds: number,
  ): Promise<Map<string, Date>> {
    return this.claims.heartbeatAll(m, items, leaseSeconds);
  }

  /** Final attempts (rows locked): submissions and their jobs finished, the jobs counted, in one statement. */
  finishAllWithJobs(m: EntityManager, items: readonly FinishedAttempt[]): Promise<void> {
    return this.subs.finishAllWithJobs(m, items);
  }

  /** Jobs a cancellation counted before their own outcome arrived. */
  markUncounted(m: EntityManager, jobIds: string[]): Promise<void> {
    return this.subs.markUncounted(m, jobIds);
  }

  /**
   * Submissions with their jobs locked in one round trip (id order), the final reports of `finishing` written in
   * the same statement where the holder, the status and the latest submission allow them; see
   * SubmissionsRepository.lockAndFinish (with `expected`, it refuses unless those reports finish as assumed).
   */
  lockAndFinish(
    m: EntityManager,
    submissionIds: string[],
    finishing: readonly FinishingReport[],
    expected: readonly { id: string; status: SubmissionStatus }[] = [],
  ): Promise<Map<string, { submission: SubmissionFacts; job: JobFacts; finished: boolean }>> {
    return this.subs.lockAndFinish(m, submissionIds, finishing, expected);
  }

  /** Who holds the submission and its status, unlocked (a claimed submission's holder never changes). */
  holderFacts(m: EntityManager, submissionId: string): Promise<HolderFacts | null> {
    return this.locks.holderFacts(m, submissionId);
  }

  lockSubmission(m: EntityManager, submissionId: string): Promise<SubmissionFacts | null> {
    return this.locks.lockSubmission(m, submissionId);
  }

  /** Many submissions, locked in id order (unknown ids left out). */
  lockSubmissions(m: EntityManager, submissionIds: string[]): Promise<SubmissionFacts[]> {
    return this.locks.lockSubmissions(m, submissionIds);
  }

  setRuntimeData(m: EntityManager, s: SubmissionFacts, runtimeData: Record<string, unknown>): Promise<void> {
    return this.claims.setRuntimeData(m, s.id, runtimeData);
  }

  /** Returns the new lease's end and the job's requested resources (key → quantity, as its spec says). */
  start(
    m: EntityManager,
    s: SubmissionFacts,
    provisioningData: Record<string, unknown> | null,
    leaseSeconds: number,
  ): Promise<{ leaseExpiresAt: Date; resources: RequestedResources }> {
    return this.claims.setRunning(m, s.id, s.jobId, provisioningData, leaseSeconds);
  }

  heartbeat(
    m: EntityManager,
    s: SubmissionFacts,
    runtimeData: Record<string, unknown> | null,
    leaseSeconds: number,
  ): Promise<Date> {
    return this.claims.heartbeat(m, s.id, runtimeData, leaseSeconds);
  }

  finish(
    m: EntityManager,
    s: SubmissionFacts,
    status: SubmissionStatus,
    reason: string,
    exitStatus: number | null,
  ): Promise<void> {
    return this.subs.finishSubmission(m, s.id, status, reason, exitStatus);
  }

  finishJob(
    m: EntityManager,
    job: JobFacts,
    status: SubmissionStatus,
    reason: string,
    counted: boolean,
  ): Promise<void> {
    return this.subs.finishJob(m, job.id, status, reason, counted);
  }

  /** Creates the next submission, then folds the no-capacity attempt before the failed one away (if it is one). */
  async retry(
    m: EntityManager,
    job: JobFacts,
    failed: SubmissionFacts,
  ): Promise<{ id: string; submissionNum: number }> {
    const next = await this.subs.insertRetry(m, job, failed);
    await this.subs.foldSupersededNoCapacity(m, job.id, failed.submissionNum);
    return next;
  }

  terminateQueued(
    m: EntityManager,
    runId: string,
    groupIds: number[],
    status: SubmissionStatus,
    reason: string,
    limit: number,
    spareAlwaysRun: boolean,
    keep: string[] = [],
  ): Promise<{ n: number; retries: number; jobIds: string[] }> {
    return this.subs.terminateQueued(m, runId, groupIds, status, reason, limit, spareAlwaysRun, keep);
  }

  /** These queued submissions (locked by the caller) end without a worker; returns the jobs that ended with them. */
  terminateQueuedIds(
    m: EntityManager,
    ids: string[],
    status: SubmissionStatus,
    reason: string,
  ): Promise<{ n: number; retries: number; jobIds: string[] }> {
    return this.subs.terminateQueuedIds(m, ids, status, reason);
  }

  alwaysRunJobs(m: EntityManager, jobIds: string[]): Promise<Set<string>> {
    return this.locks.alwaysRunJobs(m, jobIds);
  }

  lockOverdue(m: EntityManager, limit: number): Promise<JobSubmission[]> {
    return this.locks.lockOverdue(m, limit);
  }

  lockLapsed(m: EntityManager, limit: number): Promise<JobSubmission[]> {
    return this.locks.lockLapsed(m, limit);
  }
}
