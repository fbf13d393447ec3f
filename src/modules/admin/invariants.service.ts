import { Injectable } from '@nestjs/common';
import { ApiProperty } from '@nestjs/swagger';
import { InvariantsRegistry } from '../../infra/invariants/invariants.registry';

export class InvariantMismatch {
  @ApiProperty()
  invariant!: string;

  @ApiProperty()
  detail!: string;
}

export class InvariantsReport {
  @ApiProperty({ format: 'date-time' })
  checked_at!: string;

  @ApiProperty({ description: 'No mismatch.' })
  ok!: boolean;

  @ApiProperty({ type: () => InvariantMismatch, isArray: true, maxItems: 1000 })
  mismatches!: InvariantMismatch[];
}

const MAX_REPORTED = 1000;

/** Runs every invariant the modules registered, one after another, and gathers their mismatches. */
@Injectable()
export class InvariantsService {
  constructor(private readonly registry: InvariantsRegistry) {}

  async check(): Promise<InvariantsReport> {
    const checkedAt = new Date().toISOString();
    const mismatches: InvariantMismatch[] = [];
    for (const { name, check } of this.registry.all()) {
      if (mismatches.length >= MAX_REPORTED) break;
      for (const detail of await check(MAX_REPORTED - mismatches.length)) mismatches.push({ invariant: name, detail });
    }
    return { checked_at: checkedAt, ok: mismatches.length === 0, mismatches: mismatches.slice(0, MAX_REPORTED) };
  }
}
