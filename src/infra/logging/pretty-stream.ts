/**
 * Log lines a person reads, for a server on a terminal: pino's JSON lines turned into `HH:MM:SS LEVEL context: msg`,
 * a request as `GET /path → 404 3ms`. Only the format changes: what is logged (levels, redaction) stays the same.
 */

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

type Line = Record<string, unknown>;

/** Nest's start-up chatter (every module and route): the JSON logs keep it; a person at a terminal does not need it. */
const STARTUP_CONTEXTS = new Set([
  'NestFactory',
  'InstanceLoader',
  'RoutesResolver',
  'RouterExplorer',
  'NestApplication',
]);

/** The line as a person reads it; '' for what a terminal leaves out (Nest's start-up info). */
export function formatLogLine(line: Line): string {
  if (Number(line.level) < 40 && STARTUP_CONTEXTS.has(String(line.context))) return '';
  const time = typeof line.time === 'number' ? new Date(line.time).toISOString().slice(11, 19) : '--:--:--';
  const level = (LEVELS[Number(line.level)] ?? String(line.level)).padEnd(5);
  const req = line.req as { method?: string; url?: string; id?: string } | undefined;
  const res = line.res as { statusCode?: number } | undefined;
  const parts: string[] = [time, level];
  if (typeof line.context === 'string') parts.push(`${line.context}:`);
  if (req?.method && res?.statusCode !== undefined) {
    const ms = typeof line.responseTime === 'number' ? ` ${line.responseTime}ms` : '';
    parts.push(`${req.method} ${req.url ?? ''} → ${res.statusCode}${ms}`);
  } else if (typeof line.msg === 'string') parts.push(line.msg);
  const err = line.err as { type?: string; message?: string; stack?: string } | undefined;
  if (err?.message && err.message !== line.msg) parts.push(`(${err.type ?? 'Error'}: ${err.message})`);
  let text = parts.join(' ');
  if (Number(line.level) >= 50 && err?.stack) text += `\n${err.stack}`;
  return `${text}\n`;
}

/** A destination for pino that writes each JSON line to `out` formatted (anything unparsable as it came). */
export function prettyLogStream(out: { write(text: string): unknown }): { write(chunk: string): void } {
  let buffer = '';
  return {
    write(chunk: string) {
      buffer += chunk;
      let cut: number;
      while ((cut = buffer.indexOf('\n')) >= 0) {
        const raw = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 1);
        try {
          out.write(formatLogLine(JSON.parse(raw) as Line));
        } catch {
          out.write(`${raw}\n`);
        }
      }
    },
  };
}

/** LOG_FORMAT=auto reads as pretty on a terminal, JSON lines otherwise (files, pipes, log collectors). */
export const prettyLogs = (format: 'auto' | 'json' | 'pretty', isTTY: boolean) =>
  format === 'pretty' || (format === 'auto' && isTTY);
