import { Check, Column, Entity, ForeignKey, PrimaryColumn } from 'typeorm';

/** A quantity pinned when a submission starts running, against the resource version current at that moment. */
@Entity('submission_resources')
@ForeignKey('BillingAttempt', ['submissionId'], ['submissionId'], {
  name: 'fk_submission_resources_submission_id',
  onDelete: 'CASCADE',
})
@ForeignKey('Resource', ['resourceId'], ['id'], { name: 'fk_submission_resources_resource_id' })
@Check('ck_submission_resources_quantity', 'quantity > 0')
export class SubmissionResource {
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_submission_resources' })
  submissionId!: string;

  @PrimaryColumn({ type: 'integer', primaryKeyConstraintName: 'pk_submission_resources' })
  resourceId!: number;

  @Column({ type: 'numeric', precision: 20, scale: 10 })
  quantity!: string;
}
