import type { ValueTransformer } from 'typeorm';

/** `numeric` arrives from pg as a string (to keep precision); money in the API is a JSON number. */
export const numericToNumber: ValueTransformer = {
  to: (value: number | null | undefined) => value,
  from: (value: string | null) => (value === null ? null : Number(value)),
};
