import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';

const ROOT = join(__dirname, '../..');
/** Debian's Chromium: `.ci/run` installs it when missing; no browser is ever downloaded. */
export const CHROMIUM = process.env.RUNPLANE_CHROMIUM || '/usr/bin/chromium';
/** Screenshots of every page the browser tests visit (gitignored). */
export const SHOTS = join(ROOT, 'test-output', 'console');

function newest(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}

/**
 * `npm run build` builds the console into dist/console; `npm test` type-checks instead, so the browser tests build it
 * when it is missing or older than its sources (a few seconds).
 */
export function ensureConsoleBuilt(): void {
  const index = join(ROOT, 'dist/console/index.html');
  const sources = Math.max(newest(join(ROOT, 'console')), newest(join(ROOT, 'src/client')));
  if (existsSync(index) && statSync(index).mtimeMs >= sources) return;
  const vite = join(ROOT, 'node_modules/vite/bin/vite.js');
  const out = spawnSync(process.execPath, [vite, 'build', 'console'], { cwd: ROOT, encoding: 'utf8' });
  if (out.status !== 0) throw new Error(`vite build failed:\n${out.stdout}\n${out.stderr}`);
}

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium (.ci/run does it when missing)`);
  // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SHOTS, { recursive: true });
  const path = join(SHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

/** axe-core's serious and critical violations on the page as it is now (WCAG 2.x A/AA and best practices). */
export async function axeViolations(page: Page): Promise<string[]> {
  // Strings, not functions: the test code is type-checked without the DOM's types.
  if (!(await page.evaluate("'axe' in window"))) await page.addScriptTag({ content: AXE });
  const violations = (await page.evaluate(
    "axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations)",
  )) as { id: string; impact: string; help: string; nodes: { target: string[] }[] }[];
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}
