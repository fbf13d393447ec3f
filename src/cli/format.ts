/** Plain-text output: tables, ages, money. No colours, so that golden outputs and pipes read the same. */

export interface Out {
  write(text: string): void;
  isTTY: boolean;
  columns: number;
}

export const stdout: Out = {
  write: (t) => void process.stdout.write(t),
  get isTTY() {
    return !!process.stdout.isTTY;
  },
  get columns() {
    return process.stdout.columns || 100;
  },
};

/** Rows under a header, columns padded to their widest cell (numbers right-aligned when `right` names them). */
export function table(header: string[], rows: string[][], right: number[] = []): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (right.includes(i) ? c.padStart(widths[i]) : i === cells.length - 1 ? c : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}

/** USD with enough digits to see small costs: $1,234.50, $1.23, $0.0012, $0.000027 (two significant digits). */
export function money(usd: number): string {
  if (usd === 0) return '$0';
  if (usd > 0 && usd < 0.0001) {
    if (usd < 1e-8) return '<$0.00000001';
    return `$${usd.toFixed(Math.ceil(-Math.log10(usd)) + 1)}`;
  }
  if (Math.abs(usd) < 1) return `$${usd.toFixed(4)}`;
  return `$${usd.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
}

/** How long ago, like `ps` tools say it: 5s, 3m, 2h, 4d. */
export function age(iso: string, now = Date.now()): string {
  return duration(Math.max(0, (now - Date.parse(iso)) / 1000));
}

export function duration(seconds: number): string {
  if (seconds < 60) return `${Math.floor(seconds)}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86400)}d`;
}

const STATUS_ORDER = ['pending', 'submitted', 'provisioning', 'running', 'terminating', 'done', 'failed', 'terminated'];

/** Jobs by status, in lifecycle order: `2 running, 1 done`. */
export function counts(byStatus: Record<string, number | undefined>): string {
  const keys = Object.keys(byStatus).sort((a, b) => rank(a) - rank(b));
  const parts = keys.filter((k) => (byStatus[k] ?? 0) > 0).map((k) => `${byStatus[k]} ${k}`);
  return parts.length ? parts.join(', ') : 'no jobs';
}
const rank = (s: string) => (STATUS_ORDER.includes(s) ? STATUS_ORDER.indexOf(s) : STATUS_ORDER.length);

/** A horizontal bar of `width` cells for value/max. */
export function bar(value: number, max: number, width: number): string {
  if (max <= 0 || value <= 0) return '';
  const cells = Math.max(1, Math.round((value / max) * width));
  return '█'.repeat(cells);
}

export const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;
