import type { EntityManager } from 'typeorm';

/** Work to do once a transaction has committed, by the manager it ran on (TransactionRunner runs it). */
const hooks = new WeakMap<EntityManager, (() => void)[]>();

/**
 * Runs `hook` after the transaction of `m` commits (never after a rollback; a retried transaction registers again),
 * in registration order, before TransactionRunner.run returns. Only transactions run by TransactionRunner run their
 * hooks; elsewhere a hook is dropped, and a process may die between a commit and its hooks, so use it for what may
 * be late or lost (waking followers who also poll, settling a status a loop also settles), never for what must
 * happen.
 */
export function afterCommit(m: EntityManager, hook: () => void): void {
  const list = hooks.get(m);
  if (list) list.push(hook);
  else hooks.set(m, [hook]);
}

/** The hooks registered on `m`, removed. */
export function takeAfterCommit(m: EntityManager): (() => void)[] {
  const list = hooks.get(m) ?? [];
  hooks.delete(m);
  return list;
}
