import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import type { Request, Response } from 'express';
import { Observable } from 'rxjs';
import { MetricsService } from './metrics.service';

/** Times every handled request, labelled by route pattern (not path, which would explode cardinality). */
@Injectable()
export class HttpMetricsInterceptor implements NestInterceptor {
  constructor(private readonly metrics: MetricsService) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const http = context.switchToHttp();
    const req = http.getRequest<Request>();
    const res = http.getResponse<Response>();
    const end = this.metrics.httpRequests.startTimer({ method: req.method });
    res.once('finish', () => end({ route: (req.route as { path?: string } | undefined)?.path ?? 'unmatched', status: String(res.statusCode) }));
    return next.handle();
  }
}
