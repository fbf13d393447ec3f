import type { Schemas } from '../client';
import { required } from '../common/required';

/**
 * A run file's meaning: the checks a schema cannot make, and the API request it becomes. Group names become the
 * request's group `ref`s (and the groups' `name` attribute, which `runplane groups` shows); job names become the
 * jobs' `name`s, and for jobs some `depends_on` names, their `ref`s.
 */

/** A semantic error: where (a path into the file; `atKey` for the key itself) and what. */
export interface Located {
  path: (string | number)[];
  atKey?: boolean;
  message: string;
}

/** A job of the API's run submission, with the dependency fields of the DAG contract (`ref`, `depends_on`). */
export type JobBody = Schemas['JobRequestDto'] & { ref?: string; depends_on?: string[] };
export type RunBody = Omit<Schemas['SubmitRunDto'], 'jobs'> & { jobs: JobBody[] };

/** What `apply` shows before sending: each job entry with its group's path. */
export interface PlannedJob {
  name: string;
  group: string;
  body: JobBody;
}
export interface BuiltRun {
  body: RunBody;
  jobs: PlannedJob[];
  groups: { name: string; path: string; depth: number }[];
}

/** The deepest a group may sit below the run (the API's limit). */
const MAX_DEPTH = 5;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

interface Visit {
  path: (string | number)[];
  node: Obj;
  depth: number;
}

/** Every job and group of the file, each with its path, in document order (defensive: the file may be invalid). */
function walk(root: unknown): { jobs: (Visit & { groupPath: string; groupRef?: string })[]; groups: Visit[] } {
  const jobs: (Visit & { groupPath: string; groupRef?: string })[] = [];
  const groups: Visit[] = [];
  const visit = (node: Obj, path: (string | number)[], depth: number, groupPath: string, groupRef?: string) => {
    for (const key of Object.keys(node)) {
      if (key === 'jobs')
        list(node.jobs).forEach((j, i) => {
          if (isObj(j)) jobs.push({ path: [...path, 'jobs', i], node: j, depth, groupPath, groupRef });
        });
      if (key === 'groups')
        list(node.groups).forEach((g, i) => {
          if (!isObj(g)) return;
          const p = [...path, 'groups', i];
          groups.push({ path: p, node: g, depth: depth + 1 });
          const name = typeof g.name === 'string' ? g.name : `#${i}`;
          visit(g, p, depth + 1, groupPath ? `${groupPath}/${name}` : name, typeof g.name === 'string' ? g.name : '');
        });
    }
  };
  if (isObj(root)) visit(root, [], 0, '');
  return { jobs, groups };
}

export function semanticErrors(root: unknown): Located[] {
  if (!isObj(root)) return [];
  const errors: Located[] = [];
  const { jobs, groups } = walk(root);
  if (jobs.length === 0)
    errors.push({ path: [], message: 'the run has no jobs: add a jobs list (at the top or in a group)' });

  const firstAt = new Map<string, Visit>();
  for (const j of jobs) {
    const name = j.node.name;
    if (typeof name !== 'string') continue;
    const first = firstAt.get(name);
    if (first)
      errors.push({
        path: [...j.path, 'name'],
        message: `job name "${name}" is used twice (also at ${pathText(first.path)})`,
      });
    else firstAt.set(name, j);
  }
  const groupAt = new Map<string, Visit>();
  for (const g of groups) {
    const name = g.node.name;
    if (g.depth > MAX_DEPTH && g.depth === MAX_DEPTH + 1)
      errors.push({ path: g.path, message: `groups nest at most ${MAX_DEPTH} deep below the run` });
    if (typeof name !== 'string') continue;
    const first = groupAt.get(name);
    if (first)
      errors.push({
        path: [...g.path, 'name'],
        message: `group name "${name}" is used twice (also at ${pathText(first.path)})`,
      });
    else groupAt.set(name, g);
  }

  const defaults = isObj(root.resources) ? root.resources : {};
  for (const j of jobs) {
    const res = { ...defaults, ...(isObj(j.node.resources) ? j.node.resources : {}) };
    for (const key of ['cpu', 'memory'])
      if (res[key] === undefined)
        errors.push({
          path: j.path,
          message: `no ${key}: set resources.${key} on the job, or at the top of the file for every job`,
        });
    list(j.node.depends_on).forEach((parent, i) => {
      if (typeof parent !== 'string') return;
      if (parent === j.node.name)
        errors.push({ path: [...j.path, 'depends_on', i], message: 'a job cannot depend on itself' });
      else if (!firstAt.has(parent))
        errors.push({ path: [...j.path, 'depends_on', i], message: `no job named "${parent}" in the file` });
    });
  }
  const cycle = findCycle(jobs);
  if (cycle)
    errors.push({
      path: [...required(firstAt.get(cycle[0]), 'the first job of the cycle').path, 'depends_on'],
      message: `jobs depend on each other in a cycle: ${cycle.join(' → ')}`,
    });
  return errors;
}

const pathText = (p: (string | number)[]) =>
  p.map((s, i) => (typeof s === 'number' ? `[${s}]` : i === 0 ? s : `.${s}`)).join('');

/** One dependency cycle among named jobs (as names, the first repeated at the end), or undefined. */
function findCycle(jobs: { node: Obj }[]): string[] | undefined {
  const edges = new Map<string, string[]>();
  for (const j of jobs)
    if (typeof j.node.name === 'string' && !edges.has(j.node.name))
      edges.set(
        j.node.name,
        list(j.node.depends_on).filter((p): p is string => typeof p === 'string' && p !== j.node.name),
      );
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const dfs = (n: string): string[] | undefined => {
    state.set(n, 'open');
    stack.push(n);
    for (const p of edges.get(n) ?? []) {
      if (!edges.has(p)) continue;
      if (state.get(p) === 'open') return [...stack.slice(stack.indexOf(p)), p];
      if (!state.has(p)) {
        const found = dfs(p);
        if (found) return found;
      }
    }
    stack.pop();
    state.set(n, 'done');
    return undefined;
  };
  for (const n of edges.keys()) {
    if (state.has(n)) continue;
    const found = dfs(n);
    if (found) return found;
  }
  return undefined;
}

const SIZE = /^([0-9]+(?:\.[0-9]+)?)\s*([MmGgTt])[Ii]?[Bb]$/;
const MIB_PER: Record<string, number> = { m: 1, g: 1024, t: 1024 * 1024 };

/** A size with a binary unit in MiB (512MB → 512, 4GB → 4096). */
export function sizeMib(text: string): number {
  const m = SIZE.exec(text.trim());
  if (!m) throw new Error(`not a size: ${text}`);
  return Number(m[1]) * MIB_PER[m[2].toLowerCase()];
}

/** Seconds from a number or `10m`-style text. */
export function seconds(v: unknown): number {
  if (typeof v === 'number') return v;
  const m = /^([0-9]+)\s*([smhd])$/.exec(String(v).trim());
  if (!m) throw new Error(`not a duration: ${String(v)}`);
  return Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[m[2] as 's' | 'm' | 'h' | 'd'];
}

/** File resources as the API's spec keys: memory in MiB (rounded up), disk in GiB (3 decimals, rounded up). */
export function specResources(r: Obj): Record<string, number> {
  const out: Record<string, number> = {};
  if (typeof r.cpu === 'number') out.cpu = r.cpu;
  if (typeof r.memory === 'string') out.memory_mib = Math.ceil(sizeMib(r.memory));
  if (typeof r.gpu === 'number') out.gpu = r.gpu;
  if (typeof r.disk === 'string') out.disk_gib = Math.ceil((sizeMib(r.disk) / 1024) * 1000) / 1000;
  return out;
}

const stringEnv = (e: unknown): Record<string, string> =>
  Object.fromEntries(Object.entries(isObj(e) ? e : {}).map(([k, v]) => [k, String(v)]));

/** The API request of a valid file (semanticErrors found nothing and the schema held). */
export function buildRequest(root: Obj): BuiltRun {
  const { jobs, groups } = walk(root);
  const parents = new Set(jobs.flatMap((j) => list(j.node.depends_on).map(String)));
  const body: RunBody = { jobs: [] };
  if (typeof root.name === 'string') body.run_name = root.name;
  if (isObj(root.attributes)) body.attributes = root.attributes;
  if (typeof root.priority === 'number') body.priority = root.priority;
  if (typeof root.cancel_after_n_failures === 'number') body.cancel_after_n_failures = root.cancel_after_n_failures;
  if (isObj(root.retry)) {
    const r = root.retry;
    body.retry = {
      on_events: r.on_events as Schemas['RetryPolicyDto']['on_events'],
      ...(typeof r.max_attempts === 'number' ? { max_attempts: r.max_attempts } : {}),
      ...(r.duration !== undefined ? { duration_s: seconds(r.duration) } : {}),
    };
  }
  const groupPaths = new Map<Obj, string>();
  if (groups.length > 0) body.job_groups = [];
  for (const g of groups) {
    const name = String(g.node.name);
    const parentPath = g.path.slice(0, -2);
    const parent = groups.find(
      (p) => p.path.length === parentPath.length && p.path.every((s, i) => s === parentPath[i]),
    );
    groupPaths.set(g.node, parent ? `${groupPaths.get(parent.node)}/${name}` : name);
    body.job_groups?.push({
      ref: name,
      ...(parent ? { parent_ref: String(parent.node.name) } : {}),
      attributes: { name, ...(isObj(g.node.attributes) ? g.node.attributes : {}) },
      ...(typeof g.node.cancel_after_n_failures === 'number'
        ? { cancel_after_n_failures: g.node.cancel_after_n_failures }
        : {}),
    });
  }
  const defaults = isObj(root.resources) ? root.resources : {};
  const planned: PlannedJob[] = jobs.map((j, i) => {
    const n = j.node;
    const name = typeof n.name === 'string' ? n.name : undefined;
    const image = n.image ?? root.image;
    const maxDuration = n.max_duration ?? root.max_duration;
    const env = { ...stringEnv(root.env), ...stringEnv(n.env) };
    const job: JobBody = {
      ...(name ? { name } : {}),
      ...(name && parents.has(name) ? { ref: name } : {}),
      ...(j.groupRef ? { group_ref: j.groupRef } : {}),
      ...(typeof n.replicas === 'number' ? { replicas: n.replicas } : {}),
      ...(n.always_run === true ? { always_run: true } : {}),
      ...(Array.isArray(n.depends_on) && n.depends_on.length > 0 ? { depends_on: n.depends_on.map(String) } : {}),
      spec: {
        commands: list(n.commands).map(String),
        ...(typeof image === 'string' ? { image } : {}),
        ...(Object.keys(env).length > 0 ? { env } : {}),
        resources: specResources({ ...defaults, ...(isObj(n.resources) ? n.resources : {}) }),
        ...(maxDuration !== undefined ? { max_duration_s: seconds(maxDuration) } : {}),
      },
    };
    body.jobs.push(job);
    return { name: name ?? `job-${i}`, group: j.groupPath, body: job };
  });
  return {
    body,
    jobs: planned,
    groups: groups.map((g) => ({ name: String(g.node.name), path: groupPaths.get(g.node) ?? '', depth: g.depth })),
  };
}
