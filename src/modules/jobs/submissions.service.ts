import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import type { SubmissionStatus } from './dto/job-spec';
import { Job } from './entities/job.entity';
import { JobSubmission } from './entities/job-submission.entity';
import { Candidate, Capacity, ClaimedRow, SubmissionsRepository } from './submissions.repository';

export type { Candidate, Capacity, ClaimedRow };

/** Submission transitions of the worker lifecycle; every method runs in the caller's transaction. */
@Injectable()
export class SubmissionsService {
  constructor(private readonly subs: SubmissionsRepository) {}

  lockCandidates(m: EntityManager, cap: Capacity, limit: number): Promise<Candidate[]> {
    return this.subs.lockCandidates(m, cap, limit);
  }

  markClaimed(m: EntityManager, ids: string[], workerId: string, leaseSeconds: number): Promise<ClaimedRow[]> {
    return this.subs.markClaimed(m, ids, workerId, leaseSeconds);
  }

  /** The submission and its job, both locked (in that order, as every lifecycle transaction does). */
  async lockWithJob(m: EntityManager, submissionId: string): Promise<{ submission: JobSubmission; job: Job } | null> {
    const submission = await this.subs.lockSubmission(m, submissionId);
    if (!submission) return null;
    const job = await this.subs.lockJob(m, submission.jobId);
    return job ? { submission, job } : null;
  }

  lockSubmission(m: EntityManager, submissionId: string): Promise<JobSubmission | null> {
    return this.subs.lockSubmission(m, submissionId);
  }

  start(m: EntityManager, s: JobSubmission, provisioningData: Record<string, unknown> | null, leaseSeconds: number): Promise<void> {
    return this.subs.setRunning(m, s.id, s.jobId, provisioningData, leaseSeconds);
  }

  heartbeat(m: EntityManager, s: JobSubmission, runtimeData: Record<string, unknown> | null, leaseSeconds: number): Promise<Date> {
    return this.subs.heartbeat(m, s.id, runtimeData, leaseSeconds);
  }

  finish(m: EntityManager, s: JobSubmission, status: SubmissionStatus, reason: string, exitStatus: number | null): Promise<void> {
    return this.subs.finishSubmission(m, s.id, status, reason, exitStatus);
  }

  finishJob(m: EntityManager, job: Job, status: SubmissionStatus, reason: string, counted: boolean): Promise<void> {
    return this.subs.finishJob(m, job.id, status, reason, counted);
  }

  /** Creates the next submission, then folds the no-capacity attempt before the failed one away (if it is one). */
  async retry(m: EntityManager, job: Job, failed: JobSubmission): Promise<{ id: string; submissionNum: number }> {
    const next = await this.subs.insertRetry(m, job, failed);
    await this.subs.foldSupersededNoCapacity(m, job.id, failed.submissionNum);
    return next;
  }

  terminateQueued(m: EntityManager, runId: string, groupIds: number[], status: SubmissionStatus, reason: string, limit: number): Promise<{ n: number; retries: number }> {
    return this.subs.terminateQueued(m, runId, groupIds, status, reason, limit);
  }

  lockLapsed(m: EntityManager, limit: number): Promise<JobSubmission[]> {
    return this.subs.lockLapsed(m, limit);
  }
}
