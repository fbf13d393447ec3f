import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { preparedQuery } from '../../infra/database/prepared';
import type { JobSpec, RequestedResources } from './dto/job-spec';
import { QUEUED_NO_CONTAINER_PREDICATE, QUEUED_PREDICATE } from './entities/job-submission.entity';
import { CLAIMED, STARTED } from './submission-rows';

export interface Capacity {
  cpu: number;
  memoryMib: number;
  gpu: number;
}

export interface Candidate {
  id: string;
  jobId: string;
  runId: string;
  jobGroupId: number;
  submissionNum: number;
  cpu: number;
  memoryMib: number;
  gpu: number;
}

export interface ClaimedRow {
  id: string;
  jobId: string;
  runId: string;
  jobGroupId: number;
  submissionNum: number;
  leaseExpiresAt: Date;
  spec: JobSpec;
  jobNum: number;
  replicaNum: number;
  jobName: string;
}

/** The queue and the lease: picking and claiming queued submissions, starting them, renewing their leases. */
@Injectable()
export class SubmissionClaimsRepository {
  /**
   * Up to `limit` queued submissions that fit the capacity each alone, best first, locked, skipping those another
   * claim holds (never waiting) and `excluded` (those this claim has looked at already): concurrent claimers take
   * disjoint rows, and a claim locks no more than it can take. A claimer without a container runtime never gets a
   * job that asks for an image: it walks the queue index of submissions that need none (the predicate is a
   * constant, so the planner proves the partial index), and so never reads past image jobs waiting for container
   * workers.
   */
  async lockCandidates(
    m: EntityManager,
    cap: Capacity,
    limit: number,
    containers: boolean,
    excluded: string[],
  ): Promise<Candidate[]> {
    const queue = containers ? QUEUED_PREDICATE : QUEUED_NO_CONTAINER_PREDICATE;
    return preparedQuery<Candidate>(
      m,
      containers ? 'lifecycle_lock_candidates' : 'lifecycle_lock_candidates_no_container',
      `SELECT s.id, s.job_id AS "jobId", s.run_id AS "runId", s.job_group_id AS "jobGroupId",
              s.submission_num AS "submissionNum", s.cpu::float8 AS cpu, s.memory_mib AS "memoryMib", s.gpu
         FROM job_submissions s
        WHERE s.${queue} AND s.cpu <= $1 AND s.memory_mib <= $2 AND s.gpu <= $3 AND NOT s.id = ANY($5::uuid[])
        ORDER BY s.priority DESC, s.submitted_at, s.id
        LIMIT $4
          FOR UPDATE SKIP LOCKED`,
      [cap.cpu, cap.memoryMib, cap.gpu, limit, excluded],
    );
  }

  /** The lease goes to `workerId` under the service account `userId`: reports must come from both. */
  async markClaimed(
    m: EntityManager,
    ids: string[],
    workerId: string,
    userId: string,
    leaseSeconds: number,
  ): Promise<ClaimedRow[]> {
    if (ids.length === 0) return [];
    return preparedQuery<ClaimedRow>(
      m,
      'lifecycle_mark_claimed',
      `WITH claimed AS (
         UPDATE job_submissions
            SET status = $5, worker_id = $2, claimed_by_user_id = $4, claimed_at = now(),
                lease_expires_at = now() + make_interval(secs => $3)
          WHERE id = ANY($1::uuid[])
      RETURNING id, job_id, run_id, job_group_id, submission_num, lease_expires_at
       ), jobs_updated AS (
         UPDATE jobs j SET status = $5 FROM claimed c WHERE j.id = c.job_id
      RETURNING j.id, j.spec, j.job_num, j.replica_num, j.job_name
       )
       SELECT c.id, c.job_id AS "jobId", c.run_id AS "runId", c.job_group_id AS "jobGroupId",
              c.submission_num AS "submissionNum", c.lease_expires_at AS "leaseExpiresAt", u.spec,
              u.job_num AS "jobNum", u.replica_num AS "replicaNum", u.job_name AS "jobName"
         FROM claimed c JOIN jobs_updated u ON u.id = c.job_id`,
      [ids, workerId, leaseSeconds, userId, CLAIMED],
    );
  }

  /** What the worker measured of a finished attempt (exit status, times, memory), stored as sent. */
  async setRuntimeData(m: EntityManager, id: string, runtimeData: Record<string, unknown>): Promise<void> {
    await m.query(`UPDATE job_submissions SET runtime_data = $2::json WHERE id = $1`, [
      id,
      JSON.stringify(runtimeData),
    ]);
  }

  /**
   * Starts attempts, set-based: each submission and its job `running`, a fresh lease, its provisioning data where
   * given and its deadline from the job's max_duration_s (rows already locked). Returns each lease's end and the
   * job spec's requested resources (what billing pins), read by the same statement.
   */
  async setRunningAll(
    m: EntityManager,
    items: readonly { id: string; jobId: string; provisioningData: Record<string, unknown> | null }[],
    leaseSeconds: number,
  ): Promise<{ id: string; leaseExpiresAt: Date; resources: RequestedResources }[]> {
    if (items.length === 0) return [];
    return preparedQuery(
      m,
      'lifecycle_set_running_all',
      `WITH v AS (
         SELECT v.id, v.job_id, v.provisioning_data, j.spec
           FROM unnest($1::uuid[], $2::uuid[], $3::text[]) AS v(id, job_id, provisioning_data)
           JOIN jobs j ON j.id = v.job_id
       ), started AS (
         UPDATE job_submissions s SET status = $5, started_at = now(), last_heartbeat_at = now(),
                lease_expires_at = now() + make_interval(secs => $4),
                provisioning_data = coalesce(v.provisioning_data::json, s.provisioning_data),
                deadline_at = now() + make_interval(secs => (v.spec->>'max_duration_s')::float8)
           FROM v WHERE s.id = v.id
      RETURNING s.id, s.lease_expires_at
       ), jobs_started AS (
         UPDATE jobs j SET status = $5 FROM v WHERE j.id = v.job_id
       )
       SELECT st.id, st.lease_expires_at AS "leaseExpiresAt", v.spec->'resources' AS resources
         FROM started st JOIN v ON v.id = st.id`,
      [
        items.map((i) => i.id),
        items.map((i) => i.jobId),
        items.map((i) => (i.provisioningData === null ? null : JSON.stringify(i.provisioningData))),
        leaseSeconds,
        STARTED,
      ],
    );
  }

  /**
   * Heartbeats, set-based: each held submission gets a new lease and its `runtime_data` where given (rows already
   * locked). Returns each new lease's end.
   */
  async heartbeatAll(
    m: EntityManager,
    items: readonly { id: string; runtimeData: Record<string, unknown> | null }[],
    leaseSeconds: number,
  ): Promise<Map<string, Date>> {
    if (items.length === 0) return new Map();
    const rows = await preparedQuery<{ id: string; leaseExpiresAt: Date }>(
      m,
      'lifecycle_heartbeat_all',
      `UPDATE job_submissions s SET last_heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => $3),
              runtime_data = coalesce(v.runtime_data::json, s.runtime_data)
         FROM unnest($1::uuid[], $2::text[]) AS v(id, runtime_data)
        WHERE s.id = v.id
       RETURNING s.id, s.lease_expires_at AS "leaseExpiresAt"`,
      [
        items.map((i) => i.id),
        items.map((i) => (i.runtimeData === null ? null : JSON.stringify(i.runtimeData))),
        leaseSeconds,
      ],
    );
    return new Map(rows.map((r) => [r.id, r.leaseExpiresAt]));
  }

  /**
   * Starts the attempt: submission and job `running`, a fresh lease. Returns the lease's end and the job spec's
   * requested resources (what billing pins), read by the same statement.
   */
  async setRunning(
    m: EntityManager,
    id: string,
    jobId: string,
    provisioningData: Record<string, unknown> | null,
    leaseSeconds: number,
  ): Promise<{ leaseExpiresAt: Date; resources: RequestedResources }> {
    const [row] = await preparedQuery<{ leaseExpiresAt: Date; resources: RequestedResources }>(
      m,
      'lifecycle_set_running',
      `WITH started AS (
         UPDATE job_submissions SET status = $5, started_at = now(), last_heartbeat_at = now(),
                lease_expires_at = now() + make_interval(secs => $4),
                provisioning_data = coalesce($3::json, provisioning_data),
                deadline_at = now() +
                  make_interval(secs => (SELECT (spec->>'max_duration_s')::float8 FROM jobs WHERE id = $2))
          WHERE id = $1
      RETURNING lease_expires_at
       )
       UPDATE jobs SET status = $5 FROM started WHERE jobs.id = $2
       RETURNING started.lease_expires_at AS "leaseExpiresAt", jobs.spec->'resources' AS resources`,
      [id, jobId, provisioningData === null ? null : JSON.stringify(provisioningData), leaseSeconds, STARTED],
    );
    return row;
  }

  async heartbeat(
    m: EntityManager,
    id: string,
    runtimeData: Record<string, unknown> | null,
    leaseSeconds: number,
  ): Promise<Date> {
    const [row] = await preparedQuery<{ leaseExpiresAt: Date }>(
      m,
      'lifecycle_heartbeat',
      `UPDATE job_submissions SET last_heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => $3),
              runtime_data = coalesce($2::json, runtime_data)
        WHERE id = $1 RETURNING lease_expires_at AS "leaseExpiresAt"`,
      [id, runtimeData === null ? null : JSON.stringify(runtimeData), leaseSeconds],
    );
    return row.leaseExpiresAt;
  }
}
