import type { Schemas } from '../../src/client';
import { idempotencyKey, planText } from '../../src/cli/commands/apply';
import { billingText } from '../../src/cli/commands/billing';
import { runDetail, runsTable } from '../../src/cli/commands/ps';
import { groupsTable, type GroupNode } from '../../src/cli/commands/runs';
import { money } from '../../src/cli/format';
import { formatLogLine, prettyLogs, prettyLogStream } from '../../src/infra/logging/pretty-stream';
import { parseRunFile } from '../../src/cli/run-file';
import { RUN_FILE_SCHEMA } from '../../src/modules/run-files/run-file.schema';

/** Golden outputs of the CLI's tables, from fixed objects and a fixed clock. */
const NOW = Date.parse('2026-12-03T12:00:00Z');

const submission = (over: Partial<Schemas['SubmissionView']> = {}): Schemas['SubmissionView'] => ({
  id: '00000000-0000-4000-8000-000000000001',
  submission_num: 0,
  status: 'done',
  termination_reason: 'done_by_runner',
  exit_status: 0,
  submitted_at: '2026-12-03T11:59:00Z',
  started_at: '2026-12-03T11:59:01Z',
  finished_at: '2026-12-03T11:59:05Z',
  provisioning_data: null,
  runtime_data: null,
  cost_usd: 0.0012,
  ...over,
});

const run = (over: Partial<Schemas['RunView']> = {}): Schemas['RunView'] => ({
  id: '00000000-0000-4000-8000-0000000000aa',
  run_name: 'sweep-1',
  project: 'demo',
  user: 'alice',
  status: 'running',
  status_message: null,
  termination_reason: null,
  submitted_at: '2026-12-03T11:55:00Z',
  finished_at: null,
  priority: 0,
  attributes: {},
  retry: null,
  cost: { total_usd: 0.0345, breakdown: [] },
  job_group_id: 0,
  job_counts: { running: 2, done: 1 },
  jobs: [],
  jobs_truncated: false,
  ...over,
});

describe('CLI output', () => {
  it('ps: runs, with the project when listing several', () => {
    const runs = [
      run(),
      run({
        run_name: 'hello',
        project: 'ml',
        status: 'pending',
        status_message: 'retrying',
        submitted_at: '2026-12-01T12:00:00Z',
        cost: { total_usd: 12.5, breakdown: [] },
        job_counts: { submitted: 1 },
      }),
    ];
    expect(runsTable(runs, true, NOW)).toBe(
      [
        'RUN      PROJECT  STATUS              JOBS               AGE  COST',
        'sweep-1  demo     running             2 running, 1 done  5m   $0.0345',
        'hello    ml       pending (retrying)  1 submitted        2d   $12.50',
        '',
      ].join('\n'),
    );
    expect(runsTable([], false, NOW)).toBe('no runs\n');
  });

  it('ps RUN: the run and its jobs', () => {
    const job = (n: number, r: number, s: Partial<Schemas['SubmissionView']>): Schemas['JobView'] => ({
      id: `00000000-0000-4000-8000-00000000000${n}${r}`,
      job_num: n,
      replica_num: r,
      job_name: n === 0 ? 'download' : 'train',
      job_group_id: n,
      status: s.status ?? 'done',
      termination_reason: s.termination_reason ?? null,
      cancelled_job_group_id: null,
      depends_on: [],
      n_pending_parents: 0,
      always_run: false,
      submission_count: s.submission_num === undefined ? 1 : s.submission_num + 1,
      folded_submissions: {},
      latest_job_submission: submission(s),
      job_submissions: [],
    });
    const r = run({
      jobs: [
        job(0, 0, {}),
        job(1, 0, { status: 'running', termination_reason: null, exit_status: null, cost_usd: 0.01 }),
        job(1, 1, {
          status: 'failed',
          termination_reason: 'container_exited_with_error',
          exit_status: 3,
          submission_num: 2,
        }),
      ],
    });
    expect(runDetail(r, NOW)).toBe(
      [
        'RUN      STATUS   JOBS               AGE  COST',
        'sweep-1  running  2 running, 1 done  5m   $0.0345',
        '',
        'JOB       REPLICA  STATUS   REASON                       ATTEMPTS  EXIT     COST',
        'download        0  done                                         1     0  $0.0012',
        'train           0  running                                      1        $0.0100',
        'train           1  failed   container_exited_with_error         3     3  $0.0012',
        '',
      ].join('\n'),
    );
  });

  it('groups: the tree with counts, effective status, cancellation and cost', () => {
    const g = (id: number, parent: number | null, over: Partial<GroupNode> = {}): GroupNode => ({
      job_group_id: id,
      parent_id: parent,
      depth: 0,
      attributes: id === 0 ? {} : { name: ['run', 'prep', 'sweep', 'small', 'large'][id] },
      cancel_after_n_failures: null,
      state: 'running',
      status: 'running',
      cancellation: null,
      counts: { n_jobs: 2, n_completed: 1, n_succeeded: 1, n_failed: 0, n_cancelled: 0, n_pending: 0 },
      cost: { total_usd: 0.5, breakdown: [] },
      children: [],
      ...over,
    });
    const cancellation = {
      job_group_id: 2,
      cancelled_at: '2026-12-03T11:58:00Z',
      cancelled_by: 'alice',
      reason: 'fail_fast',
    };
    const tree = g(0, null, {
      counts: { n_jobs: 7, n_completed: 5, n_succeeded: 3, n_failed: 2, n_cancelled: 2, n_pending: 1 },
      cost: { total_usd: 1.25, breakdown: [] },
      status: 'failure',
      children: [
        g(1, 0, { status: 'success', state: 'complete' }),
        g(2, 0, {
          status: 'cancelled',
          cancellation,
          children: [g(3, 2, { status: 'cancelled', cancellation }), g(4, 2, { status: 'failure' })],
        }),
      ],
    });
    expect(groupsTable(tree, 'sweep-1')).toBe(
      [
        'GROUP        ID  STATUS     JOBS  PENDING  DONE  FAILED  CANCELLED     COST  CANCELLATION',
        'sweep-1       0  failure       7        1     3       2          2    $1.25',
        '├─ prep       1  success       2        0     1       0          0  $0.5000',
        '└─ sweep      2  cancelled     2        0     1       0          0  $0.5000  fail_fast by alice',
        '   ├─ small   3  cancelled     2        0     1       0          0  $0.5000  fail_fast by alice (via group 2)',
        '   └─ large   4  failure       2        0     1       0          0  $0.5000',
        '',
      ].join('\n'),
    );
  });

  it("apply's plan: jobs, groups, resources and the price per hour at the given rates", () => {
    const parsed = parseRunFile(
      [
        'name: sweep-1',
        'resources: {cpu: 1, memory: 512MB}',
        'groups:',
        '  - name: sweep',
        '    jobs:',
        '      - name: train',
        '        replicas: 4',
        '        commands: [x]',
        '        resources: {cpu: 2, memory: 4GB, gpu: 1}',
        'jobs:',
        '  - {name: report, commands: [y], depends_on: [train]}',
      ].join('\n'),
      RUN_FILE_SCHEMA,
    );
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
    const rate = (name: string, unit: string, usd: number) => ({
      id: 1,
      name,
      unit,
      rate_usd_per_unit_hour: usd,
      version: 1,
      valid_from: '2026-12-01T00:00:00Z',
    });
    const rates = [rate('cpu', 'core-hour', 0.04), rate('memory', 'GiB-hour', 0.005), rate('gpu', 'gpu-hour', 1)];
    // train: 4 × (2 × 0.04 + 4 × 0.005 + 1 × 1) = 4.40; report: 0.04 + 0.5 × 0.005 = 0.0425
    expect(planText(parsed.run, 'demo', rates)).toBe(
      [
        'Plan: run sweep-1 in project demo',
        '',
        'JOB     GROUP  REPLICAS  CPU  MEMORY  GPU  DEPENDS ON  PRICE/HOUR',
        'train   sweep         4    2  4GB       1                   $4.40',
        'report  -             1    1  512MB     -  train          $0.0425',
        '',
        '1 group, 2 job entries, 5 jobs; $4.44 per hour while all run (rates: cpu $0.0400/core-hour, memory ' +
          '$0.0050/GiB-hour, gpu $1.00/gpu-hour)',
        '',
      ].join('\n'),
    );
    // The same project and request: the same key (a retried apply); anything else: another.
    expect(idempotencyKey('demo', parsed.run.body)).toBe(idempotencyKey('demo', structuredClone(parsed.run.body)));
    expect(idempotencyKey('other', parsed.run.body)).not.toBe(idempotencyKey('demo', parsed.run.body));
    expect(idempotencyKey('demo', parsed.run.body)).toMatch(/^apply-[0-9a-f]{40}$/);
  });

  it('billing: per-day bars on a terminal, a table otherwise', () => {
    const items = [
      { day: '2026-12-01', cost_usd: 2 },
      { day: '2026-12-03', cost_usd: 1 },
    ];
    const o = { project: 'demo', from: '2026-12-01', to: '2026-12-03', by: 'day', columns: 46 };
    expect(billingText(items, { ...o, tty: true })).toBe(
      [
        '2026-12-01       $2.00  ████████████████████',
        '2026-12-02          $0',
        '2026-12-03       $1.00  ██████████',
        'total $3.00 for project demo, 2026-12-01 to 2026-12-03',
        '',
      ].join('\n'),
    );
    expect(billingText(items, { ...o, tty: false })).toBe(
      [
        'DAY          COST',
        '2026-12-01  $2.00',
        '2026-12-03  $1.00',
        'total $3.00 for project demo, 2026-12-01 to 2026-12-03',
        '',
      ].join('\n'),
    );
    const byResource = [{ user: 'alice', resource: 'cpu', unit: 'core-hour', usage: 1.5, cost_usd: 0.06 }];
    expect(billingText(byResource, { ...o, by: 'user,resource', tty: true })).toBe(
      [
        'USER   RESOURCE     USAGE  UNIT          COST',
        'alice  cpu       1.500000  core-hour  $0.0600',
        'total $0.0600 for project demo, 2026-12-01 to 2026-12-03',
        '',
      ].join('\n'),
    );
  });

  it('money reads small and large amounts', () => {
    expect([0, 1e-9, 0.0000266, 0.00001, 0.0012, 1.5, 1234.5].map(money)).toEqual([
      '$0',
      '<$0.00000001',
      '$0.000027',
      '$0.000010',
      '$0.0012',
      '$1.50',
      '$1,234.50',
    ]);
  });
});

describe('server logs on a terminal', () => {
  const time = Date.parse('2026-12-03T12:34:56.789Z');
  it('reads as lines: time, level, context, message; a request as method, path, status and time', () => {
    expect(
      formatLogLine({ level: 30, time, context: 'BackgroundLoopsService', msg: 'this instance runs the loops' }),
    ).toBe('12:34:56 INFO  BackgroundLoopsService: this instance runs the loops\n');
    const request = {
      level: 30,
      time,
      req: { id: 'r1', method: 'GET', url: '/api/v1/projects/nope' },
      res: { statusCode: 404 },
      responseTime: 3,
      msg: 'request completed',
    };
    expect(formatLogLine(request)).toBe('12:34:56 INFO  GET /api/v1/projects/nope → 404 3ms\n');
    const failed = {
      ...request,
      level: 50,
      res: { statusCode: 500 },
      err: { type: 'Error', message: 'boom', stack: 'Error: boom\n    at x' },
    };
    expect(formatLogLine(failed)).toBe(
      '12:34:56 ERROR GET /api/v1/projects/nope → 500 3ms (Error: boom)\nError: boom\n    at x\n',
    );
    expect(formatLogLine({ level: 30, time, context: 'RouterExplorer', msg: 'Mapped {/x, GET} route' })).toBe('');
  });

  it('is chosen on a terminal (LOG_FORMAT=auto), or forced either way', () => {
    expect([
      prettyLogs('auto', true),
      prettyLogs('auto', false),
      prettyLogs('json', true),
      prettyLogs('pretty', false),
    ]).toEqual([true, false, false, true]);
    const out: string[] = [];
    const stream = prettyLogStream({ write: (t: string) => out.push(t) });
    stream.write(`${JSON.stringify({ level: 40, time, msg: 'half' })}\nnot json`);
    stream.write('\n');
    expect(out).toEqual(['12:34:56 WARN  half\n', 'not json\n']);
  });
});
