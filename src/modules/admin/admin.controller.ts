import { Controller, Get } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { Access } from '../../common/auth/principal';
import { InvariantsReport, InvariantsService } from './invariants.service';

@ApiTags('admin')
@ApiBearerAuth()
@Controller('admin/v1')
@Access('admin')
export class AdminController {
  constructor(private readonly invariants: InvariantsService) {}

  /** Recomputes counters, job facts and run status from the raw rows; lists every mismatch (empty when all hold). */
  @Get('invariants')
  check(): Promise<InvariantsReport> {
    return this.invariants.check();
  }
}
