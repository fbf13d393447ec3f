import { Injectable } from '@nestjs/common';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** The process's Prometheus registry and the metrics every module shares. */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();

  readonly httpRequests = new Histogram({
    name: 'runplane_http_request_duration_seconds',
    help: 'HTTP requests by method, route and status',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly loopRuns = new Counter({
    name: 'runplane_background_loop_runs_total',
    help: 'Background loop passes by loop and outcome',
    labelNames: ['loop', 'outcome'],
    registers: [this.registry],
  });

  readonly loopItems = new Counter({
    name: 'runplane_background_loop_items_total',
    help: 'Rows handled by background loops',
    labelNames: ['loop'],
    registers: [this.registry],
  });

  readonly loopDuration = new Histogram({
    name: 'runplane_background_loop_duration_seconds',
    help: 'Background loop pass duration',
    labelNames: ['loop'],
    buckets: [0.001, 0.01, 0.05, 0.1, 0.5, 1, 5],
    registers: [this.registry],
  });

  readonly loopsLeader = new Gauge({
    name: 'runplane_background_loops_leader',
    help: '1 while this instance runs the background loops (holds the leader lock), else 0',
    registers: [this.registry],
  });

  readonly loopsLeaderSince = new Gauge({
    name: 'runplane_background_loops_leader_since_seconds',
    help: 'Unix time at which this instance last became the background loops leader',
    registers: [this.registry],
  });

  readonly loopsLeadershipAcquired = new Counter({
    name: 'runplane_background_loops_leadership_acquired_total',
    help: 'Times this instance became the background loops leader',
    registers: [this.registry],
  });

  readonly transactionRetries = new Counter({
    name: 'runplane_transaction_retries_total',
    help: 'Transactions retried after a deadlock or serialization failure',
    labelNames: ['sqlstate'],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }
}
