import { MetadataScanner, ModulesContainer, Reflector } from '@nestjs/core';
import { PATH_METADATA } from '@nestjs/common/constants';
import { ACCESS_KEY } from '../../src/common/auth/principal';
import { createTestApp, TestApp } from '../support/test-app';

describe('route guards', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('every route declares an access level', () => {
    const controllers = [...t.app.get(ModulesContainer).values()].flatMap((m) => [...m.controllers.values()]);
    const scanner = new MetadataScanner();
    const reflector = t.app.get(Reflector);
    const routes: string[] = [];
    const missing: string[] = [];
    for (const wrapper of controllers) {
      const instance = wrapper.instance as object | undefined;
      if (!instance || !wrapper.metatype) continue;
      const proto = Object.getPrototypeOf(instance);
      for (const method of scanner.getAllMethodNames(proto)) {
        const handler = proto[method];
        if (Reflect.getMetadata(PATH_METADATA, handler) === undefined) continue;
        const name = `${wrapper.metatype.name}.${method}`;
        routes.push(name);
        if (!reflector.getAllAndOverride(ACCESS_KEY, [handler, wrapper.metatype])) missing.push(name);
      }
    }
    expect(routes.length).toBeGreaterThan(5);
    expect(missing).toEqual([]);
  });
});
