import { Controller, Get, HttpCode, Post, UseInterceptors } from '@nestjs/common';
import { ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ApiAuthenticated, ApiErrors } from '../../common/openapi/api-docs';
import { Access } from '../../common/auth/principal';
import { InvariantsReport, InvariantsService } from './invariants.service';
import { CleanupReport, MaintenanceService } from './maintenance.service';
import { ReadRetryInterceptor } from '../../infra/database/read-retry';

@ApiTags('admin')
@ApiAuthenticated()
@UseInterceptors(ReadRetryInterceptor)
@Controller('admin/v1')
@Access('admin')
export class AdminController {
  constructor(
    private readonly invariants: InvariantsService,
    private readonly maintenance: MaintenanceService,
  ) {}

  /** Bounded clean-up passes (lapsed leases, cancelled queues, old idempotency keys, billing shards, old events). */
  @Post('maintenance/cleanup')
  @ApiOkResponse({ type: CleanupReport })
  @ApiErrors(400, 413)
  @HttpCode(200)
  cleanup(): Promise<CleanupReport> {
    return this.maintenance.cleanup();
  }

  /** Recomputes counters, job facts and run status from the raw rows; lists every mismatch (empty when all hold). */
  @Get('invariants')
  @ApiOkResponse({ type: InvariantsReport })
  check(): Promise<InvariantsReport> {
    return this.invariants.check();
  }
}
