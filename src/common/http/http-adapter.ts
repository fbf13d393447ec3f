import { FastifyAdapter } from '@nestjs/platform-fastify';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { domainErrorBody } from '../errors/api-exception.filter';
import { DomainError } from '../errors/domain-error';
import { answerClientError, unnamedPathError } from './raw-request';

/** The largest JSON body: a run submission or add-jobs request of 10,000 jobs with their specs fits. */
export const MAX_JSON_BODY_BYTES = 32 * 1024 * 1024;

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** A request's id: its X-Request-Id when sane, else a new one. */
function requestId(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

/**
 * The HTTP server under Nest: Fastify (its router and request handling cost a worker's report about 38 % less of the
 * server's CPU than Express did: README "Throughput"), set to answer as clients of this API expect. Every request
 * gets an id (X-Request-Id when sane), echoed back and carried by its log lines.
 */
export function createHttpAdapter(): FastifyAdapter {
  const adapter = new FastifyAdapter({
    bodyLimit: MAX_JSON_BODY_BYTES,
    routerOptions: {
      // `/runs/` is `/runs`, and a path's case does not matter to the router (parameters keep theirs).
      ignoreTrailingSlash: true,
      caseSensitive: false,
      // Run names, cursors and ids travel in paths; the router's default (100 characters) would answer them 404.
      maxParamLength: 2048,
    },
    // Idle keep-alive connections stay open 65 s, not Node's 5 s: longer than the idle timeout of what usually sits
    // in front (load balancers, 60 s), so the server never closes a connection just as a client reuses it (a reset:
    // the runs-list bench met one between two requests 5 s apart).
    keepAliveTimeout: 65_000,
    // A request must have arrived within 5 minutes (Node's own default, which Fastify would otherwise turn off): a
    // client trickling one in is answered 408.
    requestTimeout: 300_000,
    // While the app closes (SIGTERM: serve.ts drains), a request that still arrives on an open connection is served
    // as any other, not answered 503 (Fastify's default): clients of a draining instance meet refused connections,
    // which they try elsewhere, and never a 5xx (test/multi/rolling-restart.spec.ts).
    return503OnClosing: false,
    genReqId: requestId,
    requestIdHeader: false,
    // Requests Node's parser refuses are answered with the error shape (raw-request.ts).
    clientErrorHandler: answerClientError,
    // So are paths the router cannot decode: a segment that is not UTF-8 names no resource (404, as pathTextGuard).
    frameworkErrors: (error: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
      const refused =
        unnamedPathError(req.url) ??
        new DomainError('VALIDATION_FAILED', `the request cannot be routed: ${error.message}`, [
          { field: 'path', message: 'is malformed' },
        ]);
      void reply.status(refused.status).send(domainErrorBody(refused));
    },
  });
  // Before any middleware, so that answers the console or a refusal sends carry it too.
  adapter.getInstance().addHook('onRequest', (req, reply, done) => {
    reply.raw.setHeader('X-Request-Id', req.id);
    done();
  });
  return adapter;
}
