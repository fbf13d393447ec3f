import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckResult, HealthCheckService, HealthIndicatorService, TypeOrmHealthIndicator } from '@nestjs/terminus';
import { InjectDataSource } from '@nestjs/typeorm';
import { ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { DataSource } from 'typeorm';
import { Access } from '../../common/auth/principal';
import { pendingMigrations } from '../database/migrations-runner';

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
  @ApiOkResponse({ schema: { type: 'object', required: ['status'], additionalProperties: false, properties: { status: { type: 'string', enum: ['ok'] } } } })
  healthz(): { status: 'ok' } {
    return { status: 'ok' };
  }

  /** Readiness: the database answers and every migration is applied. 503 otherwise. */
  @Get('readyz')
  @HealthCheck()
  readyz(): Promise<HealthCheckResult> {
    return this.health.check([
      () => this.db.pingCheck('database', { timeout: 3000 }),
      async () => {
        const indicator = this.indicators.check('migrations');
        const pending = await pendingMigrations(this.dataSource);
        return pending.length === 0 ? indicator.up() : indicator.down({ pending });
      },
    ]);
  }
}
