import { CreateUsersAndProjects1764633600000 } from './1764633600000-CreateUsersAndProjects';
import { CreateRunsJobsAndJobGroups1764720000000 } from './1764720000000-CreateRunsJobsAndJobGroups';
import { AddSweptAtToJobGroupsCancelled1764806400000 } from './1764806400000-AddSweptAtToJobGroupsCancelled';
import { CreateBillingTables1764892800000 } from './1764892800000-CreateBillingTables';
import { AddCancelledToJobGroupCounters1764979200000 } from './1764979200000-AddCancelledToJobGroupCounters';
import { MoveRunActiveCountsToRootCounters1765065600000 } from './1765065600000-MoveRunActiveCountsToRootCounters';
import { StoreSubmissionDataAsJson1765152000000 } from './1765152000000-StoreSubmissionDataAsJson';
import { AddAbortedToJobGroupCounters1765238400000 } from './1765238400000-AddAbortedToJobGroupCounters';
import { AddClaimedByUserIdToJobSubmissions1765324800000 } from './1765324800000-AddClaimedByUserIdToJobSubmissions';
import { StoreIdempotencyResourceReferences1765497600000 } from './1765497600000-StoreIdempotencyResourceReferences';
import { AddUnfinishedRunsIndex1765497600001 } from './1765497600001-AddUnfinishedRunsIndex';
import { AddDeadlineAtToJobSubmissions1765670400000 } from './1765670400000-AddDeadlineAtToJobSubmissions';
import { CreateRequestableResources1765756800000 } from './1765756800000-CreateRequestableResources';
import { CreateEvents1765843200000 } from './1765843200000-CreateEvents';
import { CreateLogTables1766016000000 } from './1766016000000-CreateLogTables';
import { AddNeedsContainerToJobSubmissions1766102400000 } from './1766102400000-AddNeedsContainerToJobSubmissions';
import { CreateJobParents1766188800000 } from './1766188800000-CreateJobParents';
import { AddAlwaysRunOpenToJobGroupCounters1766275200000 } from './1766275200000-AddAlwaysRunOpenToJobGroupCounters';
import { AddHasDependentsToJobs1766361600000 } from './1766361600000-AddHasDependentsToJobs';
import { AddPendingToJobGroupCounters1766448000000 } from './1766448000000-AddPendingToJobGroupCounters';
import { CountPendingJobsInEveryGroup1766534400000 } from './1766534400000-CountPendingJobsInEveryGroup';
import { ShardJobGroupCounters1766620800000 } from './1766620800000-ShardJobGroupCounters';
import { LeaveRoomInJobPages1766707200000 } from './1766707200000-LeaveRoomInJobPages';
import { CreateCommitAheadRefusal1766793600000 } from './1766793600000-CreateCommitAheadRefusal';

/** Every migration, in order. Listed explicitly so the app, the CLI and jest load the same set without globs. */
export const MIGRATIONS = [
  CreateUsersAndProjects1764633600000,
  CreateRunsJobsAndJobGroups1764720000000,
  AddSweptAtToJobGroupsCancelled1764806400000,
  CreateBillingTables1764892800000,
  AddCancelledToJobGroupCounters1764979200000,
  MoveRunActiveCountsToRootCounters1765065600000,
  StoreSubmissionDataAsJson1765152000000,
  AddAbortedToJobGroupCounters1765238400000,
  AddClaimedByUserIdToJobSubmissions1765324800000,
  StoreIdempotencyResourceReferences1765497600000,
  AddUnfinishedRunsIndex1765497600001,
  AddDeadlineAtToJobSubmissions1765670400000,
  CreateRequestableResources1765756800000,
  CreateEvents1765843200000,
  CreateLogTables1766016000000,
  AddNeedsContainerToJobSubmissions1766102400000,
  CreateJobParents1766188800000,
  AddAlwaysRunOpenToJobGroupCounters1766275200000,
  AddHasDependentsToJobs1766361600000,
  AddPendingToJobGroupCounters1766448000000,
  CountPendingJobsInEveryGroup1766534400000,
  ShardJobGroupCounters1766620800000,
  LeaveRoomInJobPages1766707200000,
  CreateCommitAheadRefusal1766793600000,
];
