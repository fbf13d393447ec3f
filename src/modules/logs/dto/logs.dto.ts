import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsBoolean, IsIn, IsInt, IsOptional, IsString, Max, Min, registerDecorator } from 'class-validator';
import { PageQueryDto } from '../../../common/pagination/cursor';
import { Optional, ToStrictInt } from '../../../common/validation/validators';
import { WorkerReportDto } from '../../workers/dto/worker.dto';
import { LOG_ENCODINGS, LOG_STREAMS, MAX_CHUNK_BYTES, type LogEncoding, type LogStream } from './log-streams';

export { LOG_ENCODINGS, LOG_STREAMS, MAX_CHUNK_BYTES, type LogEncoding, type LogStream };

/** Byte offsets and lengths fit PostgreSQL's int4 (the quota is at most 2^31 - 1 bytes). */
export const MAX_LOG_OFFSET = 2_147_483_647;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The bytes a chunk's `data` stands for under its encoding; undefined when `data` is not valid in it. */
export function chunkBytes(data: string, encoding: LogEncoding = 'utf8'): Buffer | undefined {
  if (encoding === 'base64') return BASE64.test(data) ? Buffer.from(data, 'base64') : undefined;
  return Buffer.from(data, 'utf8');
}

/** Decoded size of a chunk's `data`, without decoding it. */
function decodedLength(data: string, encoding: unknown): number {
  if (encoding === 'base64') return (data.length / 4) * 3 - (data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0);
  return Buffer.byteLength(data, 'utf8');
}

/** `data` is valid in the chunk's `encoding` and at most MAX_CHUNK_BYTES once decoded. */
function IsChunkData(): PropertyDecorator {
  return (target, propertyName) =>
    registerDecorator({
      name: 'isChunkData',
      target: target.constructor,
      propertyName: propertyName as string,
      validator: {
        validate: (value: unknown, args) => {
          const encoding = (args?.object as { encoding?: unknown } | undefined)?.encoding;
          if (typeof value !== 'string') return false;
          if (encoding === 'base64' && !BASE64.test(value)) return false;
          return decodedLength(value, encoding) <= MAX_CHUNK_BYTES;
        },
        defaultMessage: (args) =>
          (args?.object as { encoding?: unknown } | undefined)?.encoding === 'base64'
            ? `must be base64 (RFC 4648, padded) of at most ${MAX_CHUNK_BYTES} bytes`
            : `must be a string of at most ${MAX_CHUNK_BYTES} bytes in UTF-8`,
      },
    });
}

export class LogChunkDto extends WorkerReportDto {
  @ApiProperty({ enum: LOG_STREAMS })
  @IsIn(LOG_STREAMS)
  stream!: LogStream;

  @ApiProperty({
    type: 'integer',
    minimum: 0,
    maximum: MAX_LOG_OFFSET,
    description:
      'Where `data` starts in the stream: the number of bytes of this stream sent before it. Equal to what the ' +
      'server has accepted: appended. Below it (a resend): the bytes already stored must match (409 ' +
      '`LOG_DATA_MISMATCH` if not) and only what goes past them is stored. Above it: 409 `LOG_OFFSET_GAP`. Each ' +
      'refusal carries `accepted_length` (the bytes of the stream stored) in its `details`.',
  })
  @IsInt()
  @Min(0)
  @Max(MAX_LOG_OFFSET)
  offset!: number;

  @ApiProperty({
    description:
      `The bytes: UTF-8 text as is (without NUL), or base64 with \`encoding: "base64"\` (any bytes). At most ` +
      `${MAX_CHUNK_BYTES} bytes once decoded. Empty: stores nothing, answers the accepted length.`,
  })
  @IsString()
  @IsChunkData()
  data!: string;

  @ApiPropertyOptional({ enum: LOG_ENCODINGS, default: 'utf8', description: 'How `data` is written.' })
  @Optional()
  @IsIn(LOG_ENCODINGS)
  encoding?: LogEncoding;
}

/** The query of the binary append (`POST .../logs/{stream}`, the body the bytes themselves). */
export class BinaryLogChunkQueryDto extends WorkerReportDto {
  @ApiProperty({
    type: 'integer',
    minimum: 0,
    maximum: MAX_LOG_OFFSET,
    description: 'Where the body starts in the stream, as `offset` of the JSON form.',
  })
  @ToStrictInt()
  @IsInt()
  @Min(0)
  @Max(MAX_LOG_OFFSET)
  offset!: number;
}

export class LogChunkAckView {
  @ApiProperty({ enum: LOG_STREAMS })
  stream!: LogStream;

  @ApiProperty({
    type: 'integer',
    minimum: 0,
    description: 'Bytes of this stream stored now: the offset of the next chunk.',
  })
  accepted_length!: number;

  @ApiProperty({
    type: 'integer',
    minimum: 0,
    description: 'Bytes this request stored (0 for a repeat of chunks already stored).',
  })
  stored_bytes!: number;
}

const toBool = ({ value }: { value: unknown }) => (value === 'true' ? true : value === 'false' ? false : value);

export class LogQueryDto extends PageQueryDto {
  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    maximum: 2_147_483_647,
    description: "The attempt (a submission of the job) to read; default the job's latest.",
  })
  @IsOptional()
  @ToStrictInt()
  @IsInt()
  @Min(0)
  @Max(2_147_483_647)
  submission_num?: number;

  @ApiPropertyOptional({
    enum: LOG_STREAMS,
    description: 'One stream, in byte order; omitted: both, in the order the worker sent them.',
  })
  @IsOptional()
  @IsString()
  @IsIn(LOG_STREAMS)
  stream?: LogStream;

  @ApiPropertyOptional({
    type: Boolean,
    default: false,
    description:
      'Stream as Server-Sent Events until the submission finishes (as `Accept: text/event-stream` does); ' +
      '`false` answers a page even to that Accept header.',
  })
  @IsOptional()
  @Transform(toBool)
  @IsBoolean()
  follow?: boolean;
}

export class LogChunkView {
  @ApiProperty({ enum: LOG_STREAMS })
  stream!: LogStream;

  @ApiProperty({ type: 'integer', minimum: 0, description: 'Where `data` starts in its stream, in bytes.' })
  offset!: number;

  @ApiProperty({ format: 'date-time', description: 'When the server stored the chunk.' })
  at!: string;

  @ApiProperty({ description: 'The bytes, as `encoding` says.' })
  data!: string;

  @ApiProperty({
    enum: LOG_ENCODINGS,
    description: '`utf8`: `data` is the bytes as text (valid UTF-8 without NUL); `base64`: any other bytes.',
  })
  encoding!: LogEncoding;
}
