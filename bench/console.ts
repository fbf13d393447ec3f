import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { gzipSync } from 'node:zlib';
import { chromium, type Browser } from 'playwright-core';
import { required } from '../src/common/required';
import {
  BenchEnv,
  fmtBytes,
  fmtInt,
  fmtMs,
  fmtRatio,
  log,
  measureReportedSideBySide,
  printTable,
  QUICK,
  TargetResult,
  verdict,
} from './support';

/**
 * Runs in the page before its scripts: records in `window.runplaneShownAt` the page's time (ms since its navigation
 * started) of the first frame painted with the group tree (3 groups) and a job row in the document.
 */
const SHOWN_AT = `(() => {
  const shown = () =>
    document.querySelectorAll('[data-testid=group-tree] [data-group]').length > 2 &&
    document.querySelector('[data-testid=job-row]') !== null;
  const observer = new MutationObserver(() => {
    if (!shown()) return;
    observer.disconnect();
    requestAnimationFrame(() => (window.runplaneShownAt = performance.now()));
  });
  observer.observe(document, { childList: true, subtree: true });
})();`;

const SUITE = 'console';
const BIG_JOBS = QUICK ? 1_000 : 10_000;
const SMALL_JOBS = 10;
const ITERATIONS = Number(process.env.BENCH_ITERATIONS) || (QUICK ? 3 : 9);
const WARMUP = QUICK ? 1 : 2;
const MAX_JS_GZIP = 250 * 1024;
const MAX_BIG_MS = 1000;
const MAX_RATIO = 1.5;
const CHROMIUM = process.env.RUNPLANE_CHROMIUM || '/usr/bin/chromium';
const CONSOLE_DIR = join(__dirname, '..', 'console');

/** The JavaScript (and CSS) index.html loads at once, each file gzipped as a server would send it. */
function firstLoadBytes(): { js: number; jsRaw: number; css: number; files: string[] } {
  const html = readFileSync(join(CONSOLE_DIR, 'index.html'), 'utf8');
  const refs = [...html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]);
  let js = 0;
  let jsRaw = 0;
  let css = 0;
  for (const ref of refs) {
    const body = readFileSync(join(CONSOLE_DIR, ref));
    const gz = gzipSync(body).length;
    if (ref.endsWith('.js')) {
      js += gz;
      jsRaw += body.length;
    } else if (ref.endsWith('.css')) css += gz;
  }
  return { js, jsRaw, css, files: refs };
}

/**
 * A run of `jobs` jobs in a depth-5 tree: every group has two children down to depth 5 (62 groups), the jobs spread
 * over the root and every group.
 */
function runBody(name: string, jobs: number) {
  const groups: { ref: string; parent_ref?: string }[] = [];
  const grow = (parent: string | undefined, depth: number) => {
    if (depth > 5) return;
    for (const side of ['a', 'b']) {
      const ref = `${parent ?? 'g'}${side}`;
      groups.push({ ref, ...(parent ? { parent_ref: parent } : {}) });
      grow(ref, depth + 1);
    }
  };
  grow(undefined, 1);
  const slots = [undefined, ...groups.map((g) => g.ref)];
  const per = Math.floor(jobs / slots.length);
  const entries = slots.map((ref, i) => ({
    ...(ref ? { group_ref: ref } : {}),
    replicas: per + (i < jobs - per * slots.length ? 1 : 0),
    spec: { commands: ['true'], resources: { cpu: 1, memory_mib: 256 } },
  }));
  return { run_name: name, job_groups: groups, jobs: entries.filter((e) => e.replicas > 0) };
}

/**
 * `npm run bench -- console`: what the web console ships on first load, and how long a run page takes to show its
 * group tree and first job rows in headless Chromium, for a run of 10,000 jobs and one of 10, side by side.
 */
export async function runConsole(env: BenchEnv): Promise<TargetResult[]> {
  if (!existsSync(join(CONSOLE_DIR, 'index.html'))) throw new Error('dist/console is missing: npm run build');
  const bytes = firstLoadBytes();
  printTable(
    `${SUITE}: first load (index.html's assets, gzipped)`,
    ['what', 'bytes'],
    [
      ['JavaScript, gzipped', fmtBytes(bytes.js)],
      ['JavaScript, raw', fmtBytes(bytes.jsRaw)],
      ['CSS, gzipped', fmtBytes(bytes.css)],
    ],
    [`files: ${bytes.files.join(', ')}`],
  );

  const project = await env.createProject('bench-console');
  const t0 = performance.now();
  const big = (
    await env.http<{ id: string }>('POST', `/api/v1/projects/${project}/runs`, runBody('big', BIG_JOBS), 201)
  ).body.id;
  const small = (
    await env.http<{ id: string }>('POST', `/api/v1/projects/${project}/runs`, runBody('small', SMALL_JOBS), 201)
  ).body.id;
  const loadS = ((performance.now() - t0) / 1000).toFixed(1);
  log(`submitted runs of ${fmtInt(BIG_JOBS)} and ${SMALL_JOBS} jobs in 62-group depth-5 trees in ${loadS} s`);
  await env.pool.query('ANALYZE');

  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium`);
  const browser: Browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });
  try {
    // Each navigation in a fresh context: a cold HTTP cache, as a first visit; the token is already signed in.
    const open = async (runId: string) => {
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      await context.addInitScript(`localStorage.setItem('runplane.token', ${JSON.stringify(env.token)})`);
      await context.addInitScript(SHOWN_AT);
      const page = await context.newPage();
      try {
        const started = performance.now();
        // BENCH_CONSOLE_TRACE=1: when each request of the page ended, to see the waterfall.
        if (process.env.BENCH_CONSOLE_TRACE === '1')
          page.on('requestfinished', (r) =>
            log(`  ${fmtMs(performance.now() - started)} ms ${r.method()} ${r.url().replace(env.baseUrl, '')}`),
          );
        await page.goto(`${env.baseUrl}/projects/${project}/runs/${runId}`, { waitUntil: 'commit' });
        await Promise.all([
          page.locator('[data-testid=group-tree] [data-group]').nth(2).waitFor(),
          page.getByTestId('job-row').first().waitFor(),
        ]);
        // The figure is the page's own clock (SHOWN_AT: since its navigation started). Not the wall time of this
        // call: that adds the browser context made and closed around the visit, and Playwright's waitFor, which
        // polls with a backoff of up to 500 ms (its return says only that the rows were there by then).
        return required(await page.evaluate<number | undefined>('window.runplaneShownAt'), 'the time shown');
      } finally {
        await context.close();
      }
    };
    const timed = await measureReportedSideBySide(
      { big: () => open(big), small: () => open(small) },
      ITERATIONS,
      WARMUP,
    );
    const ratio = timed.big.p50 / timed.small.p50;
    printTable(
      `${SUITE}: navigation → group tree and first job rows shown (headless Chromium, cold cache), ` +
        `${ITERATIONS} iterations side by side`,
      ['run', 'p50 ms', 'p95 ms', 'min ms', 'p50 / small'],
      [
        [
          `${fmtInt(BIG_JOBS)} jobs, depth 5`,
          fmtMs(timed.big.p50),
          fmtMs(timed.big.p95),
          fmtMs(timed.big.min),
          fmtRatio(ratio),
        ],
        [
          `${SMALL_JOBS} jobs, depth 5`,
          fmtMs(timed.small.p50),
          fmtMs(timed.small.p95),
          fmtMs(timed.small.min),
          fmtRatio(1),
        ],
      ],
      ['the page loads the tree lazily (a group and its children) and jobs in keyset pages of 100'],
    );
    log(`${SUITE}: first-load JS ${verdict(bytes.js <= MAX_JS_GZIP)}`);
    return [
      {
        suite: SUITE,
        target: 'JavaScript on first load ≤ 250 KB gzipped',
        measured: fmtBytes(bytes.js),
        pass: bytes.js <= MAX_JS_GZIP,
      },
      {
        suite: SUITE,
        target: `run page of ${fmtInt(BIG_JOBS)} jobs (depth 5): tree and first rows ≤ 1 s`,
        measured: `${fmtMs(timed.big.p50)} ms p50`,
        pass: timed.big.p50 <= MAX_BIG_MS,
        note: `p95 ${fmtMs(timed.big.p95)} ms`,
      },
      {
        suite: SUITE,
        target: `… ≤ 1.5× a run of ${SMALL_JOBS} jobs`,
        measured: fmtRatio(ratio),
        pass: ratio <= MAX_RATIO,
        note: `${fmtMs(timed.big.p50)} vs ${fmtMs(timed.small.p50)} ms`,
      },
    ];
  } finally {
    await browser.close();
  }
}
