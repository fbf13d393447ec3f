/** Where a job's output goes: the executor writes each chunk of stdout and stderr as the process prints it. */
export type OutputStream = 'stdout' | 'stderr';

export interface LogSink {
  write(stream: OutputStream, chunk: Buffer): void;
  /** Flushes what is buffered; called once, after the process group is gone and both pipes have ended. */
  close(): Promise<void>;
  /** The server refused more output (its per-submission quota): the executor stops the job, `log_quota_exceeded`. */
  readonly quotaExceeded: boolean;
}

/** What a sink is made for: one submission, held by one worker. */
export interface LogSinkContext {
  submissionId: string;
  workerId: string;
}

export type LogSinkFactory = (context: LogSinkContext) => LogSink;
