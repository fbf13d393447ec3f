import type { INestApplication } from '@nestjs/common';
import type { Server } from 'node:http';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { SwaggerModule } from '@nestjs/swagger';
import { Logger } from 'nestjs-pino';
import { buildOpenApiDocument } from './common/openapi/document';
import { ApiExceptionFilter } from './common/errors/api-exception.filter';
import { BodylessRoutesGuard } from './common/http/bodyless-routes.guard';
import { compressJson } from './common/http/compress-json';
import { answerClientErrors, bodyParserErrors, pathTextGuard } from './common/http/raw-request';
import { consoleMiddleware } from './infra/console/console-static';
import { apiValidationPipe } from './common/validation/validation.pipe';
import { httpMetricsMiddleware } from './infra/metrics/http-metrics.middleware';
import { MetricsService } from './infra/metrics/metrics.service';
import { MAX_CHUNK_BYTES } from './modules/logs/dto/log-streams';

/** Everything main.ts and the e2e tests both need, so tests exercise the app exactly as served. */
export function configureApp(app: NestExpressApplication): INestApplication {
  app.useLogger(app.get(Logger));
  app.use(httpMetricsMiddleware(app.get(MetricsService)));
  app.use(pathTextGuard());
  app.use(compressJson());
  app.use(consoleMiddleware());
  app.useBodyParser('json', { limit: '32mb' });
  // Log chunks as bytes (POST /internal/v1/submissions/{id}/logs/{stream}): no text encoding or JSON to undo.
  app.useBodyParser('raw', { type: 'application/octet-stream', limit: MAX_CHUNK_BYTES });
  // Registered here (Nest would add the same parser at init, after this) so its errors are shaped below too.
  app.useBodyParser('urlencoded', { extended: true });
  app.use(bodyParserErrors());
  app.useGlobalPipes(apiValidationPipe());
  app.useGlobalGuards(new BodylessRoutesGuard());
  app.useGlobalFilters(new ApiExceptionFilter());
  app.set('etag', false);
  app.set('x-powered-by', false);
  // Idle keep-alive connections stay open 65 s, not Node's 5 s: longer than the idle timeout of what usually sits in
  // front (load balancers, 60 s), so the server never closes a connection just as a client reuses it (a reset: the
  // runs-list bench met one between two requests 5 s apart).
  const server = app.getHttpServer() as Server;
  answerClientErrors(server);
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  SwaggerModule.setup('docs', app, () => buildOpenApiDocument(app));
  return app;
}
