import { Module } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { LoggerModule } from 'nestjs-pino';
import type { DestinationStream } from 'pino';
import { Env } from '../../config/env';
import { prettyLogs, prettyLogStream } from './pretty-stream';

/**
 * Structured JSON logs (pino), or readable lines on a terminal (LOG_FORMAT). Each request's lines carry its id (the
 * HTTP adapter's: X-Request-Id when sane).
 */
@Module({
  imports: [
    LoggerModule.forRootAsync({
      inject: [Env],
      useFactory: (env: Env) => {
        const options = {
          level: env.LOG_LEVEL,
          redact: ['req.headers.authorization', 'req.headers.cookie'],
          customLogLevel: (_req: IncomingMessage, res: ServerResponse, err?: Error) =>
            err || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'info' : 'debug',
          serializers: {
            req: (req: { id: string; method: string; url: string }) => ({
              id: req.id,
              method: req.method,
              url: req.url,
            }),
          },
        };
        // On a terminal, lines a person reads; JSON lines for pipes and log collectors (LOG_FORMAT chooses).
        return {
          pinoHttp: prettyLogs(env.LOG_FORMAT, !!process.stdout.isTTY)
            ? ([options, prettyLogStream(process.stdout)] as [typeof options, DestinationStream])
            : options,
        };
      },
    }),
  ],
})
export class LoggingModule {}
