import { randomInt } from 'node:crypto';
import type { EntityManager } from 'typeorm';

/**
 * How many rows each group's counters are spread over (the `token` column; the migration creates them all). Readers
 * sum that many rows per group; writers only ever wait for a transaction holding the same token. 16 lets every
 * transaction of a pool of 10 connections write on its own token, and instances sharing a database rarely meet.
 */
export const COUNTER_TOKENS = 16;

const tokens = new WeakMap<EntityManager, number>();
/** Where this process starts, so that instances do not all begin on token 0. */
let next = randomInt(COUNTER_TOKENS);

/**
 * The token a transaction writes its counter deltas on: one per transaction (its EntityManager), the next one in
 * turn for each new transaction of this process, so transactions running together here use different rows.
 */
export function counterToken(m: EntityManager): number {
  let token = tokens.get(m);
  if (token === undefined) {
    token = next;
    next = (next + 1) % COUNTER_TOKENS;
    tokens.set(m, token);
  }
  return token;
}
