import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryRunner } from 'typeorm';
import { Env } from '../../config/env';
import { MetricsService } from '../metrics/metrics.service';

const LEADER_LOCK_KEY = 0x72706c70; // 'rplp'

export interface Loop {
  name: string;
  everyMs: number;
  pass: () => Promise<number>;
}

/**
 * Background loops (lapsed leases, sweeps of cancelled subtrees, clean-up, event retention), each pass bounded. With
 * several instances on one database, one runs them: the holder of a session advisory lock (released if it dies).
 */
@Injectable()
export class BackgroundLoopsService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(BackgroundLoopsService.name);
  private leaderRunner?: QueryRunner;
  private busy = new Set<string>();
  private stopped = false;

  private readonly loops: Loop[] = [];

  constructor(
    private readonly env: Env,
    private readonly scheduler: SchedulerRegistry,
    private readonly metrics: MetricsService,
    @InjectDataSource() private readonly dataSource: DataSource,
  ) {}

  /** Adds a loop (call from a module's onModuleInit: loops start at application bootstrap). */
  register(loop: Loop): void {
    if (this.loops.some((l) => l.name === loop.name)) throw new Error(`loop ${loop.name} registered twice`);
    this.loops.push(loop);
  }

  /** A registered loop by name (tests and the maintenance route run single passes). */
  loop(name: string): Loop {
    const found = this.loops.find((l) => l.name === name);
    if (!found) throw new Error(`no loop ${name}`);
    return found;
  }

  onApplicationBootstrap(): void {
    if (!this.env.RUNPLANE_BACKGROUND_LOOPS) return;
    for (const loop of this.loops) {
      this.scheduler.addInterval(
        `runplane:${loop.name}`,
        setInterval(() => void this.tick(loop), loop.everyMs),
      );
    }
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    for (const loop of this.loops)
      if (this.scheduler.doesExist('interval', `runplane:${loop.name}`))
        this.scheduler.deleteInterval(`runplane:${loop.name}`);
    while (this.busy.size > 0) await new Promise((r) => setTimeout(r, 20));
    await this.leaderRunner?.release().catch(() => undefined);
  }

  /** One pass of a loop, if this instance leads and the loop's previous pass has finished. */
  async tick(loop: Loop): Promise<number> {
    if (this.stopped || this.busy.has(loop.name) || !(await this.isLeader())) return 0;
    this.busy.add(loop.name);
    const end = this.metrics.loopDuration.startTimer({ loop: loop.name });
    try {
      const n = await loop.pass();
      this.metrics.loopRuns.inc({ loop: loop.name, outcome: 'ok' });
      this.metrics.loopItems.inc({ loop: loop.name }, n);
      return n;
    } catch (err) {
      this.metrics.loopRuns.inc({ loop: loop.name, outcome: 'error' });
      this.logger.error({ err, loop: loop.name }, 'background loop pass failed');
      return 0;
    } finally {
      end();
      this.busy.delete(loop.name);
    }
  }

  private async isLeader(): Promise<boolean> {
    // The embedded database is one process (its data directory is locked) and has one connection to spare: lead.
    if (!this.env.DATABASE_URL) return true;
    // The lock lives as long as its session: when that connection dies TypeORM releases the runner; compete again.
    if (this.leaderRunner && !this.leaderRunner.isReleased) return true;
    this.leaderRunner = undefined;
    const runner = this.dataSource.createQueryRunner();
    try {
      const [row] = await runner.query('SELECT pg_try_advisory_lock($1) AS locked', [LEADER_LOCK_KEY]);
      if (row.locked) {
        this.leaderRunner = runner; // keep the session: the lock lives as long as it does
        this.logger.log('this instance runs the background loops');
        return true;
      }
    } catch (err) {
      this.logger.warn({ err }, 'leader election failed');
    }
    await runner.release();
    return false;
  }
}
