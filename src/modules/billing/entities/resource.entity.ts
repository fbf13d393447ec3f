import { Check, Column, Entity, PrimaryGeneratedColumn, Unique } from 'typeorm';
import { numericToNumber } from '../../../infra/database/numeric.transformer';

/** One version of a resource's rate. A price change inserts a new version; usage keeps the version it was pinned to. */
@Entity('resources')
@Unique('uq_resources_name_version', ['name', 'version'])
@Check('ck_resources_rate', 'rate_usd_per_unit_hour >= 0')
@Check('ck_resources_version', 'version > 0')
export class Resource {
  @PrimaryGeneratedColumn({ type: 'integer', primaryKeyConstraintName: 'pk_resources' })
  id!: number;

  @Column({ type: 'varchar', length: 32 })
  name!: string;

  @Column({ type: 'varchar', length: 32 })
  unit!: string;

  @Column({ type: 'numeric', precision: 20, scale: 10, transformer: numericToNumber })
  rateUsdPerUnitHour!: number;

  @Column({ type: 'integer' })
  version!: number;

  @Column({ type: 'timestamptz', default: () => 'now()' })
  validFrom!: Date;
}
