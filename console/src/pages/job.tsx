import { useEffect, useRef, useState } from 'preact/hooks';
import { api, auth, call, money, type Submission } from '../api';
import { enc, Link, navigate, query } from '../router';
import { followSse } from '../sse';
import { CopyId, ErrorState, Loading, Status, Time } from '../ui';
import { Dependents, DependsOn, jobLabel, useJobView } from './job-deps';
import { useKeysetPages } from '../keyset';

/** The job's submissions, newest first, one keyset page at a time (a job may have been retried many times). */
function useHistory(project: string, runId: string, jobId: string) {
  return useKeysetPages<Submission>(
    (cursor) =>
      call(
        api().GET('/api/v1/projects/{project}/runs/{runId}/jobs/{jobId}/submissions', {
          params: { path: { project, runId, jobId }, query: { limit: 100, cursor } },
        }),
      ),
    [project, runId, jobId],
  );
}

type Chunk = { stream: 'stdout' | 'stderr'; data: string };
const MAX_CHUNKS = 5000;

function decode(data: string, encoding: string): string {
  if (encoding !== 'base64') return data;
  const bytes = Uint8Array.from(atob(data), (ch) => ch.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}

/** A submission's log, read and then followed live (SSE) until the submission has finished. */
function LogViewer(props: { project: string; runId: string; jobId: string; submission?: number; onEnd: () => void }) {
  const [chunks, setChunks] = useState<Chunk[]>([]);
  const [state, setState] = useState<'following' | 'ended' | 'error'>('following');
  const [end, setEnd] = useState<{ status: string; termination_reason: string | null }>();
  const [stick, setStick] = useState(true);
  const box = useRef<HTMLPreElement>(null);

  useEffect(() => {
    setChunks([]);
    setState('following');
    setEnd(undefined);
    const url =
      `/api/v1/projects/${enc(props.project)}/runs/${props.runId}/jobs/${props.jobId}/logs` +
      query({ submission_num: props.submission, limit: 100 });
    return followSse(url, auth.token ?? '', {
      onError: (status) => status >= 400 && status < 500 && setState('error'),
      onMessage: (m) => {
        if (m.event === 'chunk') {
          const c = JSON.parse(m.data) as { stream: 'stdout' | 'stderr'; data: string; encoding: string };
          setChunks((old) => [...old.slice(-MAX_CHUNKS + 1), { stream: c.stream, data: decode(c.data, c.encoding) }]);
        } else if (m.event === 'end') {
          setEnd(JSON.parse(m.data) as { status: string; termination_reason: string | null });
          setState('ended');
          props.onEnd();
        }
      },
    });
  }, [props.project, props.runId, props.jobId, props.submission]);

  useEffect(() => {
    if (stick && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [chunks, stick]);

  return (
    <div class="logs">
      <div class="title-row">
        <h2>Log</h2>
        <span role="status" class={state === 'following' ? 'live on' : 'live'} data-testid="log-state">
          {state === 'following'
            ? '● following'
            : state === 'ended'
              ? `finished: ${end?.status ?? ''}${end?.termination_reason ? ` (${end.termination_reason})` : ''}`
              : 'could not read the log'}
        </span>
        <label class="inline">
          <input type="checkbox" checked={stick} onChange={(e) => setStick(e.currentTarget.checked)} />
          Keep scrolled to the end
        </label>
      </div>
      <pre ref={box} class="log" tabIndex={0} aria-label="Job output" data-testid="log">
        {chunks.length === 0 && <span class="muted">{state === 'following' ? 'No output yet.' : 'No output.'}</span>}
        {chunks.map((c, i) => (
          <span key={i} class={c.stream === 'stderr' ? 'stderr' : undefined}>
            {c.data}
          </span>
        ))}
      </pre>
    </div>
  );
}

/** A job: its submissions (retry reasons, counts by outcome) and the log of the chosen one. */
export function JobPage(props: { project: string; runId: string; jobId: string; q: URLSearchParams }) {
  const { project, runId, jobId } = props;
  const chosen = props.q.get('submission');
  const history = useHistory(project, runId, jobId);
  const job = useJobView({ project, runId }, jobId);
  const latest = history.items[0];
  const folded = new Map<string, number>();
  for (const s of history.items.slice(1)) {
    const k = `${s.status}${s.termination_reason ? ` / ${s.termination_reason}` : ''}`;
    folded.set(k, (folded.get(k) ?? 0) + 1);
  }
  const runUrl = `/projects/${enc(project)}/runs/${runId}`;

  if (history.error !== undefined) return <ErrorState error={history.error} what="job" />;
  if (history.next === undefined) return <Loading what="job" />;
  return (
    <section>
      <nav class="crumbs" aria-label="Breadcrumb">
        <Link href={`/projects/${enc(project)}/runs`}>{project}</Link> / <Link href={runUrl}>run</Link> /{' '}
        <span>job</span>
      </nav>
      <div class="title-row">
        <h1>
          {job ? `Job ${jobLabel(job)}` : 'Job'} <Status status={latest?.status ?? job?.status} />
        </h1>
      </div>
      <dl class="facts">
        <div>
          <dt>Job id</dt>
          <dd>
            <CopyId id={jobId} label="job id" />
          </dd>
        </div>
        <div>
          <dt>Run</dt>
          <dd>
            <Link href={runUrl}>
              <CopyId id={runId} label="run id" />
            </Link>
          </dd>
        </div>
        {job && (
          <div>
            <dt>Group</dt>
            <dd>
              <Link href={`${runUrl}?group=${job.job_group_id}`}>group {job.job_group_id}</Link>
            </dd>
          </div>
        )}
        <div>
          <dt>Submissions</dt>
          <dd>
            {history.items.length}
            {history.next ? '+' : ''}
          </dd>
        </div>
      </dl>
      {job && <DependsOn path={{ project, runId }} job={job} waiting={(latest?.status ?? job.status) === 'pending'} />}
      <Dependents path={{ project, runId }} jobId={jobId} />
      {folded.size > 0 && (
        <p data-testid="folded">
          Earlier submissions:{' '}
          {[...folded.entries()].map(([k, n]) => (
            <span key={k} class="chip">
              {k} × {n}
            </span>
          ))}
        </p>
      )}
      <h2>Submissions</h2>
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">Status</th>
              <th scope="col">Reason (why it was retried)</th>
              <th scope="col">Exit</th>
              <th scope="col">Submitted</th>
              <th scope="col">Started</th>
              <th scope="col">Finished</th>
              <th scope="col">Cost</th>
              <th scope="col">Log</th>
            </tr>
          </thead>
          <tbody>
            {history.items.map((s) => (
              <tr key={s.id}>
                <td>{s.submission_num}</td>
                <td>
                  <Status status={s.status} />
                </td>
                <td>{s.termination_reason ?? ''}</td>
                <td>{s.exit_status ?? ''}</td>
                <td>
                  <Time at={s.submitted_at} />
                </td>
                <td>
                  <Time at={s.started_at} />
                </td>
                <td>
                  <Time at={s.finished_at} />
                </td>
                <td>{money(s.cost_usd)}</td>
                <td>
                  <button
                    type="button"
                    class="link"
                    aria-pressed={(chosen === null ? latest?.submission_num : Number(chosen)) === s.submission_num}
                    onClick={() => navigate(`${runUrl}/jobs/${jobId}?submission=${s.submission_num}`, true)}
                  >
                    Show log of #{s.submission_num}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {history.next && (
        <button type="button" onClick={() => void history.more()}>
          Older submissions
        </button>
      )}
      <LogViewer
        project={project}
        runId={runId}
        jobId={jobId}
        submission={chosen === null ? undefined : Number(chosen)}
        onEnd={() => void history.refresh()}
      />
    </section>
  );
}
