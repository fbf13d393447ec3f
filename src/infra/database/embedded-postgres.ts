import { closeSync, existsSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { PGlite } from '@electric-sql/pglite';
import type { PGLiteSocketServer } from '@electric-sql/pglite-socket';

export class DataDirLockedError extends Error {}

/**
 * An exclusive lock on a data directory: `<dir>.lock` holding the owner's pid. PGlite itself does not stop two
 * processes from opening one directory (which corrupts it), so we do. A lock left by a dead process is taken over.
 */
export class DataDirLock {
  private constructor(private readonly path: string) {}

  static acquire(dataDir: string): DataDirLock {
    const path = `${resolve(dataDir)}.lock`;
    mkdirSync(dirname(path), { recursive: true });
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const fd = openSync(path, 'wx');
        writeSync(fd, String(process.pid));
        closeSync(fd);
        return new DataDirLock(path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        const owner = Number(readFileSync(path, 'utf8').trim());
        if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && isAlive(owner)) {
          throw new DataDirLockedError(
            `Data directory ${resolve(dataDir)} is in use by process ${owner} (lock file ${path})`,
          );
        }
        unlinkSync(path); // stale: its owner is gone
      }
    }
    throw new DataDirLockedError(`Could not lock data directory ${resolve(dataDir)}`);
  }

  release(): void {
    try {
      if (existsSync(this.path) && readFileSync(this.path, 'utf8').trim() === String(process.pid))
        unlinkSync(this.path);
    } catch {
      /* already gone */
    }
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export interface EmbeddedPostgresOptions {
  /** A directory, or `memory://` for a throw-away database. */
  dataDir: string;
  /** Socket connections accepted; keep headroom above the pool size for tools. */
  maxConnections?: number;
}

/**
 * PGlite (PostgreSQL compiled to WASM) served over a loopback socket so that the app's own `pg` driver and TypeORM
 * talk to it exactly as to a real server. One backend session: everything is serialised, use a pool of one.
 */
export class EmbeddedPostgres {
  private stopping?: Promise<void>;

  private constructor(
    private readonly db: PGlite,
    private readonly server: PGLiteSocketServer,
    private readonly lock: DataDirLock | undefined,
    readonly url: string,
  ) {}

  static async start(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
    const inMemory = options.dataDir.startsWith('memory://');
    const lock = inMemory ? undefined : DataDirLock.acquire(options.dataDir);
    try {
      if (!inMemory) mkdirSync(options.dataDir, { recursive: true });
      const { PGlite } = await import('@electric-sql/pglite');
      const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket');
      const db = await PGlite.create({ dataDir: inMemory ? options.dataDir : resolve(options.dataDir) });
      const server = new PGLiteSocketServer({
        db,
        host: '127.0.0.1',
        port: 0,
        maxConnections: options.maxConnections ?? 8,
      });
      await server.start();
      const url = `postgres://postgres:postgres@${server.getServerConn()}/postgres`;
      return new EmbeddedPostgres(db, server, lock, url);
    } catch (err) {
      lock?.release();
      throw err;
    }
  }

  /** Stop accepting connections, then close the database (flushing it). Safe to call more than once. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      try {
        await this.server.stop();
      } finally {
        try {
          await this.db.close();
        } finally {
          this.lock?.release();
        }
      }
    })();
    return this.stopping;
  }
}
