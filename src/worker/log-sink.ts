/** Where a job's output goes: the executor writes each chunk of stdout and stderr as the process prints it. */
export type OutputStream = 'stdout' | 'stderr';

export interface LogSink {
  write(stream: OutputStream, chunk: Buffer): void;
  /**
   * Backpressure: undefined while the sink takes more of `stream`; else a promise that settles once it has room
   * again, until which the executor stops reading that pipe (the job then blocks on its writes, as on a slow
   * terminal, instead of output being dropped). Optional: a sink without it is written as fast as the job prints.
   */
  whenWritable?(stream: OutputStream): Promise<void> | undefined;
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
