import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import type { Response } from 'express';
import { randomBytes } from 'node:crypto';
import { map, Observable } from 'rxjs';

/**
 * JSON text taken as is from PostgreSQL (`jsonb::text`), to be spliced into a response without parsing it in Node
 * and serialising it again: for list pages that carry megabytes of provisioning/runtime data, that round trip was
 * most of the request's cost. Anywhere else (a plain JSON.stringify) it behaves as the value it holds.
 */
export class RawJson {
  constructor(readonly text: string) {}

  toJSON(): unknown {
    // JSON.stringify calls this before any replacer: while splicing, skip the parse (the replacer uses the text).
    return splicing ? null : JSON.parse(this.text);
  }
}

let splicing = false;

export const rawJson = (text: string | null): RawJson | null => (text === null ? null : new RawJson(text));

const SPLICE = Symbol('runplane:splice-raw-json');

/** Marks a response body that holds RawJson values, for RawJsonInterceptor. */
export function withRawJson<T extends object>(body: T): T {
  Object.defineProperty(body, SPLICE, { value: true, enumerable: false });
  return body;
}

/** JSON.stringify, with every RawJson replaced by its text. Markers carry a per-call nonce, so data can't forge one. */
export function stringifyWithRaw(value: unknown): string {
  const nonce = randomBytes(8).toString('hex');
  const raws: string[] = [];
  splicing = true;
  let text: string;
  try {
    text = JSON.stringify(value, function (this: Record<string, unknown>, key, v: unknown) {
      // toJSON has already run on `v`; the holder still has the RawJson itself.
      const original = this[key];
      if (original instanceof RawJson) return `\u0000${nonce}:${raws.push(original.text) - 1}`;
      return v;
    });
  } finally {
    splicing = false;
  }
  return text.replace(new RegExp(`"\\\\u0000${nonce}:(\\d+)"`, 'g'), (_m, i: string) => raws[Number(i)]);
}

/** Sends bodies marked by withRawJson as spliced JSON text. */
@Injectable()
export class RawJsonInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      map((body: unknown) => {
        if (!body || typeof body !== 'object' || !(body as Record<symbol, unknown>)[SPLICE]) return body;
        context.switchToHttp().getResponse<Response>().setHeader('Content-Type', 'application/json; charset=utf-8');
        return stringifyWithRaw(body);
      }),
    );
  }
}
