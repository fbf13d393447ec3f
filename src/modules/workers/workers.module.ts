import { Module } from '@nestjs/common';
import { LifecycleModule } from '../lifecycle/lifecycle.module';
import { WorkerHeartbeatsController } from './worker-heartbeats.controller';
import { WorkersController } from './workers.controller';

/** The internal API workers call: its controller and DTOs; every transition is the lifecycle module's. */
@Module({
  imports: [LifecycleModule],
  controllers: [WorkersController, WorkerHeartbeatsController],
})
export class WorkersModule {}
