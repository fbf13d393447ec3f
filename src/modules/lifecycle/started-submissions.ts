import type { JobFacts, SubmissionFacts } from '../jobs/submissions.service';

/** At most this many remembered (~2 KiB each: 50,000 held ~100 MiB of RSS); past it the oldest go. */
const MAX_REMEMBERED = 50_000;

/** A started submission as its start left it, with its job. */
export interface StartedFacts {
  submission: SubmissionFacts;
  job: JobFacts;
}

/**
 * The submissions this instance started (`running`), as their start left them: what their final report needs to
 * queue its follow-ups (billing, counting, COMMIT) right behind the statement that locks and finishes it, in one
 * round trip, rather than wait for that statement's answer first (ReportApplier). Only ever an assumption: the
 * locking statement checks what may have changed since (the status; a dependent added) and refuses otherwise, and
 * what never changes (run, group, job, number, holder) cannot differ.
 */
export class StartedSubmissions {
  private readonly facts = new Map<string, StartedFacts>();

  remember(submission: SubmissionFacts, job: JobFacts): void {
    if (this.facts.size >= MAX_REMEMBERED) this.facts.delete(this.facts.keys().next().value as string);
    this.facts.set(submission.id, { submission, job });
  }

  get(id: string): StartedFacts | undefined {
    return this.facts.get(id);
  }

  forget(ids: readonly string[]): void {
    for (const id of ids) this.facts.delete(id);
  }
}
