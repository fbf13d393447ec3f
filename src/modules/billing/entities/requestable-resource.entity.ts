import { Check, Column, Entity, PrimaryColumn, Unique } from 'typeorm';
import { numericToNumber } from '../../../infra/database/numeric.transformer';

/**
 * A key a job spec's `resources` may carry, what a request may say for it, and how it is billed: `factor` turns the
 * requested quantity into `resource_name`'s `unit` (memory_mib → memory GiB = × 1/1024). Filled by migrations only.
 */
@Entity('requestable_resources')
@Unique('uq_requestable_resources_resource_name', ['resourceName'])
@Check('ck_requestable_resources_spec_key', `spec_key ~ '^[a-z][a-z0-9_]{0,31}$'`)
@Check('ck_requestable_resources_resource_name', `resource_name ~ '^[a-z][a-z0-9_-]{0,31}$'`)
@Check('ck_requestable_resources_factor', 'factor > 0')
@Check('ck_requestable_resources_scale', 'scale >= 0 AND scale + min_scale(factor) <= 10')
@Check('ck_requestable_resources_bounds', 'min_quantity >= 0 AND max_quantity >= min_quantity')
@Check('ck_requestable_resources_max', 'max_quantity * factor < 10000000000')
export class RequestableResource {
  @PrimaryColumn({ type: 'varchar', length: 32, primaryKeyConstraintName: 'pk_requestable_resources' })
  specKey!: string;

  @Column({ type: 'varchar', length: 32 })
  resourceName!: string;

  @Column({ type: 'varchar', length: 32 })
  unit!: string;

  @Column({ type: 'numeric', precision: 20, scale: 10, transformer: numericToNumber })
  factor!: number;

  /** Decimal places a requested quantity may have. */
  @Column({ type: 'smallint' })
  scale!: number;

  @Column({ type: 'numeric', precision: 20, scale: 10, default: 0, transformer: numericToNumber })
  minQuantity!: number;

  @Column({ type: 'numeric', precision: 20, scale: 10, transformer: numericToNumber })
  maxQuantity!: number;

  @Column({ type: 'boolean', default: false })
  required!: boolean;
}
