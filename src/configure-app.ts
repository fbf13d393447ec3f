import type { INestApplication } from '@nestjs/common';
import type { Server } from 'node:http';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { Logger } from 'nestjs-pino';
import { ApiExceptionFilter } from './common/errors/api-exception.filter';
import { BodylessRoutesInterceptor } from './common/http/bodyless-routes.interceptor';
import { answerClientErrors, bodyParserErrors, pathTextGuard } from './common/http/raw-request';
import { apiValidationPipe } from './common/validation/validation.pipe';
import { ReadRetryInterceptor } from './infra/database/read-retry';
import { httpMetricsMiddleware } from './infra/metrics/http-metrics.middleware';
import { MetricsService } from './infra/metrics/metrics.service';

/** Everything main.ts and the e2e tests both need, so tests exercise the app exactly as served. */
export function configureApp(app: NestExpressApplication): INestApplication {
  app.useLogger(app.get(Logger));
  app.use(httpMetricsMiddleware(app.get(MetricsService)));
  app.use(pathTextGuard());
  app.useBodyParser('json', { limit: '32mb' });
  // Registered here (Nest would add the same parser at init, after this) so its errors are shaped below too.
  app.useBodyParser('urlencoded', { extended: true });
  app.use(bodyParserErrors());
  app.useGlobalPipes(apiValidationPipe());
  app.useGlobalInterceptors(new BodylessRoutesInterceptor());
  app.useGlobalFilters(new ApiExceptionFilter());
  app.useGlobalInterceptors(new ReadRetryInterceptor());
  app.set('etag', false);
  app.set('x-powered-by', false);
  // Idle keep-alive connections stay open 65 s, not Node's 5 s: longer than the idle timeout of what usually sits in
  // front (load balancers, 60 s), so the server never closes a connection just as a client reuses it (a reset: the
  // runs-list bench met one between two requests 5 s apart).
  const server = app.getHttpServer() as Server;
  answerClientErrors(server);
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  const doc = new DocumentBuilder()
    .setTitle('runplane')
    .setDescription(
      'Control plane of a batch-compute service: runs of jobs, retried as submissions, nested job groups ' +
        'cancelled as a unit, compute billed per second. Errors are `{status_code, code, message, details}`; lists are ' +
        'keyset-paginated with `limit` (≤100) and an opaque `cursor`; creating POSTs accept `Idempotency-Key`. ' +
        'Run views carry `job_counts` by status and at most `jobs_limit` jobs (`jobs_truncated` when cut; every job: ' +
        '`GET .../job-groups/0/jobs?recursive=true`); every response is bounded by its parameters (README, "Limits").',
    )
    .setVersion('1')
    .addBearerAuth()
    .build();
  SwaggerModule.setup('docs', app, () => SwaggerModule.createDocument(app, doc));
  return app;
}
