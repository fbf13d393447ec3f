import { Module } from '@nestjs/common';
import { AdminController } from './admin.controller';
import { InvariantsService } from './invariants.service';
import { MaintenanceService } from './maintenance.service';

/** Admin operations: the invariants report and on-demand clean-up, gathered from what modules registered. */
@Module({
  controllers: [AdminController],
  providers: [InvariantsService, MaintenanceService],
})
export class AdminModule {}
