/** The output streams of a job, as the API and the store name them. */
export const LOG_STREAMS = ['stdout', 'stderr'] as const;
export type LogStream = (typeof LOG_STREAMS)[number];

/** How a chunk's `data` is written: UTF-8 text as is, or base64 for bytes that are not (or hold NUL). */
export const LOG_ENCODINGS = ['utf8', 'base64'] as const;
export type LogEncoding = (typeof LOG_ENCODINGS)[number];

/** The biggest chunk a worker may send (decoded bytes): within the 32 MB body limit in any encoding. */
export const MAX_CHUNK_BYTES = 1024 * 1024;
