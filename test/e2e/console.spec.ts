import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { DONE } from '../../bench/reference-worker';
import { axeViolations, ensureConsoleBuilt, launchChromium, screenshot } from '../support/browser';
import { jobSpec, makeProject, makeRun, setMembers } from '../support/factories';
import { createTestApp, TestApp, TestUser } from '../support/test-app';
import { claimFor, makeWorker } from '../support/workers';

/* eslint-disable @typescript-eslint/no-explicit-any */
jest.setTimeout(150_000);

/**
 * The web console at `/`, driven in Debian's Chromium (playwright-core) against the real app on a port: each flow
 * also saves a screenshot (test-output/console) and checks the page with axe-core (no serious violation).
 */
describe('the web console in a real browser', () => {
  let t: TestApp;
  let base: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let owner: TestUser;
  let admin: TestUser;
  let service: TestUser;
  let stranger: TestUser;
  let project: string;
  let foreign: string;

  const api = async (user: TestUser, method: 'get' | 'post', path: string, body?: object, status = 200) => {
    const req = method === 'get' ? t.http.get(path) : t.http.post(path).send(body ?? {});
    const res = await req.set(user.auth);
    if (res.status !== status) throw new Error(`${method} ${path} → ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
  const checkPage = async (name: string) => {
    await screenshot(page, name);
    expect(await axeViolations(page)).toEqual([]);
  };
  const signIn = async (token: string) => {
    await page.goto(`${base}/signin`);
    await page.fill('#token', token);
    await page.click('button[type=submit]');
  };

  beforeAll(async () => {
    ensureConsoleBuilt();
    // Its own database: the admin page's invariants report covers every run in it.
    t = await createTestApp({}, { ownDatabase: 'console' });
    await t.app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(t.app.getHttpServer().address() as AddressInfo).port}`;
    [owner, admin, service, stranger] = await Promise.all([t.user(), t.user('admin'), t.user('service'), t.user()]);
    project = (await makeProject(t, owner)).name;
    foreign = (await makeProject(t, stranger)).name;
    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    page = await context.newPage();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it("serves the app at / and at any deep link a browser opens, never over the API's paths", async () => {
    const html = 'text/html,application/xhtml+xml';
    const root = await t.http.get('/').expect(200);
    expect(root.headers['content-type']).toMatch(/text\/html/);
    expect(root.headers['cache-control']).toBe('no-cache');
    const asset = /src="(\/assets\/[^"]+\.js)"/.exec(root.text)?.[1] ?? '';
    const js = await t.http.get(asset).expect(200);
    expect(js.headers['cache-control']).toMatch(/immutable/);
    await t.http.get(`/projects/${project}/runs/x`).set('Accept', html).expect(200).expect('Content-Type', /html/);
    // API paths, unknown assets and non-browser clients keep the API's JSON 404.
    for (const path of ['/api/v1/nope', '/admin/v1/nope', '/internal/v1/nope', '/assets/nope.js', '/favicon.ico']) {
      const res = await t.http.get(path).set('Accept', html).expect(404);
      expect(res.body.code).toBe('NOT_FOUND');
    }
    expect((await t.http.get('/projects/x').expect(404)).body.code).toBe('NOT_FOUND');
  });

  it('refuses a bad token, signs in with a good one, keeps it over a reload, signs out', async () => {
    await page.goto(`${base}/projects/${project}/runs`);
    await page.waitForURL(/\/signin\?next=/);
    await checkPage('sign-in');
    await page.fill('#token', 'rp_not_a_real_token_0123456789');
    await page.click('button[type=submit]');
    await expect(page.getByRole('alert').textContent()).resolves.toContain('401');

    await page.fill('#token', owner.token);
    await page.click('button[type=submit]');
    // Back where the deep link pointed.
    await page.waitForURL(`${base}/projects/${project}/runs`);
    await page.getByRole('heading', { name: /Runs/ }).waitFor();
    await page.reload();
    await page.getByText(`Signed in as ${owner.name}`).waitFor();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(/\/signin$/);
    expect(await page.evaluate("localStorage.getItem('runplane.token')")).toBeNull();
    await signIn(owner.token);
    await page.getByRole('heading', { name: 'Projects' }).waitFor();
    await page.getByRole('link', { name: project, exact: true }).waitFor();
    await checkPage('projects');
  });

  it("follows a running job's log live, then shows its end", async () => {
    const run = await makeRun(t, owner, project, {
      run_name: 'logged',
      priority: 100,
      jobs: [{ name: 'talker', spec: jobSpec() }],
    });
    const worker = makeWorker(t, service, 'console-w1');
    const [s] = await claimFor(worker, run.id);
    expect((await worker.running(s.id)).status).toBe(200);
    const chunk = (offset: number, data: string, stream = 'stdout') =>
      api(service, 'post', `/internal/v1/submissions/${s.id}/logs`, { worker_id: 'console-w1', stream, offset, data });
    await chunk(0, 'first line\n');

    await page.goto(`${base}/projects/${project}/runs/${run.id}`);
    await page.getByTestId('job-row').first().getByRole('link').click();
    await page.waitForURL(new RegExp(`/jobs/${run.jobs[0].id}$`));
    const log = page.getByTestId('log');
    await log.getByText('first line').waitFor();
    await expect(page.getByTestId('log-state').textContent()).resolves.toContain('following');
    await chunk(11, 'second line\n');
    await chunk(0, 'a warning\n', 'stderr');
    await log.getByText('second line').waitFor();
    await log.getByText('a warning').waitFor();
    await checkPage('job-log-following');
    expect((await worker.complete(s.id, DONE)).status).toBe(200);
    await page.getByTestId('log-state').getByText('finished: done').waitFor();
    await checkPage('job');
  });

  it('opens a run with a depth-5 tree; cancelling a group changes its subtree live, with who and why', async () => {
    // root → a1 → a2 → a3 → a4 → a5, and a sibling b1; three jobs in every group.
    const chain = ['a1', 'a2', 'a3', 'a4', 'a5'];
    const groups = [...chain.map((ref, i) => ({ ref, ...(i > 0 ? { parent_ref: chain[i - 1] } : {}) })), { ref: 'b1' }];
    const run = await makeRun(t, owner, project, {
      run_name: 'deep',
      job_groups: groups,
      jobs: [
        { spec: jobSpec(), replicas: 2 },
        ...groups.map((g) => ({ group_ref: g.ref, replicas: 3, spec: jobSpec() })),
      ],
    });
    const runPath = `/api/v1/projects/${project}/runs/${run.id}/job-groups`;
    const ids: number[] = [];
    for (let g = 0; ids.length < 5;) {
      const kids = (await api(owner, 'get', `${runPath}/${g}/job-groups`)).items as any[];
      const next = kids.find((k) => k.counts.n_jobs === 3 * (5 - ids.length)) ?? kids[0];
      ids.push(next.job_group_id);
      g = next.job_group_id;
    }

    await page.goto(`${base}/projects/${project}/runs/${run.id}`);
    const tree = page.getByTestId('group-tree');
    await tree.locator('[data-group="0"]').waitFor();
    await page.getByTestId('job-row').first().waitFor();
    // Down the chain with the keyboard: focus each group's toggle and press Enter.
    for (const g of ids.slice(0, 4)) {
      await page.getByRole('button', { name: `Expand group ${g}` }).focus();
      await page.keyboard.press('Enter');
      await page.getByRole('button', { name: `Collapse group ${g}` }).waitFor();
    }
    await tree.locator(`[data-group="${ids[4]}"]`).waitFor();
    await checkPage('run-tree-depth5');

    await tree.locator(`[data-group="${ids[1]}"]`).click();
    await page.waitForURL(new RegExp(`group=${ids[1]}`));
    await page.getByRole('button', { name: `Cancel group ${ids[1]}` }).click();
    await page.getByRole('dialog').getByLabel('Reason').fill('bad parameters');
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel group' }).click();
    // Every group from ids[1] down says cancelled, through the same page (no reload); the parent does not.
    for (const g of ids.slice(1)) await tree.locator(`[data-group="${g}"] .status-cancelled`).waitFor();
    expect(await tree.locator(`[data-group="${ids[0]}"] .status-cancelled`).count()).toBe(0);
    await tree.locator(`[data-group="${ids[1]}"]`).getByText(`by ${owner.name}: bad parameters`).waitFor();
    await tree.locator(`[data-group="${ids[3]}"]`).getByText(`with group ${ids[1]}`).waitFor();
    await page.getByTestId('cancellation').getByText('bad parameters').waitFor();
    await page.getByTestId('job-row').getByText('job_group_cancelled').first().waitFor();
    await checkPage('run-group-cancelled');
    await page.setViewportSize({ width: 390, height: 844 });
    await screenshot(page, 'run-phone');
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it('shows a job waiting on its parent, its parents and its dependents as links, paged', async () => {
    // b (always_run) depends on a, and so do the 51 replicas of fan; no worker claims a, so all of them stay pending.
    const run = await makeRun(t, owner, project, {
      run_name: 'chain',
      jobs: [
        { name: 'a', ref: 'a', spec: jobSpec() },
        { name: 'b', ref: 'b', depends_on: ['a'], always_run: true, spec: jobSpec() },
        { name: 'fan', replicas: 51, depends_on: ['a'], spec: jobSpec() },
      ],
    });
    const a = run.jobs.find((j: any) => j.job_name === 'a') as any;
    const b = run.jobs.find((j: any) => j.job_name === 'b') as any;
    expect(b.status).toBe('pending');
    const [aName, bName] = [`#${a.job_num} a`, `#${b.job_num} b`];

    await page.goto(`${base}/projects/${project}/runs/${run.id}`);
    const bLink = page.getByRole('link', { name: `#${b.job_num}`, exact: true });
    const row = page.getByTestId('job-row').filter({ has: bLink });
    await row.locator('.status-pending').waitFor();
    await expect(row.getByTestId('waits-on').textContent()).resolves.toContain('waits on 1');
    const counts = (await api(owner, 'get', `/api/v1/projects/${project}/runs/${run.id}?jobs_limit=0`)).job_counts;
    expect(counts).toEqual({ pending: 52, submitted: 1 });
    const shown = page.getByTestId('job-counts');
    for (const [status, n] of Object.entries(counts)) await shown.getByText(`${status} ${String(n)}`).waitFor();
    await checkPage('run-pending');

    await row.getByRole('link').click();
    await page.waitForURL(new RegExp(`/jobs/${b.id}$`));
    await page.locator('h1 .status-pending').waitFor();
    const parents = page.getByTestId('depends-on');
    await parents.getByText('Waiting on 1 of 1 parent.').waitFor();
    await parents.locator('.chip', { hasText: 'always_run' }).waitFor();
    await checkPage('job-pending');

    await parents.getByRole('link', { name: aName }).click();
    await page.waitForURL(new RegExp(`/jobs/${a.id}$`));
    // a has no parents; its 52 children come 50 at a time.
    const children = page.getByTestId('dependents');
    await children.getByRole('link').nth(49).waitFor();
    expect(await page.getByTestId('depends-on').count()).toBe(0);
    await children.getByRole('button', { name: 'More dependents' }).click();
    await children.getByRole('link').nth(51).waitFor();
    expect(await children.getByRole('link').count()).toBe(52);
    await expect(children.locator('.status-pending').count()).resolves.toBe(52);
    await checkPage('job-dependents');

    await children.getByRole('link', { name: bName }).click();
    await page.waitForURL(new RegExp(`/jobs/${b.id}$`));
    await page.getByTestId('depends-on').getByRole('link', { name: aName }).waitFor();
    // Opened by a deep link (nothing cached): the page still finds the job's parents.
    await page.reload();
    await page.getByRole('heading', { name: `Job ${bName} pending` }).waitFor();
    await page.getByTestId('depends-on').getByRole('link', { name: aName }).waitFor();
  });

  it('lists runs with filters and live updates, and stops a run after confirmation', async () => {
    await page.goto(`${base}/projects/${project}/runs`);
    await page.getByText('● live').waitFor();
    await page.locator('table.runs').waitFor();
    // A run submitted elsewhere shows up without a reload.
    const run = await makeRun(t, owner, project, { run_name: 'arrives-live' });
    // Generous: the feed reads below every open transaction of the PostgreSQL server, other databases' too.
    await page.getByRole('link', { name: 'arrives-live' }).waitFor({ timeout: 90_000 });
    await page.getByLabel('Status').selectOption('done');
    await page.waitForURL(/status=done/);
    await page.getByRole('link', { name: 'arrives-live' }).waitFor({ state: 'detached' });
    await page.getByRole('link', { name: 'logged' }).waitFor();
    await checkPage('runs-filtered');
    await page.getByLabel('Status').selectOption('');
    await page.getByLabel('User').fill(owner.name);
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.getByRole('link', { name: 'arrives-live' }).waitFor();
    await checkPage('runs');
    await page.setViewportSize({ width: 390, height: 844 });
    await screenshot(page, 'runs-phone');
    await page.setViewportSize({ width: 1280, height: 800 });

    await page.getByRole('link', { name: 'arrives-live' }).click();
    await page.getByRole('button', { name: 'Stop run' }).click();
    await checkPage('run-stop-confirm');
    await page.getByRole('dialog').getByRole('button', { name: 'Stop run' }).click();
    await page.locator('h1 .status-terminated').waitFor();
    await page.getByText('stopped_by_user').first().waitFor();
    expect((await api(owner, 'get', `/api/v1/projects/${project}/runs/${run.id}`)).status).toBe('terminated');
    await checkPage('run-stopped');
  });

  it("shows the project's billing as a stacked chart and its table", async () => {
    await page.goto(`${base}/projects/${project}/billing`);
    const table = page.getByTestId('billing-table');
    await table.waitFor();
    const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    const range = `from=${day(Date.now() - 13 * 86400_000)}&to=${day(Date.now())}`;
    const report = await api(owner, 'get', `/api/v1/projects/${project}/billing?${range}&group_by=day,resource`);
    expect(report.items.length).toBeGreaterThan(0);
    for (const row of report.items)
      await table.getByRole('cell', { name: row.resource, exact: true }).first().waitFor();
    expect(await page.locator('figure.chart svg rect').count()).toBeGreaterThan(0);
    await checkPage('billing');
  });

  it('admin: rates with versions, a new version, the invariants report', async () => {
    await signIn(admin.token);
    await page.getByRole('link', { name: 'Admin' }).click();
    await page.getByTestId('rates').getByText('cpu', { exact: true }).waitFor();
    await page.getByRole('button', { name: 'Check invariants' }).click();
    await page.getByTestId('invariants').getByText('Every invariant holds').waitFor();
    await checkPage('admin');
  });

  it("a foreign project says 403; another project's run says 404", async () => {
    await signIn(owner.token);
    await page.getByRole('heading', { name: 'Projects' }).waitFor();
    await page.goto(`${base}/projects/${foreign}/runs`);
    await page.getByRole('alert').getByText('(403)').waitFor();
    await checkPage('foreign-project-403');
    const theirs = await makeRun(t, stranger, foreign);
    await page.goto(`${base}/projects/${foreign}/runs/${theirs.id}`);
    await page.getByRole('alert').getByText('(403)').waitFor();
    // The same run under the owner's project: it exists, but not there.
    await page.goto(`${base}/projects/${project}/runs/${theirs.id}`);
    await page.getByRole('alert').getByText('(404)').waitFor();
    await checkPage('foreign-run-404');
    await setMembers(t, stranger, foreign, [
      { user: stranger.name, role: 'admin' },
      { user: owner.name, role: 'user' },
    ]);
    await page.goto(`${base}/projects/${foreign}/runs/${theirs.id}`);
    await page.getByTestId('group-tree').waitFor();
  });
});
