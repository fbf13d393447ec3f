import { Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { IdempotencyKeyRecord } from './idempotency-key.entity';
import { IdempotencyService } from './idempotency.service';

@Global()
@Module({ imports: [TypeOrmModule.forFeature([IdempotencyKeyRecord])], providers: [IdempotencyService], exports: [IdempotencyService] })
export class IdempotencyModule {}
