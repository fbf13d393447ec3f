import { ServerTransitionsService } from '../../src/modules/lifecycle/server-transitions.service';
import { createTestApp, describeRealPostgres, TestApp, TestUser } from '../support/test-app';
import { makeProject } from '../support/factories';
import { randomisedWorkload, type WorkloadHooks } from '../support/workload';
import { reportBatchSizes } from '../support/workers';

describeRealPostgres('randomised concurrent workload (real PostgreSQL)', () => {
  let t: TestApp;
  let owner: TestUser;
  let service: TestUser;
  let admin: TestUser;
  let project: string;
  beforeAll(async () => {
    t = await createTestApp({}, { ownDatabase: 'workload' });
    owner = await t.user();
    service = await t.user('service');
    admin = await t.user('admin');
    project = (await makeProject(t, owner)).name;
  });
  afterAll(() => t.close());

  /** Abandoned claims lapse at once; the server's own passes run between the workload's steps. */
  const hooks = (): WorkloadHooks => {
    const lifecycle = t.app.get(ServerTransitionsService);
    return {
      lapse: async (id) => {
        await t.dataSource.query(
          `UPDATE job_submissions SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
          [id],
        );
      },
      passes: async (final) => {
        await lifecycle.expireLapsedLeases(final ? 500 : 50);
        await lifecycle.sweepCancelled(final ? 100 : 20, final ? 1000 : 100);
      },
    };
  };

  it('ends with zero invariant mismatches and no submission run twice', async () => {
    await randomisedWorkload(t, { owner, service, admin, project }, hooks());
    const deadlocks = await t.http.get('/metrics').expect(200);
    expect(deadlocks.text).not.toMatch(/runplane_http_request_duration_seconds_count\{[^}]*status="500"/);
  });

  it('with batched reports (POST /internal/v1/submissions/reports): the same, zero mismatches', async () => {
    await randomisedWorkload(t, { owner, service, admin, project }, hooks(), { batched: true });
    // Reports due together went together.
    expect(Math.max(...reportBatchSizes)).toBeGreaterThan(1);
    const metrics = await t.http.get('/metrics').expect(200);
    expect(metrics.text).toMatch(
      /runplane_http_request_duration_seconds_count\{[^}]*route="\/internal\/v1\/submissions\/reports"/,
    );
    expect(metrics.text).not.toMatch(/runplane_http_request_duration_seconds_count\{[^}]*status="500"/);
  });
});
