import { Module } from '@nestjs/common';
import { LifecycleModule } from '../lifecycle/lifecycle.module';
import { WorkersController } from './workers.controller';

/** The internal API workers call: its controller and DTOs; every transition is the lifecycle module's. */
@Module({
  imports: [LifecycleModule],
  controllers: [WorkersController],
})
export class WorkersModule {}
