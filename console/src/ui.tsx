import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiFailure } from './api';

/** A clock every time label re-renders from, so "3 min ago" stays true. */
let now = Date.now();
const tickers = new Set<() => void>();
setInterval(() => {
  now = Date.now();
  tickers.forEach((t) => t());
}, 30_000);

function useNow(): number {
  const [, set] = useState(0);
  useEffect(() => {
    const t = () => set((n) => n + 1);
    tickers.add(t);
    return () => void tickers.delete(t);
  }, []);
  return now;
}

export function relative(iso: string, at = Date.now()): string {
  const s = Math.round((at - Date.parse(iso)) / 1000);
  const a = Math.abs(s);
  const text =
    a < 45
      ? `${a} s`
      : a < 45 * 60
        ? `${Math.round(a / 60)} min`
        : a < 36 * 3600
          ? `${Math.round(a / 3600)} h`
          : `${Math.round(a / 86400)} d`;
  return s >= 0 ? `${text} ago` : `in ${text}`;
}

export const absolute = (iso: string) =>
  new Date(iso)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, ' UTC');

/** A relative time ("5 min ago") with the absolute UTC time beside it (`full`) or in its tooltip. */
export function Time({ at, full = false }: { at: string | null | undefined; full?: boolean }) {
  const current = useNow();
  if (!at) return <span class="muted">–</span>;
  return (
    <time dateTime={at} title={absolute(at)}>
      {relative(at, Math.max(current, Date.now()))}
      {full && <span class="muted"> ({absolute(at)})</span>}
    </time>
  );
}

/** An id shown short, copied whole to the clipboard by its button. */
export function CopyId({ id, label = 'id' }: { id: string | number; label?: string }) {
  const [copied, setCopied] = useState(false);
  const text = String(id);
  const short = text.length > 12 ? text.slice(0, 8) : text;
  return (
    <span class="copy-id">
      <code title={text}>{short}</code>
      <button
        type="button"
        class="icon"
        aria-label={`Copy ${label} ${text}`}
        onClick={async () => {
          try {
            await navigator.clipboard.writeText(text);
          } catch {
            // No clipboard permission (plain http, a headless browser): select the id instead.
            const range = document.createRange();
            const code = document.querySelector(`code[title="${text}"]`);
            if (code) {
              range.selectNodeContents(code);
              getSelection()?.removeAllRanges();
              getSelection()?.addRange(range);
            }
          }
          setCopied(true);
          setTimeout(() => setCopied(false), 1500);
        }}
      >
        {copied ? 'copied' : 'copy'}
      </button>
    </span>
  );
}

export function Status({ status, title }: { status: string | null | undefined; title?: string }) {
  const s = status ?? 'unknown';
  return (
    <span class={`status status-${s}`} title={title}>
      {s}
    </span>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p class="loading" role="status" aria-live="polite">
      Loading {what}…
    </p>
  );
}

/** An error worth a sentence: what the server said, and what a 403/404 means to a person. */
export function ErrorState({ error, what, retry }: { error: unknown; what: string; retry?: () => void }) {
  const f = error instanceof ApiFailure ? error : undefined;
  const headline =
    f?.status === 403
      ? `You do not have access to this ${what} (403).`
      : f?.status === 404
        ? `No such ${what}, or not one you can see (404).`
        : f?.status === 401
          ? 'Your token was not accepted (401). Sign in again.'
          : `Could not load the ${what}${f ? ` (${f.status || 'network'})` : ''}.`;
  return (
    <div class="error" role="alert">
      <p>
        <strong>{headline}</strong>
      </p>
      <p class="muted">{f ? `${f.code}: ${f.message}` : String((error as Error)?.message ?? error)}</p>
      {retry && (
        <button type="button" onClick={retry}>
          Try again
        </button>
      )}
    </div>
  );
}

/** A load keyed by `deps`: {data, error, loading, reload}. Stale answers (from older deps) are dropped. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]) {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const seq = useRef(0);
  const run = (quiet = false) => {
    const mine = ++seq.current;
    if (!quiet) setState((s) => ({ ...s, loading: true, error: undefined }));
    load().then(
      (data) => mine === seq.current && setState({ data, loading: false }),
      (error: unknown) =>
        mine === seq.current && setState((s) => ({ data: quiet ? s.data : undefined, error, loading: false })),
    );
  };
  useEffect(() => run(), deps);
  return { ...state, reload: () => run(true) };
}

/** A modal confirmation (the native <dialog>: focus is trapped and Escape cancels). */
export function Confirm(props: {
  open: boolean;
  title: string;
  children: ComponentChildren;
  confirm: string;
  danger?: boolean;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (props.open && !d.open) d.showModal();
    if (!props.open && d.open) d.close();
  }, [props.open]);
  return (
    <dialog ref={ref} aria-labelledby="confirm-title" onClose={props.onCancel} onCancel={props.onCancel}>
      <h2 id="confirm-title">{props.title}</h2>
      {props.children}
      <div class="actions">
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
        <button type="button" class={props.danger ? 'danger' : 'primary'} onClick={props.onConfirm}>
          {props.confirm}
        </button>
      </div>
    </dialog>
  );
}

export function Counts({
  c,
}: {
  c: { n_jobs: number; n_completed: number; n_succeeded: number; n_failed: number; n_cancelled: number };
}) {
  return (
    <span class="counts" title="jobs: completed / total; succeeded, failed, cancelled">
      {c.n_completed}/{c.n_jobs}
      <span class="ok"> ✓{c.n_succeeded}</span>
      <span class="bad"> ✗{c.n_failed}</span>
      <span class="muted"> ⊘{c.n_cancelled}</span>
    </span>
  );
}

/** Job statuses in lifecycle order: waiting on parents, queued, on a worker, then the ends. */
const LIFECYCLE = [
  'pending',
  'submitted',
  'provisioning',
  'running',
  'terminating',
  'done',
  'failed',
  'terminated',
  'aborted',
];

/** A run's jobs by status: whatever keys the server sent (statuses with no job are left out), in lifecycle order. */
export function JobCounts({ counts }: { counts: Partial<Record<string, number>> }) {
  const rank = (k: string) => (LIFECYCLE.includes(k) ? LIFECYCLE.indexOf(k) : LIFECYCLE.length);
  const keys = Object.keys(counts)
    .filter((k) => typeof counts[k] === 'number')
    .sort((a, b) => rank(a) - rank(b));
  if (keys.length === 0) return <span class="muted">no jobs</span>;
  return (
    <ul class="job-counts" data-testid="job-counts">
      {keys.map((k) => (
        <li key={k}>
          <Status status={k} /> {counts[k]}
        </li>
      ))}
    </ul>
  );
}
