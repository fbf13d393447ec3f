import { randomUUID } from 'node:crypto';
import { DONE, ERROR } from '../../bench/reference-worker';
import { comparePositions, decodeEventCursor, encodeEventCursor, START } from '../../src/modules/events/event-cursor';
import { EventFollowers } from '../../src/modules/events/event-followers.service';
import { EventsFeedService } from '../../src/modules/events/events-feed.service';
import { EventsRetentionService } from '../../src/modules/events/events-retention.service';
import { EventsService } from '../../src/modules/events/events.service';
import { BudgetService } from '../../src/modules/billing/budget.service';
import { ServerTransitionsService } from '../../src/modules/lifecycle/server-transitions.service';
import { RunStatusService } from '../../src/modules/runs/run-status.service';
import { jobSpec, makeProject, makeRun, RunResponse } from '../support/factories';
import { DatabaseProxy } from '../support/database-proxy';
import { feedReadable } from '../support/event-feed';
import { SseClient } from '../support/sse';
import { createTestApp, describeRealPostgres, embeddedOnly, TestApp, TestUser } from '../support/test-app';
import { workerDatabaseUrl } from '../support/test-databases';
import { claimFor, invariants, makeWorker } from '../support/workers';
import { required } from '../../src/common/required';

/* eslint-disable @typescript-eslint/no-explicit-any */
type EventJson = any;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('event feed', () => {
  let t: TestApp;
  let owner: TestUser;
  let outsider: TestUser;
  let service: TestUser;
  let admin: TestUser;
  let project: string;
  beforeAll(async () => {
    // Its own database: retention and the budget loop look at every project and run.
    t = await createTestApp({}, { ownDatabase: 'events' });
    [owner, outsider, service, admin] = await Promise.all([t.user(), t.user(), t.user('service'), t.user('admin')]);
    project = (await makeProject(t, owner)).name;
  });
  afterAll(() => t.close());

  const feedUrl = (p = project) => `/api/v1/projects/${p}/events`;

  /** Every event of the feed after `cursor`, page by page; and the last next_cursor. */
  const readAll = async (query: Record<string, string> = {}, cursor?: string, limit = 100, p = project) => {
    await feedReadable(t);
    const items: EventJson[] = [];
    let next = cursor;
    for (;;) {
      const res = await t.http
        .get(feedUrl(p))
        .set(owner.auth)
        .query({ ...query, limit: String(limit), ...(next ? { cursor: next } : {}) })
        .expect(200);
      expect(typeof res.body.next_cursor).toBe('string');
      items.push(...res.body.items);
      next = res.body.next_cursor;
      if (res.body.items.length < limit) return { items, next: required(next, 'next_cursor') };
    }
  };

  /** One line per event, jobs named by `names`, for comparing sequences. */
  const lines = (items: EventJson[], names: Map<string, string>) =>
    items.map(
      (e) =>
        `${e.type} ${e.status ?? '-'}` +
        (e.job_id ? ` ${names.get(e.job_id) ?? e.job_id}#${e.submission_num}` : '') +
        (e.type.startsWith('group.') ? ` g${e.job_group_id}` : '') +
        (e.reason ? ` (${e.reason})` : '') +
        (e.by ? ` by ${e.by}` : ''),
    );

  /**
   * The feed holds `expected`: the events of transitions exactly, in their order; and the statuses settled after them
   * (`run.status`, `group.status`), each run's and each group's in order and ending where `expected` ends, each after
   * the event before it in `expected` (what moved it). A settle runs after its commit and records what it finds then:
   * under a stream of commits a status may come after later transitions' events, a status held only between two
   * commits one settle serves together is never seen, and a run's status may come before its group's.
   */
  const expectSettledOrder = (actual: string[], expected: string[]) => {
    const settled = (line: string) => line.startsWith('run.status') || line.startsWith('group.status');
    expect(actual.filter((l) => !settled(l))).toEqual(expected.filter((l) => !settled(l)));
    // Whose status a line records: the run, or one group.
    const whose = (line: string) => (line.startsWith('run.status') ? 'run' : (/ g\d+$/.exec(line)?.[0] ?? line));
    // Each recorded status matched, in order, to the expected line it is (greedily: the first one not yet used).
    const matched = new Map<number, number>(); // index in expected -> index in actual
    for (const who of new Set(expected.filter(settled).map(whose))) {
      const mine = (l: string) => settled(l) && whose(l) === who;
      const want = expected.flatMap((l, i) => (mine(l) ? [i] : []));
      const got = actual.flatMap((l, k) => (mine(l) ? [k] : []));
      let j = 0;
      for (const k of got) {
        while (j < want.length && expected[want[j]] !== actual[k]) j++;
        expect(`${actual[k]}: ${j < want.length ? 'in order' : 'not expected here'}`).toBe(`${actual[k]}: in order`);
        matched.set(want[j++], k);
      }
      expect(got.length > 0 && actual[got[got.length - 1]]).toBe(expected[want[want.length - 1]]);
    }
    // Where the n-th occurrence of a transition's event is in actual (they are all there, in order).
    const at = (i: number) => {
      const nth = expected.slice(0, i).filter((l) => l === expected[i]).length;
      return actual.flatMap((l, k) => (l === expected[i] ? [k] : []))[nth];
    };
    for (const [i, k] of matched) if (i > 0 && !settled(expected[i - 1])) expect(at(i - 1)).toBeLessThan(k);
  };

  const namesOf = (run: RunResponse) =>
    new Map(run.jobs.map((j) => [j.id, `j${j.job_num}.${j.replica_num}`] as [string, string]));

  it('retention removes old events in bounded passes, never from the first event of an unfinished run on', async () => {
    // A fresh database: the feed is empty. Run A finishes, then B is submitted (left unfinished), then C.
    const w = makeWorker(t, service, 'w-retention');
    const runA = await makeRun(t, owner, project);
    // Each step's status settled before the next step (one settle serving two steps would record only the second).
    const statuses = t.app.get(RunStatusService);
    const [a] = await claimFor(w, runA.id);
    await statuses.settled();
    expect((await w.running(a.id)).status).toBe(200);
    await statuses.settled();
    expect((await w.complete(a.id, DONE)).status).toBe(200);
    await statuses.settled(); // A's run.status done is recorded before B exists
    const runB = await makeRun(t, owner, project);
    const runC = await makeRun(t, owner, project);
    await feedReadable(t);
    const all = async () =>
      (
        await t.dataSource.query<{ run_id: string; type: string; status: string }[]>(
          `SELECT run_id, type, status FROM events ORDER BY seq`,
        )
      ).map((e) => `${e.run_id === runA.id ? 'A' : e.run_id === runB.id ? 'B' : 'C'} ${e.type} ${e.status}`);
    const before = await all();
    // A's: submitted, then provisioning, running and done for both the run and its job.
    expect(before.filter((e) => e.startsWith('A'))).toHaveLength(7);
    // Everything happened 500 hours ago (events and runs alike, so a run's first event still is its submission).
    await t.dataSource.query(`UPDATE events SET at = at - interval '500 hours'`);
    await t.dataSource.query(`UPDATE runs SET submitted_at = submitted_at - interval '500 hours'`);
    const retention = t.app.get(EventsRetentionService);
    expect(await retention.purge(2)).toBe(2);
    expect(await all()).toEqual(before.slice(2));
    // B has not finished: its first event and everything after stays, whatever its age.
    expect(await retention.purge(10_000)).toBe(5);
    expect(await all()).toEqual(before.filter((e) => !e.startsWith('A')));
    expect((await all())[0]).toBe('B run.status submitted');
    // B and C stop: every event before now − 168 h goes; the stops' own events (now) stay.
    for (const run of [runB, runC])
      await t.http.post(`/api/v1/projects/${project}/runs/${run.id}/stop`).set(owner.auth).send({}).expect(200);
    const report = (await t.http.post('/admin/v1/maintenance/cleanup').set(admin.auth).expect(200)).body;
    expect(report.events_removed).toBe(2);
    expect(await all()).toEqual([
      'B group.cancelled cancelled',
      'B run.status terminated',
      'C group.cancelled cancelled',
      'C run.status terminated',
    ]);
    expect(await retention.purge(10_000)).toBe(0);
  });

  it('records a run, its jobs and groups: claims, starts, a retry, the ends, a group completing', async () => {
    const run = await makeRun(t, owner, project, {
      retry: { on_events: ['error'], max_attempts: 2 },
      job_groups: [{ ref: 'a' }],
      jobs: [{ spec: jobSpec() }, { group_ref: 'a', replicas: 2, spec: jobSpec() }],
    });
    const names = namesOf(run);
    const name = (s: { job_id: string }) => required(names.get(s.job_id), 'job name');
    const a = required(
      run.jobs.find((j) => j.job_group_id !== 0),
      'a job below the root',
    ).job_group_id;
    const w = makeWorker(t, service, 'w-events');
    const expected = ['run.status submitted'];
    const [c1] = await claimFor(w, run.id);
    const [c2] = await claimFor(w, run.id);
    const [c3] = await claimFor(w, run.id);
    // A transition's own event first; the run's status it moves follows the commit (settled after it).
    expected.push(
      `job.status provisioning ${name(c1)}#0`,
      'run.status provisioning',
      ...[c2, c3].map((c) => `job.status provisioning ${name(c)}#0`),
    );
    for (const [i, c] of [c1, c2, c3].entries()) {
      expect((await w.running(c.id)).status).toBe(200);
      expected.push(`job.status running ${name(c)}#0`);
      if (i === 0) expected.push('run.status running');
    }
    // One job of group a fails and is retried: its attempt's end, then its next submission.
    const [failing, other] = [c1, c2, c3].filter((c) => c.job_group_id === a);
    const root = required(
      [c1, c2, c3].find((c) => c.job_group_id === 0),
      'the root cancellation',
    );
    expect((await w.complete(failing.id, ERROR)).body.retry_submission).not.toBeNull();
    expected.push(
      `job.status failed ${name(failing)}#0 (container_exited_with_error)`,
      `job.status submitted ${name(failing)}#1`,
    );
    await w.complete(other.id, DONE);
    expected.push(`job.status done ${name(other)}#0 (done_by_runner)`);
    await w.complete(root.id, DONE);
    // Only the retry is left, queued: the run waits for it.
    expected.push(`job.status done ${name(root)}#0 (done_by_runner)`, 'run.status pending');
    const [retry] = await claimFor(w, run.id);
    expect(retry.submission_num).toBe(1);
    await w.execute(retry, DONE);
    expected.push(
      `job.status provisioning ${name(retry)}#1`,
      'run.status provisioning',
      `job.status running ${name(retry)}#1`,
      'run.status running',
      // Group a completes with it (group 0's completion is the run's own status).
      `job.status done ${name(retry)}#1 (done_by_runner)`,
      `group.status success g${a}`,
      'run.status done (all_jobs_done)',
    );
    const { items } = await readAll({ run_id: run.id });
    expectSettledOrder(lines(items, names), expected);
    expect(items.every((e: EventJson) => e.project === project && e.run_id === run.id)).toBe(true);
    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });

  it('a cancelled subtree is one group.cancelled (queued jobs swept without events); a stop is group 0’s', async () => {
    const run = await makeRun(t, owner, project, {
      job_groups: [{ ref: 'a' }, { ref: 'b', parent_ref: 'a' }, { ref: 'side' }],
      jobs: [
        { spec: jobSpec(), group_ref: 'b', replicas: 30 },
        { spec: jobSpec(), group_ref: 'side' },
        { spec: jobSpec(), replicas: 2 },
      ],
    });
    const names = namesOf(run);
    const groupOf = (jobNum: number) =>
      required(
        run.jobs.find((j) => j.job_num === jobNum),
        `job ${jobNum}`,
      ).job_group_id;
    const [b, side] = [groupOf(0), groupOf(1)];
    const a = (await t.http.get(`/api/v1/projects/${project}/runs/${run.id}/job-groups/${b}`).set(owner.auth)).body
      .parent_id;
    // One job of b goes to a worker and the side group's job runs to the end (the side group completes: success);
    // everything else stays queued (the two are put first in the queue).
    const first = [
      required(
        run.jobs.find((j) => j.job_num === 0),
        'job 0',
      ).id,
      required(
        run.jobs.find((j) => j.job_num === 1),
        'job 1',
      ).id,
    ];
    await t.dataSource.query(`UPDATE job_submissions SET priority = 100 WHERE job_id = ANY($1)`, [first]);
    const w = makeWorker(t, service, 'w-cancel');
    const claimed = await claimFor(w, run.id, 2);
    const onWorker = required(
      claimed.find((c) => c.job_group_id === b),
      'the claim in b',
    );
    const sideJob = required(
      claimed.find((c) => c.job_group_id === side),
      'the side claim',
    );
    await w.running(onWorker.id);
    await w.execute(sideJob, DONE);
    const { next: mark } = await readAll({ run_id: run.id });

    const cancel = await t.http
      .post(`/api/v1/projects/${project}/runs/${run.id}/job-groups/${a}/cancel`)
      .set(owner.auth)
      .send({ reason: 'not needed' })
      .expect(200);
    // Repeating the cancel records nothing.
    await t.http
      .post(`/api/v1/projects/${project}/runs/${run.id}/job-groups/${b}/cancel`)
      .set(owner.auth)
      .send({})
      .expect(200);
    expect(cancel.body.job_group_id).toBe(a);
    await t.app.get(ServerTransitionsService).sweepCancelled(100, 1000);
    const hb = await w.heartbeat(onWorker.id);
    expect(hb.body.cancel_requested).toBe(true);
    await w.complete(onWorker.id, { status: 'terminated', termination_reason: 'job_group_cancelled' });
    await t.http.post(`/api/v1/projects/${project}/runs/${run.id}/stop`).set(owner.auth).send({}).expect(200);
    await t.http.post(`/api/v1/projects/${project}/runs/${run.id}/stop`).set(owner.auth).send({}).expect(200);
    await t.app.get(ServerTransitionsService).sweepCancelled(100, 1000);
    const { items } = await readAll({ run_id: run.id }, mark);
    expect(lines(items, names)).toEqual([
      `group.cancelled cancelled g${a} (not needed) by ${owner.name}`,
      `job.status terminated ${names.get(onWorker.job_id)}#0 (job_group_cancelled)`,
      // Nothing on a worker any more, the root's two jobs queued.
      'run.status submitted',
      `group.cancelled cancelled g0 (stopped_by_user) by ${owner.name}`,
      'run.status terminated (stopped_by_user)',
    ]);
    // Before the cancel: the side group's success, and no event for the 30 queued jobs of b.
    const earlier = (await readAll({ run_id: run.id, type: 'group.status' })).items;
    expect(lines(earlier, names)).toEqual([`group.status success g${side}`]);
    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });

  it('fail-fast and the budget: their cancellations, the group’s failure, the project’s budget stop', async () => {
    const run = await makeRun(t, owner, project, {
      job_groups: [{ ref: 'f', cancel_after_n_failures: 1 }],
      jobs: [{ spec: jobSpec(), group_ref: 'f', replicas: 3 }, { spec: jobSpec() }],
    });
    const names = namesOf(run);
    const f = required(
      run.jobs.find((j) => j.job_group_id !== 0),
      'a job below the root',
    ).job_group_id;
    const w = makeWorker(t, service, 'w-failfast');
    const claimed = await claimFor(w, run.id, 4);
    const failing = required(
      claimed.find((c) => c.job_group_id === f),
      'the failing claim',
    );
    const { next: mark } = await readAll({ run_id: run.id });
    // Started, and its run's status read (settled) before it fails: otherwise one settle pass may serve both commits,
    // and `running`, held only between them, is never recorded (RunStatusService gathers passes).
    expect((await w.running(failing.id)).status).toBe(200);
    await t.app.get(RunStatusService).settled([run.id]);
    expect((await w.complete(failing.id, ERROR)).status).toBe(200);
    let { items } = await readAll({ run_id: run.id }, mark);
    expectSettledOrder(lines(items, names), [
      `job.status running ${names.get(failing.job_id)}#0`,
      'run.status running',
      `job.status failed ${names.get(failing.job_id)}#0 (container_exited_with_error)`,
      // The cancellation in the failure's transaction; the statuses it moved once that committed.
      `group.cancelled cancelled g${f} (fail_fast) by system`,
      `group.status failure g${f}`,
      // The run's other claimed jobs have not started yet.
      'run.status provisioning',
    ]);

    // The budget: a limit the project is at (0 USD) stops its active runs, this one included.
    const budget = await makeProject(t, owner);
    const spent = await makeRun(t, owner, budget.name);
    const cursor = (await readAll({}, undefined, 100, budget.name)).next;
    await t.http.patch(`/api/v1/projects/${budget.name}`).set(owner.auth).send({ billing_limit_usd: 0 }).expect(200);
    await t.app.get(BudgetService).enforce(100);
    await t.app.get(BudgetService).enforce(100); // nothing left to stop: nothing recorded
    ({ items } = await readAll({}, cursor, 100, budget.name));
    expect(lines(items, namesOf(spent))).toEqual([
      'group.cancelled cancelled g0 (budget_exceeded) by system',
      'project.budget_exceeded - (budget_exceeded) by system',
      'run.status terminated (budget_exceeded)',
    ]);
    expect(items[1].run_id).toBeNull();
    for (const c of claimed.filter((x) => x !== failing)) await w.execute(c, DONE).catch(() => undefined);
    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });

  it('pages by keyset without skips or repeats; next_cursor always resumes; filters by run and type', async () => {
    const { items: all, next } = await readAll();
    expect(all.length).toBeGreaterThan(30);
    const seqs = all.map((e: EventJson) => e.seq);
    expect(new Set(seqs).size).toBe(seqs.length);
    // Small pages, concatenated, are the same feed.
    for (const limit of [1, 3, 7]) expect((await readAll({}, undefined, limit)).items).toEqual(all);
    // The last cursor: nothing more, a cursor again; new events come after it, exactly once.
    const empty = (await t.http.get(feedUrl()).set(owner.auth).query({ cursor: next }).expect(200)).body;
    expect(empty.items).toEqual([]);
    expect(typeof empty.next_cursor).toBe('string');
    const run = await makeRun(t, owner, project);
    const after = await readAll({}, empty.next_cursor);
    expect(lines(after.items, new Map())).toEqual(['run.status submitted']);
    expect(after.items[0].run_id).toBe(run.id);
    // Each item has the contract's fields, and no others.
    expect(Object.keys(after.items[0]).sort()).toEqual(
      [
        'seq',
        'at',
        'type',
        'project',
        'run_id',
        'job_group_id',
        'job_id',
        'submission_num',
        'status',
        'reason',
        'by',
      ].sort(),
    );
    // Filters: a run's events, one type, both.
    const everything = [...all, ...after.items];
    const byRun = (await readAll({ run_id: run.id })).items;
    expect(byRun).toEqual(everything.filter((e) => e.run_id === run.id));
    const types = 'group.cancelled,project.budget_exceeded';
    expect((await readAll({ type: types })).items).toEqual(everything.filter((e) => types.split(',').includes(e.type)));
    expect((await readAll({ type: 'run.status', run_id: run.id })).items).toEqual(byRun);
  });

  it('refuses bad input: unknown types, bad cursors, other projects’ runs, outsiders', async () => {
    const run = await makeRun(t, owner, project);
    const other = await makeProject(t, outsider);
    const foreign = await makeRun(t, outsider, other.name);
    const get = (query: Record<string, string>, who = owner) => t.http.get(feedUrl()).set(who.auth).query(query);
    const fields = (body: { details: { field: string }[] }) => body.details.map((d) => d.field);

    let res = await get({ type: 'run.status,job.bogus' }).expect(400);
    expect(res.body.code).toBe('VALIDATION_FAILED');
    expect(fields(res.body)).toEqual(['type']);
    await get({ type: 'run.status,' }).expect(400);
    await get({ type: 'RUN.STATUS' }).expect(400);
    res = await get({ cursor: 'garbage' }).expect(400);
    expect(res.body.code).toBe('INVALID_CURSOR');
    expect(fields(res.body)).toEqual(['cursor']);
    await get({ cursor: Buffer.from('1.2.3').toString('base64url') }).expect(400);
    await get({ limit: '101' }).expect(400);
    await get({ limit: '0' }).expect(400);
    res = await get({ run_id: 'x' }).expect(400);
    expect(fields(res.body)).toEqual(['run_id']);
    // Another project's run, an unknown one: 404, as the runs routes answer.
    expect((await get({ run_id: foreign.id }).expect(404)).body.code).toBe('NOT_FOUND');
    await get({ run_id: randomUUID() }).expect(404);
    await get({ run_id: run.id }).expect(200);
    await get({}, outsider).expect(403);
    await t.http.get(feedUrl('no-such-project')).set(owner.auth).expect(404);
    await t.http.get(feedUrl()).expect(401);
    await t.http.get(feedUrl()).set(service.auth).expect(403);
    await get({ extra: '1' }).expect(400);
    // The stream's own header.
    res = await t.http
      .get(feedUrl())
      .set(owner.auth)
      .set('Accept', 'text/event-stream')
      .set('Last-Event-ID', 'not-a-position')
      .expect(400);
    expect(res.body.code).toBe('INVALID_CURSOR');
    expect(fields(res.body)).toEqual(['Last-Event-ID']);
    await t.http.get(feedUrl()).set(outsider.auth).set('Accept', 'text/event-stream').expect(403);
  });

  // Two transactions open at once: a real server's (the embedded database is one session).
  (embeddedOnly ? it.skip : it)(
    'never skips an event committed after a later one (the horizon holds it back); follows commit order',
    async () => {
      const events = t.app.get(EventsService);
      const projectId = randomUUID(); // the feed of a project nobody else writes to
      const filter = { projectId };
      const record = (qr: ReturnType<typeof t.dataSource.createQueryRunner>, n: number) =>
        events.record(qr.manager, [{ type: 'run.status', projectId, status: 'running', reason: `n${n}` }]);
      const open = async () => {
        const qr = t.dataSource.createQueryRunner();
        await qr.connect();
        await qr.startTransaction();
        return qr;
      };
      const readUntil = async (after: typeof START, n: number) => {
        for (let i = 0; i < 500; i++) {
          const batch = await events.read(filter, after, 100);
          if (batch.events.length >= n) return batch;
          await sleep(10);
        }
        throw new Error('events never became readable');
      };
      // T1 writes first (lower seq) but commits last; T2 writes and commits in between.
      const t1 = await open();
      const t2 = await open();
      try {
        await record(t1, 1);
        await record(t2, 2);
        await t2.commitTransaction();
        const held = await events.read(filter, START, 100);
        // A seq cursor would hand out n2 now and skip n1 for ever; the feed waits for T1 instead.
        expect(held.events).toEqual([]);
        expect(held.heldBack).toBe(true);
        // A poller that resumes from the short page's position loses nothing either.
        expect(decodeEventCursor(encodeEventCursor(held.next))).toEqual(held.next);
        await t1.commitTransaction();
        const both = await readUntil(held.next, 2);
        expect(both.events.map((e) => e.reason)).toEqual(['n1', 'n2']);

        // T4 gets its transaction id first, but writes once T3 has committed (as a transaction that waited for T3's
        // lock would): it follows T3, as the commits did, although its own id is the lower one.
        const t4 = await open();
        const t3 = await open();
        try {
          const xid = async (qr: typeof t3) => BigInt((await qr.query('SELECT pg_current_xact_id()::text AS x'))[0].x);
          const [x4, x3] = [await xid(t4), await xid(t3)];
          expect(x4).toBeLessThan(x3);
          await record(t3, 3);
          await t3.commitTransaction();
          // T4 still runs, with the lower id: T3's event waits behind it.
          expect((await events.read(filter, both.next, 100)).events).toEqual([]);
          await record(t4, 4);
          await t4.commitTransaction();
          // Readable as soon as nothing below it runs: below the xmax of a snapshot taken now, with no transaction
          // having ended since (its tx_id must not wait for an id not yet given out).
          const [{ xmax }] = await t.dataSource.query(`SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS xmax`);
          const [{ key }] = await t.dataSource.query(
            `SELECT max(tx_id)::text AS key FROM events WHERE project_id = $1`,
            [projectId],
          );
          expect(BigInt(key)).toBeLessThan(BigInt(xmax));
          const later = await readUntil(both.next, 2);
          expect(later.events.map((e) => e.reason)).toEqual(['n3', 'n4']);
          expect(BigInt(later.events[1].txId)).toBeGreaterThan(x4);
          // Everything, from the start: once each, in one order.
          expect((await events.read(filter, START, 100)).events.map((e) => e.reason)).toEqual(['n1', 'n2', 'n3', 'n4']);
        } finally {
          for (const qr of [t3, t4]) if (qr.isTransactionActive) await qr.rollbackTransaction();
          await Promise.all([t3.release(), t4.release()]);
        }
      } finally {
        for (const qr of [t1, t2]) if (qr.isTransactionActive) await qr.rollbackTransaction();
        await Promise.all([t1.release(), t2.release()]);
      }
    },
  );

  describeRealPostgres('following (SSE) on another app instance', () => {
    it('keeps a stream open through a database outage and delivers what was written meanwhile', async () => {
      const proxy = await DatabaseProxy.start(await workerDatabaseUrl('events'));
      const other = await createTestApp({ DATABASE_URL: proxy.url }, { ownDatabase: 'events' });
      try {
        await other.app.listen(0, '127.0.0.1');
        const live = await SseClient.open(`${await other.app.getUrl()}${feedUrl()}`, owner.token);
        await live.until(() => live.lastId !== undefined, 5000, 'the start position');
        const start = required(live.lastId, 'the last event id');
        await live.until(() => other.app.get(EventFollowers).listens, 5000, 'the LISTEN connection');
        // Every connection of that app dies (the LISTEN one too) and new ones are refused for a while.
        await proxy.refuse();
        const during = await makeRun(t, owner, project); // written through this app, straight to the database
        await sleep(1500);
        expect(live.ended).toBe(false);
        await proxy.restore();
        const after = await makeRun(t, owner, project);
        const { items } = await readAll({}, start);
        expect(items.map((e: EventJson) => e.run_id)).toEqual([during.id, after.id]);
        await live.until(() => live.events.length >= 2, 15_000);
        expect(live.events.map((e) => e.data)).toEqual(items);
        await live.until(() => other.app.get(EventFollowers).listens, 15_000, 'LISTEN again');
      } finally {
        await other.close();
        await proxy.close();
      }
    });

    it('follows from now and Last-Event-ID, woken by NOTIFY; heartbeats recheck access; ends on shutdown', async () => {
      const other = await createTestApp({}, { ownDatabase: 'events' });
      let closed = false;
      try {
        await other.app.listen(0, '127.0.0.1');
        const url = `${await other.app.getUrl()}${feedUrl()}`;
        const live = await SseClient.open(url, owner.token);
        expect(live.status).toBe(200);
        await live.until(() => live.lastId !== undefined, 5000, 'the start position');
        const start = required(live.lastId, 'the last event id');
        // Written through this app, followed on the other: one transaction's notification wakes it.
        const run = await makeRun(t, owner, project);
        await live.until(() => live.events.length >= 1, 5000);
        expect(live.events[0]).toMatchObject({ event: 'run.status', data: { run_id: run.id, status: 'submitted' } });
        expect(other.app.get(EventFollowers).listens).toBe(true);
        const w = makeWorker(t, service, 'w-follow');
        const [c] = await claimFor(w, run.id);
        await w.execute(c, DONE);
        const { items } = await readAll({}, start);
        await live.until(() => live.events.length >= items.length, 5000);
        expect(live.events.map((e) => e.data)).toEqual(items);
        // Each id is a position, in the feed's order.
        const ids = live.events.map((e) => decodeEventCursor(e.id));
        for (let i = 1; i < ids.length; i++) expect(comparePositions(ids[i - 1], ids[i])).toBe(-1);
        // Reconnecting after the second event: the rest, once.
        const again = await SseClient.open(url, owner.token, { 'Last-Event-ID': live.events[1].id });
        await again.until(() => again.events.length >= items.length - 2, 5000);
        expect(again.events.map((e) => e.data)).toEqual(items.slice(2));
        // Heartbeats check access again: a member taken off the project loses the stream at the next one.
        other.app.get(EventsFeedService).heartbeatMs = 100;
        const member = await t.user();
        await t.http
          .put(`/api/v1/projects/${project}/members`)
          .set(owner.auth)
          .send({
            members: [
              { user: owner.name, role: 'admin' },
              { user: member.name, role: 'user' },
            ],
          })
          .expect(200);
        const removed = await SseClient.open(url, member.token);
        await removed.until(() => removed.comments >= 2, 5000, 'heartbeats');
        expect(removed.ended).toBe(false);
        await t.http
          .put(`/api/v1/projects/${project}/members`)
          .set(owner.auth)
          .send({ members: [{ user: owner.name, role: 'admin' }] })
          .expect(200);
        await removed.ending(5000);
        // Shutdown ends both streams promptly (no open response keeps the server from closing).
        const began = Date.now();
        await other.close();
        closed = true;
        await Promise.all([live.ending(3000), again.ending(3000)]);
        expect(Date.now() - began).toBeLessThan(3000);
      } finally {
        if (!closed) await other.close();
      }
    });
  });
});
