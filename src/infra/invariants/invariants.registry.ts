import { Injectable } from '@nestjs/common';

/** One invariant a module keeps: `check` recomputes it from raw rows and lists mismatches (at most `limit`). */
export interface InvariantCheck {
  name: string;
  check: (limit: number) => Promise<string[]>;
}

/**
 * Where modules register the invariants they keep (each checks its own rows, from the facts other modules hand it);
 * the admin report only runs them and gathers the answers.
 */
@Injectable()
export class InvariantsRegistry {
  private readonly checks: InvariantCheck[] = [];

  register(check: InvariantCheck): void {
    if (this.checks.some((c) => c.name === check.name)) throw new Error(`invariant ${check.name} registered twice`);
    this.checks.push(check);
  }

  all(): readonly InvariantCheck[] {
    return this.checks;
  }
}
