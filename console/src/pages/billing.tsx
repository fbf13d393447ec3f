import { useState } from 'preact/hooks';
import { api, call, money } from '../api';
import { enc, navigate, query } from '../router';
import { ErrorState, Loading, useLoad } from '../ui';

const COLORS = ['#2f6fb3', '#c2571a', '#2e8540', '#8a3ea8', '#9a7b00', '#b0303a', '#1b7f86'];
const day = (d: Date) => d.toISOString().slice(0, 10);

type Row = { day: string; resource: string; unit: string; usage: number; cost_usd: number };

/** Stacked bars of cost per day, one colour per resource, hand-drawn SVG (no chart library to ship). */
function Chart({ rows, days, resources }: { rows: Row[]; days: string[]; resources: string[] }) {
  const W = 720;
  const H = 240;
  const pad = { l: 56, b: 28, t: 10, r: 8 };
  const byDay = new Map<string, Map<string, number>>();
  for (const r of rows) {
    const m = byDay.get(r.day) ?? new Map<string, number>();
    m.set(r.resource, (m.get(r.resource) ?? 0) + r.cost_usd);
    byDay.set(r.day, m);
  }
  const max = Math.max(0.000001, ...[...byDay.values()].map((m) => [...m.values()].reduce((a, b) => a + b, 0)));
  const bw = (W - pad.l - pad.r) / Math.max(1, days.length);
  const y = (v: number) => ((H - pad.t - pad.b) * v) / max;
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-labelledby="chart-title" preserveAspectRatio="xMidYMid meet">
        <title id="chart-title">Cost per day by resource; the table below has every figure.</title>
        <line x1={pad.l} x2={W - pad.r} y1={H - pad.b} y2={H - pad.b} stroke="#555" />
        {[0, 0.5, 1].map((f) => (
          <g key={f}>
            <line x1={pad.l} x2={W - pad.r} y1={H - pad.b - y(max * f)} y2={H - pad.b - y(max * f)} stroke="#ddd" />
            <text x={pad.l - 4} y={H - pad.b - y(max * f) + 4} text-anchor="end" font-size="11" fill="#333">
              {money(max * f)}
            </text>
          </g>
        ))}
        {days.map((d, i) => {
          let base = H - pad.b;
          const m = byDay.get(d);
          return (
            <g key={d}>
              {resources.map((r, k) => {
                const v = m?.get(r) ?? 0;
                if (v <= 0) return null;
                const h = y(v);
                base -= h;
                return (
                  <rect
                    key={r}
                    x={pad.l + i * bw + bw * 0.15}
                    width={bw * 0.7}
                    y={base}
                    height={h}
                    fill={COLORS[k % COLORS.length]}
                  >
                    <title>{`${d} ${r}: ${money(v)}`}</title>
                  </rect>
                );
              })}
              {(days.length <= 16 || i % Math.ceil(days.length / 16) === 0) && (
                <text x={pad.l + i * bw + bw / 2} y={H - 10} text-anchor="middle" font-size="10" fill="#333">
                  {d.slice(5)}
                </text>
              )}
            </g>
          );
        })}
      </svg>
      <figcaption class="legend">
        {resources.map((r, k) => (
          <span key={r}>
            <span class="swatch" style={{ background: COLORS[k % COLORS.length] }} aria-hidden="true" /> {r}
          </span>
        ))}
      </figcaption>
    </figure>
  );
}

/** A project's closed usage per UTC day and resource: the chart and the table behind it. */
export function BillingPage({ project, q }: { project: string; q: URLSearchParams }) {
  const today = new Date();
  const from = q.get('from') ?? day(new Date(today.getTime() - 13 * 86400_000));
  const to = q.get('to') ?? day(today);
  const [f, setF] = useState(from);
  const [t, setT] = useState(to);
  const report = useLoad(
    () =>
      call(
        api().GET('/api/v1/projects/{project}/billing', {
          params: { path: { project }, query: { from, to, group_by: 'day,resource' } },
        }),
      ),
    [project, from, to],
  );
  const rows = (report.data?.items ?? []) as Row[];
  const days: string[] = [];
  for (let d = new Date(`${from}T00:00:00Z`); day(d) <= to && days.length < 400; d = new Date(d.getTime() + 86400_000))
    days.push(day(d));
  const resources = [...new Set(rows.map((r) => r.resource))].sort();
  const total = rows.reduce((a, r) => a + r.cost_usd, 0);
  return (
    <section>
      <h1>
        Billing <span class="muted">of {project}</span>
      </h1>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          navigate(`/projects/${enc(project)}/billing${query({ from: f, to: t })}`);
        }}
      >
        <label>
          From <input type="date" value={f} onInput={(e) => setF(e.currentTarget.value)} />
        </label>
        <label>
          To <input type="date" value={t} onInput={(e) => setT(e.currentTarget.value)} />
        </label>
        <button type="submit">Show</button>
      </form>
      {report.loading && !report.data && <Loading what="usage" />}
      {report.error !== undefined && <ErrorState error={report.error} what="project's billing" retry={report.reload} />}
      {report.data && (
        <>
          <p>
            Total <strong data-testid="billing-total">{money(total)}</strong> from {from} to {to} (usage per UTC day, as
            the billing report closes it).
          </p>
          <Chart rows={rows} days={days} resources={resources} />
          <div class="table-wrap">
            <table data-testid="billing-table">
              <thead>
                <tr>
                  <th scope="col">Day</th>
                  <th scope="col">Resource</th>
                  <th scope="col">Usage</th>
                  <th scope="col">Cost</th>
                </tr>
              </thead>
              <tbody>
                {rows.length === 0 && (
                  <tr>
                    <td colSpan={4}>No usage in these days.</td>
                  </tr>
                )}
                {rows.map((r) => (
                  <tr key={`${r.day}-${r.resource}`}>
                    <td>{r.day}</td>
                    <td>{r.resource}</td>
                    <td>
                      {r.usage.toFixed(4)} {r.unit}
                    </td>
                    <td>{money(r.cost_usd)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
    </section>
  );
}
