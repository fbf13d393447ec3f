import type { Schemas } from '../../client';
import { openSession, unwrap } from '../api';
import { EXIT, usageError } from '../errors';
import { bar, json, money, stdout, table } from '../format';
import { str, type Context } from '../main';

const DAY = /^\d{4}-\d{2}-\d{2}$/;
const isoDay = (t: number) => new Date(t).toISOString().slice(0, 10);

/** The project's billing report: a table, or per-day bars on a terminal (grouped by day alone). */
export async function billing(ctx: Context): Promise<number> {
  const s = openSession(str(ctx.values, 'project'));
  const project = s.project();
  const to = str(ctx.values, 'to') ?? isoDay(Date.now());
  const from = str(ctx.values, 'from') ?? isoDay(Date.parse(`${to}T00:00:00Z`) - 29 * 86400_000);
  for (const [k, v] of [
    ['from', from],
    ['to', to],
  ])
    if (!DAY.test(v)) throw usageError(`--${k} must be YYYY-MM-DD`);
  const by = str(ctx.values, 'by') ?? 'day';
  const keys = by.split(',');
  if (keys.some((k) => !['user', 'day', 'resource'].includes(k)))
    throw usageError('--by is a comma list of user, day, resource');
  const report = await unwrap(
    s.api.GET('/api/v1/projects/{project}/billing', {
      params: { path: { project }, query: { from, to, group_by: by } },
    }),
    s.url,
  );
  if (ctx.json) {
    stdout.write(json(report.items));
    return EXIT.OK;
  }
  stdout.write(billingText(report.items, { project, from, to, by, tty: stdout.isTTY, columns: stdout.columns }));
  return EXIT.OK;
}

type Row = Schemas['BillingReportRow'];

/** The report as text: per-day bars on a terminal when grouped by day alone (every day of the range), else a table. */
export function billingText(
  items: Row[],
  o: { project: string; from: string; to: string; by: string; tty: boolean; columns: number },
): string {
  const { project, from, to, by } = o;
  const keys = by.split(',');
  const total = items.reduce((sum, r) => sum + r.cost_usd, 0);
  const footer = `total ${money(total)} for project ${project}, ${from} to ${to}\n`;
  if (o.tty && by === 'day') {
    // Every day of the range (up to ~3 months), so that the bars read as a timeline.
    const cost = new Map(items.map((r) => [r.day ?? '', r.cost_usd]));
    const days: string[] = [];
    for (
      let t = Date.parse(`${from}T00:00:00Z`);
      t <= Date.parse(`${to}T00:00:00Z`) && days.length < 93;
      t += 86400_000
    )
      days.push(isoDay(t));
    const max = Math.max(0, ...cost.values());
    const width = Math.max(10, Math.min(60, o.columns - 26));
    const line = (d: string) => `${d}  ${money(cost.get(d) ?? 0).padStart(10)}  ${bar(cost.get(d) ?? 0, max, width)}`;
    return days.map((d) => `${line(d).trimEnd()}\n`).join('') + footer;
  }
  const header = [...keys.map((k) => k.toUpperCase()), ...(keys.includes('resource') ? ['USAGE', 'UNIT'] : []), 'COST'];
  const rows = items.map((r) => [
    ...keys.map((k) => String(r[k as 'user' | 'day' | 'resource'] ?? '')),
    ...(keys.includes('resource') ? [(r.usage ?? 0).toFixed(6), r.unit ?? ''] : []),
    money(r.cost_usd),
  ]);
  const right = keys.includes('resource') ? [keys.length, keys.length + 2] : [keys.length];
  return (rows.length ? table(header, rows, right) : 'no usage in that period\n') + footer;
}
