import { DomainError } from '../../common/errors/domain-error';
import { UUID_PATTERN } from '../../common/validation/params';
import { FINISHED_STATUSES, PENDING_STATUS, QUEUED_STATUSES, type SubmissionStatus } from '../lifecycle/vocabulary';
import { type JobRequestDto, MAX_EDGES_PER_REQUEST, MAX_PARENTS_PER_JOB, type NewJob } from './dto/job-spec';

/** A job already in the run that a request names as a parent, as read (locked) in the request's transaction. */
export interface ExistingParent {
  id: string;
  runId: string;
  status: SubmissionStatus;
}

/** Dependency edges of one request, child job id → parent job id (replicas expanded). */
export interface Edges {
  jobIds: string[];
  parentIds: string[];
}

const invalid = (i: number, job: JobRequestDto, message: string) => {
  const who = job.ref ?? job.name;
  const field = `jobs[${i}].depends_on`;
  return new DomainError('DEPENDENCY_INVALID', `jobs[${i}]${who ? ` (${who})` : ''} ${message}`, [{ field, message }]);
};

const FINISHED: readonly string[] = FINISHED_STATUSES;
const QUEUED: SubmissionStatus = QUEUED_STATUSES[0];

/**
 * The ids of existing jobs a request's `depends_on` names (every entry that is not a ref of the request), after
 * checking refs are unique and each entry is a ref or a job id at all. Pure: throws DEPENDENCY_INVALID naming the job.
 */
export function existingParentIds(requests: readonly JobRequestDto[]): string[] {
  const refs = new Map<string, number>();
  requests.forEach((job, i) => {
    if (job.ref === undefined) return;
    if (refs.has(job.ref)) throw invalid(i, job, `has ref ${job.ref}, already used by jobs[${refs.get(job.ref)}]`);
    refs.set(job.ref, i);
  });
  const ids = new Set<string>();
  requests.forEach((job, i) => {
    const parents = job.depends_on ?? [];
    if (parents.length > MAX_PARENTS_PER_JOB)
      throw invalid(i, job, `has ${parents.length} parents; at most ${MAX_PARENTS_PER_JOB}`);
    for (const p of parents) {
      if (refs.has(p)) continue;
      if (!UUID_PATTERN.test(p))
        throw invalid(i, job, `names unknown parent ${p} (neither a ref of this request nor a job id)`);
      ids.add(p.toLowerCase());
    }
  });
  return [...ids];
}

/**
 * Resolves a request's dependencies on its expanded jobs (`jobs`, in request order, `entryOf[k]` the request entry
 * of jobs[k]) in O(jobs + edges): checks every parent (known, not the job itself, in this run), refuses a cycle and
 * more than MAX_EDGES_PER_REQUEST edges, then sets each new job's start: `terminated`/`dependency_failed` when a parent
 * already ended other than `done` (or was itself ended so by this rule) and the job is not `always_run`; else
 * `pending` with its unfinished parents counted; else `submitted`. Returns the edges to insert.
 */
export function planDependencies(
  runId: string,
  requests: readonly JobRequestDto[],
  jobs: NewJob[],
  existing: ReadonlyMap<string, ExistingParent>,
): Edges {
  const refs = new Map<string, number>();
  requests.forEach((job, i) => job.ref !== undefined && refs.set(job.ref, i));
  const jobsOfEntry: NewJob[][] = requests.map(() => []);
  // expand() numbers entries consecutively from the first job's job_num, replicas sharing their entry's number.
  const first = jobs.length > 0 ? jobs[0].jobNum : 0;
  for (const j of jobs) jobsOfEntry[j.jobNum - first].push(j);
  // Entry-level graph: parents by entry index (in-request) and existing parent rows; edges counted on replicas.
  const inRequest: number[][] = requests.map(() => []);
  const outside: ExistingParent[][] = requests.map(() => []);
  let edges = 0;
  requests.forEach((job, i) => {
    const seen = new Set<string>();
    for (const p of job.depends_on ?? []) {
      const key = refs.has(p) ? p : p.toLowerCase();
      if (seen.has(key)) continue; // a repeated parent is one edge
      seen.add(key);
      const ref = refs.get(p);
      if (ref !== undefined) {
        if (ref === i) throw invalid(i, job, `depends on itself (ref ${p})`);
        inRequest[i].push(ref);
        edges += jobsOfEntry[i].length * jobsOfEntry[ref].length;
      } else {
        const parent = existing.get(key);
        if (!parent) throw invalid(i, job, `names unknown parent ${p}`);
        if (parent.runId !== runId) throw invalid(i, job, `names job ${p} of another run`);
        outside[i].push(parent);
        edges += jobsOfEntry[i].length;
      }
    }
    const parents = outside[i].length + inRequest[i].reduce((n, p) => n + jobsOfEntry[p].length, 0);
    if (parents > MAX_PARENTS_PER_JOB)
      throw invalid(i, job, `has ${parents} parents (replicas counted); at most ${MAX_PARENTS_PER_JOB}`);
    if (edges > MAX_EDGES_PER_REQUEST)
      throw invalid(i, job, `brings the request's edges over ${MAX_EDGES_PER_REQUEST.toLocaleString('en')}`);
  });
  const order = topologicalOrder(requests, inRequest);
  // Outcome per entry, in an order where parents come first.
  const doomed = new Array<boolean>(requests.length).fill(false);
  for (const i of order) {
    const job = requests[i];
    const failedParent =
      outside[i].some((p) => FINISHED.includes(p.status) && p.status !== 'done') || inRequest[i].some((p) => doomed[p]);
    doomed[i] = failedParent && !(job.always_run ?? false);
    const unfinished =
      outside[i].filter((p) => !FINISHED.includes(p.status)).length +
      inRequest[i].reduce((n, p) => n + (doomed[p] ? 0 : jobsOfEntry[p].length), 0);
    const total = outside[i].length + inRequest[i].reduce((n, p) => n + jobsOfEntry[p].length, 0);
    for (const j of jobsOfEntry[i]) {
      j.nParents = total;
      j.nPendingParents = unfinished;
      if (doomed[i]) {
        j.status = 'terminated';
        j.terminationReason = 'dependency_failed';
      } else {
        j.status = unfinished > 0 ? PENDING_STATUS : QUEUED;
      }
    }
  }
  const out: Edges = { jobIds: [], parentIds: [] };
  requests.forEach((_, i) => {
    const parentIds = [...outside[i].map((p) => p.id), ...inRequest[i].flatMap((p) => jobsOfEntry[p].map((x) => x.id))];
    for (const child of jobsOfEntry[i])
      for (const parentId of parentIds) {
        out.jobIds.push(child.id);
        out.parentIds.push(parentId);
      }
  });
  return out;
}

/** Kahn's algorithm over the request's entries; a cycle is refused naming one of its jobs. */
function topologicalOrder(requests: readonly JobRequestDto[], parents: number[][]): number[] {
  const children: number[][] = requests.map(() => []);
  const waiting = parents.map((ps) => ps.length);
  parents.forEach((ps, i) => ps.forEach((p) => children[p].push(i)));
  const order: number[] = [];
  for (let i = 0; i < requests.length; i++) if (waiting[i] === 0) order.push(i);
  for (let k = 0; k < order.length; k++) for (const c of children[order[k]]) if (--waiting[c] === 0) order.push(c);
  if (order.length < requests.length) {
    // Walk up unresolved parents from any unresolved entry: the first entry seen twice lies on a cycle.
    const seen = new Set<number>();
    let i = waiting.findIndex((w) => w > 0);
    while (!seen.has(i)) {
      seen.add(i);
      i = parents[i].find((p) => waiting[p] > 0) ?? i;
    }
    throw invalid(i, requests[i], 'is on a dependency cycle');
  }
  return order;
}
