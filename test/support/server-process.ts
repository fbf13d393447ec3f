import { ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { required } from '../../src/common/required';

// From the sources (jest) the build is in dist/; from the build itself (a bench), beside this file's tree.
const CLI =
  [join(__dirname, '../../dist/src/cli.js'), join(__dirname, '../../src/cli.js')].find((p) => existsSync(p)) ??
  join(__dirname, '../../dist/src/cli.js');

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  output: () => string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Runs the built CLI (`npm test` builds first) as a real process, as a user would, and waits for it to listen. */
export function startServer(
  env: Record<string, string | undefined>,
  args = ['serve'],
  timeoutMs = 45_000,
): Promise<ServerProcess> {
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { PATH: process.env.PATH, LOG_LEVEL: 'warn', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stdout = required(child.stdout, "the server's stdout");
  let out = '';
  stdout.on('data', (d) => (out += d));
  required(child.stderr, "the server's stderr").on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${out}`)), timeoutMs);
    const onData = () => {
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (!m) return;
      clearTimeout(timer);
      stdout.off('data', onData);
      resolve({
        child,
        url: m[1],
        output: () => out,
        stop: async (signal = 'SIGTERM') => {
          child.kill(signal);
          return exited;
        },
      });
    };
    stdout.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${out}`));
    });
  });
}

/** Runs the CLI to completion and returns its exit code and output (both streams, and stderr alone). */
export function runCli(
  env: Record<string, string | undefined>,
  args: string[],
): Promise<{ code: number | null; output: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { PATH: process.env.PATH, LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    let stderr = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => {
      output += d;
      stderr += d;
    });
    child.once('close', (code) => resolve({ code, output, stderr }));
  });
}
