import type { INestApplication } from '@nestjs/common';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { Logger } from 'nestjs-pino';
import { ApiExceptionFilter } from './common/errors/api-exception.filter';
import { apiValidationPipe } from './common/validation/validation.pipe';

/** Everything main.ts and the e2e tests both need, so tests exercise the app exactly as served. */
export function configureApp(app: NestExpressApplication): INestApplication {
  app.useLogger(app.get(Logger));
  app.useBodyParser('json', { limit: '32mb' });
  app.useGlobalPipes(apiValidationPipe());
  app.useGlobalFilters(new ApiExceptionFilter());
  app.set('etag', false);
  app.set('x-powered-by', false);
  const doc = new DocumentBuilder()
    .setTitle('runplane')
    .setDescription(
      'Control plane of a batch-compute service: runs of jobs, retried as submissions, nested job groups ' +
        'cancelled as a unit, compute billed per second. Errors are `{status_code, code, message, details}`; lists are ' +
        'keyset-paginated with `limit` (≤100) and an opaque `cursor`; creating POSTs accept `Idempotency-Key`.',
    )
    .setVersion('1')
    .addBearerAuth()
    .build();
  SwaggerModule.setup('docs', app, () => SwaggerModule.createDocument(app, doc));
  return app;
}
