import { CreateUsersAndProjects1764633600000 } from './1764633600000-CreateUsersAndProjects';
import { CreateRunsJobsAndJobGroups1764720000000 } from './1764720000000-CreateRunsJobsAndJobGroups';
import { AddSweptAtToJobGroupsCancelled1764806400000 } from './1764806400000-AddSweptAtToJobGroupsCancelled';
import { CreateBillingTables1764892800000 } from './1764892800000-CreateBillingTables';
import { AddCancelledToJobGroupCounters1764979200000 } from './1764979200000-AddCancelledToJobGroupCounters';
import { MoveRunActiveCountsToRootCounters1765065600000 } from './1765065600000-MoveRunActiveCountsToRootCounters';
import { StoreSubmissionDataAsJson1765152000000 } from './1765152000000-StoreSubmissionDataAsJson';
import { StoreIdempotencyResourceReferences1765497600000 } from './1765497600000-StoreIdempotencyResourceReferences';
import { AddUnfinishedRunsIndex1765497600001 } from './1765497600001-AddUnfinishedRunsIndex';

/** Every migration, in order. Listed explicitly so the app, the CLI and jest load the same set without globs. */
export const MIGRATIONS = [
  CreateUsersAndProjects1764633600000,
  CreateRunsJobsAndJobGroups1764720000000,
  AddSweptAtToJobGroupsCancelled1764806400000,
  CreateBillingTables1764892800000,
  AddCancelledToJobGroupCounters1764979200000,
  MoveRunActiveCountsToRootCounters1765065600000,
  StoreSubmissionDataAsJson1765152000000,
  StoreIdempotencyResourceReferences1765497600000,
  AddUnfinishedRunsIndex1765497600001,
];
