import { Global, Module } from '@nestjs/common';
import { Env, parseEnv } from './env';

/** Provides the validated environment as the injectable `Env`. */
@Global()
@Module({ providers: [{ provide: Env, useFactory: () => parseEnv(process.env) }], exports: [Env] })
export class ConfigModule {}
