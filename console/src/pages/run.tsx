import { useEffect, useState } from 'preact/hooks';
import { api, ApiFailure, auth, call, money, type Run } from '../api';
import { enc, Link, navigate, query } from '../router';
import { followSse } from '../sse';
import { Confirm, CopyId, Counts, ErrorState, JobCounts, Loading, Status, Time, useLoad } from '../ui';
import { GroupTree, loadGroup } from './group-tree';
import { JobsTable } from './jobs-table';

const FINISHED = new Set(['terminated', 'failed', 'done']);

/** One run: header (status, cost, stop/abort), the group tree, the selected group and its jobs. Live via events. */
export function RunPage({ project, runId, q }: { project: string; runId: string; q: URLSearchParams }) {
  const group = Number(q.get('group') ?? 0) || 0;
  const recursive = q.get('recursive') !== 'false';
  const [version, setVersion] = useState(0);
  const path = { project, runId };
  const run = useLoad(
    () =>
      call(
        api().GET('/api/v1/projects/{project}/runs/{runId}', {
          params: { path: { project, runId }, query: { jobs_limit: 0 } },
        }),
      ),
    [project, runId],
  );
  const selected = useLoad(() => loadGroup(path, group), [project, runId, group]);
  const [confirm, setConfirm] = useState<'stop' | 'abort' | 'cancel' | null>(null);
  const [reason, setReason] = useState('');
  const [actionError, setActionError] = useState<string>();

  // Every event of this run refreshes what is shown, at most once a second (a busy run sends many).
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stop = followSse(`/api/v1/projects/${enc(project)}/events?run_id=${enc(runId)}`, auth.token ?? '', {
      onMessage: (m) => {
        if (!m.event.includes('.')) return;
        if (timer) return;
        timer = setTimeout(() => {
          timer = undefined;
          setVersion((v) => v + 1);
        }, 1000);
      },
    });
    return () => {
      clearTimeout(timer);
      stop();
    };
  }, [project, runId]);
  useEffect(() => {
    if (version === 0) return;
    run.reload();
    selected.reload();
  }, [version]);

  const select = (g: number, rec = recursive) =>
    navigate(
      `/projects/${enc(project)}/runs/${runId}` +
        query({ group: g || undefined, recursive: rec ? undefined : 'false' }),
      true,
    );

  const act = async () => {
    const what = confirm;
    setConfirm(null);
    setActionError(undefined);
    try {
      if (what === 'cancel')
        await call(
          api().POST('/api/v1/projects/{project}/runs/{runId}/job-groups/{g}/cancel', {
            params: { path: { project, runId, g: group } },
            body: reason.trim() ? { reason: reason.trim() } : {},
          }),
        );
      else
        await call(
          api().POST('/api/v1/projects/{project}/runs/{runId}/stop', {
            params: { path: { project, runId } },
            body: { abort: what === 'abort' },
          }),
        );
      setReason('');
      setVersion((v) => v + 1);
    } catch (e) {
      setActionError(e instanceof ApiFailure ? `${e.code}: ${e.message}` : String(e));
    }
  };

  if (run.error !== undefined) return <ErrorState error={run.error} what="run" retry={run.reload} />;
  if (!run.data) return <Loading what="run" />;
  const r: Run = run.data;
  const finished = FINISHED.has(r.status);
  const g = selected.data;
  const c = g?.cancellation as {
    job_group_id: number;
    reason: string;
    cancelled_by: string;
    cancelled_at: string;
  } | null;

  return (
    <section class="run">
      <nav class="crumbs" aria-label="Breadcrumb">
        <Link href={`/projects/${enc(project)}/runs`}>{project}</Link> / <span>{r.run_name}</span>
      </nav>
      <div class="title-row">
        <h1>
          {r.run_name} <Status status={r.status} />
        </h1>
        <div class="actions">
          <button type="button" disabled={finished} onClick={() => setConfirm('stop')}>
            Stop run
          </button>
          <button type="button" class="danger" disabled={finished} onClick={() => setConfirm('abort')}>
            Abort run
          </button>
        </div>
      </div>
      <dl class="facts">
        <div>
          <dt>Run id</dt>
          <dd>
            <CopyId id={r.id} label="run id" />
          </dd>
        </div>
        <div>
          <dt>User</dt>
          <dd>{r.user}</dd>
        </div>
        <div>
          <dt>Submitted</dt>
          <dd>
            <Time at={r.submitted_at} full />
          </dd>
        </div>
        <div>
          <dt>Finished</dt>
          <dd>
            <Time at={r.finished_at} full />
          </dd>
        </div>
        <div>
          <dt>Cost</dt>
          <dd data-testid="run-cost">{money(r.cost.total_usd)}</dd>
        </div>
        <div>
          <dt>Jobs</dt>
          <dd>
            <JobCounts counts={r.job_counts} />
          </dd>
        </div>
        <div>
          <dt>Status message</dt>
          <dd>
            {r.status_message ?? '–'}
            {r.termination_reason ? ` (${r.termination_reason})` : ''}
          </dd>
        </div>
      </dl>
      {actionError && (
        <p class="error" role="alert">
          {actionError}
        </p>
      )}
      <div class="split">
        <div class="pane tree-pane">
          <h2>Job groups</h2>
          <GroupTree {...path} selected={group} onSelect={(k) => select(k)} version={version} />
        </div>
        <div class="pane">
          <h2>{group === 0 ? 'The run (group 0)' : `Group ${group}`}</h2>
          {selected.error !== undefined && <ErrorState error={selected.error} what="job group" />}
          {g && (
            <div class="group-detail" data-testid="group-detail">
              <p>
                <Status status={g.status} /> <Counts c={g.counts} /> · {g.state} · depth {g.depth} · cost{' '}
                {money(g.cost.total_usd)}
                {g.cancel_after_n_failures ? ` · fail fast after ${g.cancel_after_n_failures}` : ''}
              </p>
              {c && (
                <p class="cancellation" data-testid="cancellation">
                  Cancelled {c.job_group_id !== group ? `with group ${c.job_group_id}` : ''} by{' '}
                  <strong>{c.cancelled_by}</strong> <Time at={c.cancelled_at} full />: <code>{c.reason}</code>
                </p>
              )}
              {g.cost.breakdown.length > 0 && (
                <p class="muted">
                  {g.cost.breakdown
                    .map((b) => `${b.resource} ${b.usage.toFixed(4)} ${b.unit} ${money(b.cost_usd)}`)
                    .join(' · ')}
                </p>
              )}
              <div class="actions">
                {group !== 0 && (
                  <button type="button" class="danger" disabled={!!c} onClick={() => setConfirm('cancel')}>
                    Cancel group {group}
                  </button>
                )}
                <label class="inline">
                  <input type="checkbox" checked={recursive} onChange={(e) => select(group, e.currentTarget.checked)} />
                  Include jobs of subgroups
                </label>
              </div>
            </div>
          )}
          <JobsTable project={project} runId={runId} group={group} recursive={recursive} version={version} />
        </div>
      </div>
      <Confirm
        open={confirm !== null}
        title={
          confirm === 'cancel' ? `Cancel group ${group}?` : confirm === 'abort' ? 'Abort this run?' : 'Stop this run?'
        }
        confirm={confirm === 'cancel' ? 'Cancel group' : confirm === 'abort' ? 'Abort run' : 'Stop run'}
        danger
        onConfirm={() => void act()}
        onCancel={() => setConfirm(null)}
      >
        {confirm === 'cancel' ? (
          <>
            <p>Its unfinished jobs and those of every group below it stop; always-run jobs still run.</p>
            <label for="cancel-reason">Reason (optional)</label>
            <input id="cancel-reason" value={reason} onInput={(e) => setReason(e.currentTarget.value)} />
          </>
        ) : confirm === 'abort' ? (
          <p>Every unfinished job stops at once, always-run jobs too (reason aborted_by_user).</p>
        ) : (
          <p>Unfinished jobs stop (reason stopped_by_user); always-run jobs still run.</p>
        )}
      </Confirm>
    </section>
  );
}
