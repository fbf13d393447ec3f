import type { INestApplication } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { SwaggerModule } from '@nestjs/swagger';
import { Logger } from 'nestjs-pino';
import { buildOpenApiDocument } from './common/openapi/document';
import { ApiExceptionFilter } from './common/errors/api-exception.filter';
import { registerBodyParsers } from './common/http/body-parsers';
import { BodylessRoutesGuard } from './common/http/bodyless-routes.guard';
import { compressJson } from './common/http/compress-json';
import { pathTextGuard } from './common/http/raw-request';
import { consoleMiddleware } from './infra/console/console-static';
import { apiValidationPipe } from './common/validation/validation.pipe';
import { timeHttpRequests } from './infra/metrics/http-metrics.hooks';
import { MetricsService } from './infra/metrics/metrics.service';
import { MAX_CHUNK_BYTES } from './modules/logs/dto/log-streams';

/**
 * Everything main.ts and the e2e tests both need, so tests exercise the app exactly as served. The app is created
 * over createHttpAdapter() (common/http/http-adapter.ts) with `bodyParser: false`: the body parsers are these.
 */
export function configureApp(app: NestFastifyApplication): INestApplication {
  app.useLogger(app.get(Logger));
  const fastify = app.getHttpAdapter().getInstance();
  timeHttpRequests(fastify, app.get(MetricsService));
  app.use(pathTextGuard());
  app.use(compressJson());
  app.use(consoleMiddleware());
  registerBodyParsers(fastify, MAX_CHUNK_BYTES);
  app.useGlobalPipes(apiValidationPipe());
  app.useGlobalGuards(new BodylessRoutesGuard());
  // Also what fails before a route's handler runs (a body that cannot be parsed, a middleware's refusal): Nest
  // hands Fastify's errors to the same filters.
  app.useGlobalFilters(new ApiExceptionFilter());
  // Above the adapter's keep-alive timeout (65 s), as Node wants it.
  app.getHttpServer().headersTimeout = 66_000;
  SwaggerModule.setup('docs', app, () => buildOpenApiDocument(app));
  return app;
}
