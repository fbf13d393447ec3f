import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { required } from '../../src/common/required';

const CLI = join(__dirname, '../../dist/src/cli.js');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the built `runplane` binary as a user would (pipes, not a terminal), with `input` on its stdin. */
export function runplane(env: Record<string, string>, args: string[], input?: string): Promise<CliResult> {
  const p = spawnRunplane(env, args, input);
  return p.exited.then((code) => ({ code, stdout: p.stdout(), stderr: p.stderr() }));
}

export interface RunningCli {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exited: Promise<number | null>;
}

/** The binary left running (follow, watch), for signals and waiting on its output. */
export function spawnRunplane(env: Record<string, string>, args: string[], input?: string): RunningCli {
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { PATH: process.env.PATH, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  required(child.stdout, 'stdout').on('data', (d) => (out += d));
  required(child.stderr, 'stderr').on('data', (d) => (err += d));
  const stdin = required(child.stdin, 'stdin');
  stdin.on('error', () => undefined);
  if (input !== undefined) stdin.end(input);
  else stdin.end();
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** Runs the binary on a pseudo-terminal (util-linux `script`), as on a user's terminal; output as the terminal got. */
export function runplaneOnTerminal(env: Record<string, string>, args: string[]): Promise<CliResult> {
  const quote = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;
  const command = [process.execPath, CLI, ...args].map(quote).join(' ');
  return new Promise((resolve) => {
    const child = spawn('script', ['-qec', command, '/dev/null'], {
      env: { PATH: process.env.PATH, TERM: 'xterm', ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    required(child.stdout, 'stdout').on('data', (d) => (out += d));
    required(child.stderr, 'stderr').on('data', (d) => (err += d));
    child.once('close', (code) => resolve({ code, stdout: out, stderr: err }));
  });
}
