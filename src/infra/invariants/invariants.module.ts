import { Global, Module } from '@nestjs/common';
import { InvariantsRegistry } from './invariants.registry';

@Global()
@Module({ providers: [InvariantsRegistry], exports: [InvariantsRegistry] })
export class InvariantsModule {}
