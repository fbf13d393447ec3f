import { Controller, Get, ServiceUnavailableException } from '@nestjs/common';
import {
  HealthCheck,
  HealthCheckResult,
  HealthCheckService,
  HealthIndicatorService,
  TypeOrmHealthIndicator,
} from '@nestjs/terminus';
import { InjectDataSource } from '@nestjs/typeorm';
import { ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { DataSource } from 'typeorm';
import { Access } from '../../common/auth/principal';
import { ApiErrors } from '../../common/openapi/api-docs';
import { DomainError } from '../../common/errors/domain-error';
import { pendingMigrations } from '../database/migrations-runner';

/** Each readiness check answers within this, so a database that hangs makes /readyz say 503, not hang too. */
const CHECK_TIMEOUT_MS = 2000;

@ApiTags('operations')
@Controller()
@Access('public')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly db: TypeOrmHealthIndicator,
    private readonly indicators: HealthIndicatorService,
    @InjectDataSource() private readonly dataSource: DataSource,
  ) {}

  /** Liveness: the process is up and serving HTTP. */
  @Get('healthz')
  @ApiOkResponse({
    schema: {
      type: 'object',
      required: ['status'],
      additionalProperties: false,
      properties: { status: { type: 'string', enum: ['ok'] } },
    },
  })
  healthz(): { status: 'ok' } {
    return { status: 'ok' };
  }

  /**
   * Readiness: the database answers and every migration is applied. Otherwise 503 in the API's error shape with
   * Retry-After: DATABASE_UNAVAILABLE when the database does not answer, SERVICE_UNAVAILABLE when migrations are
   * pending; `details` lists the failed checks.
   */
  @Get('readyz')
  @ApiErrors(503)
  @HealthCheck()
  async readyz(): Promise<HealthCheckResult> {
    try {
      return await this.health.check([
        () => this.db.pingCheck('database', { timeout: CHECK_TIMEOUT_MS }),
        () => this.migrationsCheck(),
      ]);
    } catch (err) {
      if (!(err instanceof ServiceUnavailableException)) throw err;
      const failed = (err.getResponse() as HealthCheckResult).error ?? {};
      const details = Object.entries(failed).map(([check, state]) => ({ check, ...state }));
      if ('database' in failed)
        throw new DomainError('DATABASE_UNAVAILABLE', 'not ready: the database does not answer', details);
      const pending = (failed.migrations as { pending?: string[] } | undefined)?.pending;
      throw new DomainError(
        'SERVICE_UNAVAILABLE',
        pending ? 'not ready: migrations are pending' : 'not ready: the migrations could not be read',
        details,
      );
    }
  }

  private async migrationsCheck() {
    const indicator = this.indicators.check('migrations');
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timeout of ${CHECK_TIMEOUT_MS}ms exceeded`)), CHECK_TIMEOUT_MS);
    });
    try {
      const pending = await Promise.race([pendingMigrations(this.dataSource), timedOut]);
      return pending.length === 0 ? indicator.up() : indicator.down({ pending });
    } catch (err) {
      // The database check says why; this one only must not turn a database outage into a 500 or a hang.
      return indicator.down({ message: err instanceof Error ? err.message : String(err) });
    } finally {
      clearTimeout(timer);
    }
  }
}
