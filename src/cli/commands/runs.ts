import type { Schemas } from '../../client';
import { findRun, openSession, unwrap, type Session } from '../api';
import { CliError, EXIT } from '../errors';
import { json, money, stdout, table } from '../format';
import { arg, str, type Context } from '../main';

/** stop, cancel, groups, cost: one run's controls and views. */

type Group = Schemas['JobGroupWithCost'];
export type GroupNode = Group & { children: GroupNode[] };

export async function stop(ctx: Context): Promise<number> {
  const s = openSession(str(ctx.values, 'project'));
  const project = s.project();
  const run = await findRun(s, project, arg(ctx, 0, 'the run (name or id)'), 0);
  const stopped = await unwrap(
    s.api.POST('/api/v1/projects/{project}/runs/{runId}/stop', {
      params: { path: { project, runId: run.id } },
      body: { abort: ctx.values.abort === true },
    }),
    s.url,
  );
  stdout.write(
    ctx.json
      ? json(stopped)
      : `${ctx.values.abort ? 'aborting' : 'stopping'} run ${stopped.run_name}: ${stopped.status}\n`,
  );
  return EXIT.OK;
}

/** The run's group tree, each group with its subtree's counts and cost (children in id order). */
export async function groupTree(s: Session, project: string, runId: string): Promise<GroupNode> {
  const path = { project, runId, g: 0 };
  const [root, cost] = await Promise.all([
    unwrap(s.api.GET('/api/v1/projects/{project}/runs/{runId}/job-groups/{g}', { params: { path } }), s.url),
    unwrap(s.api.GET('/api/v1/projects/{project}/runs/{runId}/job-groups/{g}/cost', { params: { path } }), s.url),
  ]);
  const fill = async (node: GroupNode): Promise<GroupNode> => {
    let cursor: string | undefined;
    do {
      const page = await unwrap(
        s.api.GET('/api/v1/projects/{project}/runs/{runId}/job-groups/{g}/job-groups', {
          params: {
            path: { project, runId, g: node.job_group_id },
            query: { limit: 100, ...(cursor ? { cursor } : {}) },
          },
        }),
        s.url,
      );
      for (const child of page.items) node.children.push(await fill({ ...child, children: [] }));
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    return node;
  };
  return fill({ ...root, cost: { total_usd: cost.total_usd, breakdown: cost.breakdown }, children: [] });
}

const groupName = (g: Group, runName: string) =>
  g.job_group_id === 0
    ? runName
    : typeof g.attributes.name === 'string'
      ? g.attributes.name
      : `group ${g.job_group_id}`;

/**
 * The group tree as a table: name (indented as a tree), id, effective status, counts (pending: waiting for parents),
 * cost, cancellation.
 */
export function groupsTable(tree: GroupNode, runName: string): string {
  const rows: string[][] = [];
  const visit = (g: GroupNode, prefix: string, childPrefix: string) => {
    const c = g.cancellation;
    const cancelled = c
      ? `${c.reason} by ${c.cancelled_by}${c.job_group_id !== g.job_group_id ? ` (via group ${c.job_group_id})` : ''}`
      : '';
    rows.push([
      `${prefix}${groupName(g, runName)}`,
      String(g.job_group_id),
      g.status,
      String(g.counts.n_jobs),
      String(g.counts.n_pending),
      String(g.counts.n_succeeded),
      String(g.counts.n_failed),
      String(g.counts.n_cancelled),
      money(g.cost.total_usd),
      cancelled,
    ]);
    g.children.forEach((child, i) => {
      const last = i === g.children.length - 1;
      visit(child, `${childPrefix}${last ? '└─ ' : '├─ '}`, `${childPrefix}${last ? '   ' : '│  '}`);
    });
  };
  visit(tree, '', '');
  return table(
    ['GROUP', 'ID', 'STATUS', 'JOBS', 'PENDING', 'DONE', 'FAILED', 'CANCELLED', 'COST', 'CANCELLATION'],
    rows,
    [1, 3, 4, 5, 6, 7, 8],
  );
}

export async function groups(ctx: Context): Promise<number> {
  const s = openSession(str(ctx.values, 'project'));
  const project = s.project();
  const run = await findRun(s, project, arg(ctx, 0, 'the run (name or id)'), 0);
  const tree = await groupTree(s, project, run.id);
  if (ctx.json) {
    stdout.write(json(tree));
    return EXIT.OK;
  }
  stdout.write(groupsTable(tree, run.run_name));
  return EXIT.OK;
}

export async function cancel(ctx: Context): Promise<number> {
  const s = openSession(str(ctx.values, 'project'));
  const project = s.project();
  const run = await findRun(s, project, arg(ctx, 0, 'the run (name or id)'), 0);
  const which = arg(ctx, 1, 'the group (id or name; runplane groups RUN lists them)');
  let g: number;
  let name = which;
  if (/^\d+$/.test(which)) g = Number(which);
  else {
    const found: GroupNode[] = [];
    const visit = (n: GroupNode) => {
      if (n.attributes.name === which) found.push(n);
      n.children.forEach(visit);
    };
    visit(await groupTree(s, project, run.id));
    if (found.length !== 1)
      throw new CliError(
        found.length
          ? `${found.length} groups are named ${which}: give its id`
          : `run ${run.run_name} has no group named ${which}`,
        EXIT.REFUSED,
      );
    g = found[0].job_group_id;
    name = `${g} (${which})`;
  }
  const reason = str(ctx.values, 'reason');
  const c = await unwrap(
    s.api.POST('/api/v1/projects/{project}/runs/{runId}/job-groups/{g}/cancel', {
      params: { path: { project, runId: run.id, g } },
      body: reason !== undefined ? { reason } : {},
    }),
    s.url,
  );
  stdout.write(
    ctx.json
      ? json(c)
      : `cancelled group ${name} of run ${run.run_name}: ${c.reason} by ${c.cancelled_by} at ${c.cancelled_at}\n`,
  );
  return EXIT.OK;
}

export async function cost(ctx: Context): Promise<number> {
  const s = openSession(str(ctx.values, 'project'));
  const project = s.project();
  const run = await findRun(s, project, arg(ctx, 0, 'the run (name or id)'), 0);
  const c = await unwrap(
    s.api.GET('/api/v1/projects/{project}/runs/{runId}/cost', { params: { path: { project, runId: run.id } } }),
    s.url,
  );
  if (ctx.json) {
    stdout.write(json(c));
    return EXIT.OK;
  }
  stdout.write(
    table(
      ['RESOURCE', 'USAGE', 'UNIT', 'COST'],
      c.breakdown.map((b) => [b.resource, b.usage.toFixed(6), b.unit, money(b.cost_usd)]),
      [1, 3],
    ) +
      `total ${money(c.total_usd)}` +
      (c.running_usd > 0 ? ` (${money(c.running_usd)} of it by jobs still running)` : '') +
      ` for run ${run.run_name} (${run.status})\n`,
  );
  return EXIT.OK;
}
