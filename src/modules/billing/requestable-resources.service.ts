import { Injectable } from '@nestjs/common';
import { DomainError } from '../../common/errors/domain-error';
import { BillingRepository, RequestableRow } from './billing.repository';

/**
 * How long a process trusts its copy of requestable_resources (with, per key, whether its resource has a rate).
 * Migrations are the table's only writer and run before an instance serves; the instance that adds a rate drops its
 * copy at once. A request that would be refused for what a newer copy could allow (an unknown key, a missing rate)
 * reads the table again first when the copy is older than REFRESH_MS, so a key a migration run by another instance
 * added, or a rate another instance set, is honoured within about a second, and a stream of bad requests costs at
 * most one read of the table per REFRESH_MS.
 */
const TTL_MS = 10_000;
const REFRESH_MS = 1_000;

/** The most field problems one refused request lists (a 10,000-job request could have one per job and key). */
const MAX_PROBLEMS = 100;

interface Key {
  row: RequestableRow;
  min: number;
  max: number;
  step: string;
}

interface Table {
  keys: Map<string, Key>;
  required: string[];
  known: string;
}

interface Problem {
  field: string;
  message: string;
  /** An unknown key or a missing rate: the answer may change once the table is read again. */
  stale?: boolean;
}

function toTable(rows: RequestableRow[]): Table {
  const keys = new Map<string, Key>();
  for (const row of rows) {
    keys.set(row.specKey, {
      row,
      min: Number(row.minQuantity),
      max: Number(row.maxQuantity),
      step: row.scale === 0 ? '1' : `0.${'0'.repeat(row.scale - 1)}1`,
    });
  }
  return {
    keys,
    required: rows.filter((r) => r.required).map((r) => r.specKey),
    known: rows.map((r) => r.specKey).join(', '),
  };
}

/** What is wrong with one requested quantity, judged on its value against the key's row (null: nothing). */
function quantityProblem(key: Key, value: unknown): string | null {
  if (typeof value !== 'number' || !Number.isFinite(value)) return 'must be a number';
  const { scale } = key.row;
  // Within toFixed's range the double nearest a `scale`-place decimal is the one its text parses back to.
  if (Math.abs(value) >= 1e21 || Number(value.toFixed(scale)) !== value) {
    return scale === 0
      ? 'must be an integer number'
      : `must be a number with at most ${scale} decimal places (a multiple of ${key.step})`;
  }
  if (value < key.min) return `must not be less than ${key.min}`;
  if (value > key.max) return `must not be greater than ${key.max}`;
  return null;
}

/**
 * The keys a job spec's `resources` may carry (requestable_resources, cached per process) and the check of every
 * submitted spec against them: exactly the table's keys, the required ones present, each quantity a number within
 * its bounds and decimals, and a quantity above 0 only for a resource that has a rate (nothing runs unbilled).
 */
@Injectable()
export class RequestableResourcesService {
  private cached: { at: number; table: Table } | null = null;
  private loading: Promise<Table> | null = null;
  private generation = 0;

  constructor(private readonly billing: BillingRepository) {}

  /** Forget the copy (a rate was added here): the next check reads the table again. */
  invalidate(): void {
    this.generation++;
    this.cached = null;
    this.loading = null;
  }

  private table(maxAgeMs: number): Promise<Table> {
    if (this.cached && Date.now() - this.cached.at < maxAgeMs) return Promise.resolve(this.cached.table);
    if (!this.loading) {
      const generation = this.generation;
      const at = Date.now();
      const loading = this.billing
        .requestableResources()
        .then((rows) => {
          const table = toTable(rows);
          if (generation === this.generation) this.cached = { at, table };
          return table;
        })
        .finally(() => {
          if (this.loading === loading) this.loading = null;
        });
      this.loading = loading;
    }
    return this.loading;
  }

  /**
   * Refuses (400 VALIDATION_FAILED naming `jobs[i].spec.resources.<key>`) any spec whose resources break the table.
   * `specs[i]` is the request's i-th job entry's spec.
   */
  async check(specs: readonly { resources: Record<string, unknown> }[]): Promise<void> {
    let problems = this.problems(specs, await this.table(TTL_MS));
    if (problems.some((p) => p.stale)) problems = this.problems(specs, await this.table(REFRESH_MS));
    if (problems.length === 0) return;
    const shown = problems.slice(0, MAX_PROBLEMS).map(({ field, message }) => ({ field, message }));
    const more = problems.length > shown.length ? `; and ${problems.length - shown.length} more` : '';
    throw new DomainError('VALIDATION_FAILED', shown.map((p) => `${p.field} ${p.message}`).join('; ') + more, shown);
  }

  private problems(specs: readonly { resources: Record<string, unknown> }[], table: Table): Problem[] {
    const problems: Problem[] = [];
    specs.forEach((spec, i) => {
      const at = (key: string) => `jobs[${i}].spec.resources.${key}`;
      for (const key of table.required) {
        if (!Object.hasOwn(spec.resources, key)) problems.push({ field: at(key), message: 'is required' });
      }
      for (const [key, value] of Object.entries(spec.resources)) {
        const known = table.keys.get(key);
        if (!known) {
          problems.push({ field: at(key), message: `should not exist (requestable: ${table.known})`, stale: true });
          continue;
        }
        const problem = quantityProblem(known, value);
        if (problem) problems.push({ field: at(key), message: problem });
        else if ((value as number) > 0 && !known.row.rated) {
          problems.push({
            field: at(key),
            message: `has no rate yet: ${known.row.resourceName} is not billable until an admin sets its rate`,
            stale: true,
          });
        }
      }
    });
    return problems;
  }
}
