import { Global, Module } from '@nestjs/common';
import { BackgroundLoopsService } from './background-loops.service';

/** The scheduler of background loops: modules register their bounded passes; one instance runs them. */
@Global()
@Module({ providers: [BackgroundLoopsService], exports: [BackgroundLoopsService] })
export class LoopsModule {}
