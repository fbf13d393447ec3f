import request from 'supertest';
import type TestAgent from 'supertest/lib/agent';
import type { Instances } from './instances';
import type { TestApp, TestUser } from './test-app';

/**
 * A supertest agent that sends each request to the next running instance, round-robin: the test support written for
 * one in-process app (factories, workers, the workload) then runs against several instances unchanged.
 */
export function spreadOver(instances: Instances): Pick<TestApp, 'http'> {
  let turn = 0;
  const next = () => {
    for (let k = 0; k < instances.size; k++) {
      const url = instances.url(turn++ % instances.size);
      if (url) return request(url);
    }
    throw new Error('no instance is running');
  };
  const http = {
    get: (path: string) => next().get(path),
    post: (path: string) => next().post(path),
    put: (path: string) => next().put(path),
    patch: (path: string) => next().patch(path),
    delete: (path: string) => next().delete(path),
    head: (path: string) => next().head(path),
  };
  return { http: http as unknown as TestAgent };
}

export const tokenUser = (u: { id: string; name: string; token: string }): TestUser => ({
  ...u,
  auth: { Authorization: `Bearer ${u.token}` },
});
