/** The runs list's response shapes, as the tests read them. */

export interface SubmissionView {
  id: string;
  submission_num: number;
  status: string;
  termination_reason: string | null;
  exit_status: number | null;
  submitted_at: string;
  started_at: string | null;
  finished_at: string | null;
  /** Absent where the view leaves the documents out (see submission_data). */
  provisioning_data?: Record<string, unknown> | null;
  runtime_data?: Record<string, unknown> | null;
  cost_usd: number;
}

/** A submission as shown without its documents (older ones on list pages, latest_job_submission beside its list). */
export function withoutDocuments<S extends Partial<SubmissionView>>(
  s: S,
): Omit<S, 'provisioning_data' | 'runtime_data'> {
  // eslint-disable-next-line @typescript-eslint/no-unused-vars -- the two are taken out to leave the rest
  const { provisioning_data, runtime_data, ...rest } = s;
  return rest;
}

/** Whether a submission view carries both documents, neither (false), or only one (an error in itself). */
export function hasDocuments(s: object): boolean {
  const both = 'provisioning_data' in s && 'runtime_data' in s;
  if (!both && ('provisioning_data' in s || 'runtime_data' in s)) throw new Error('a submission with one document');
  return both;
}

export interface JobView {
  id: string;
  job_num: number;
  replica_num: number;
  job_name: string;
  job_group_id: number;
  status: string;
  termination_reason: string | null;
  cancelled_job_group_id: number | null;
  submission_count: number;
  folded_submissions: Record<string, number>;
  latest_job_submission: SubmissionView | null;
  job_submissions: SubmissionView[];
}

export interface RunView {
  id: string;
  run_name: string;
  project: string;
  user: string;
  status: string;
  status_message: string | null;
  termination_reason: string | null;
  submitted_at: string;
  finished_at: string | null;
  jobs: JobView[];
}

export interface Page {
  items: RunView[];
  next_cursor: string | null;
}

export type Query = Record<string, string | number | boolean>;
