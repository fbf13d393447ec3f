/**
 * The JSON Schema of a run file (the YAML `runplane apply -f` reads), served at GET /api/v1/schemas/run-file so
 * that the CLI validates a file against the server it submits to. Pure data: the CLI's tests import it directly.
 * What a schema cannot say (unique job names, known `depends_on`, cycles, depth, required resources after the
 * defaults are merged) the CLI checks after it, with positions too.
 */

const NAME = '^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$';
/** Sizes in binary units, as dstack reads them: 512MB is 512 MiB, 4GB is 4 GiB. */
export const SIZE_PATTERN = '^[0-9]+(\\.[0-9]+)?\\s*([MmGgTt][Ii]?[Bb])$';
/** Durations: seconds as a number, or a number with s, m, h or d. */
export const DURATION_PATTERN = '^[0-9]+\\s*[smhd]$';

const duration = {
  type: ['integer', 'string'],
  minimum: 1,
  pattern: DURATION_PATTERN,
  description: 'Seconds, or a number with a unit: 90s, 10m, 2h, 1d.',
};

export const RUN_FILE_SCHEMA = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  $id: 'https://runplane.dev/schemas/run-file/v1.json',
  title: 'runplane run file',
  description:
    'A run: jobs in a tree of groups. Defaults given at the top (resources, env, image, max_duration) apply to ' +
    'every job.',
  type: 'object',
  additionalProperties: false,
  properties: {
    name: {
      type: 'string',
      pattern: '^[a-z0-9][a-z0-9-]{0,62}$',
      description: 'The run name (unique in the project).',
    },
    attributes: { type: 'object', description: 'Free-form attributes of the run.' },
    priority: { type: 'integer', minimum: -1000, maximum: 1000 },
    cancel_after_n_failures: { type: 'integer', minimum: 1, maximum: 1000000 },
    retry: { $ref: '#/definitions/retry' },
    resources: { $ref: '#/definitions/resources' },
    env: { $ref: '#/definitions/env' },
    image: { type: 'string', minLength: 1, maxLength: 512 },
    max_duration: duration,
    groups: { type: 'array', items: { $ref: '#/definitions/group' } },
    jobs: { type: 'array', items: { $ref: '#/definitions/job' } },
  },
  definitions: {
    retry: {
      type: 'object',
      additionalProperties: false,
      required: ['on_events'],
      properties: {
        on_events: {
          type: 'array',
          minItems: 1,
          uniqueItems: true,
          items: { type: 'string', enum: ['no_capacity', 'interruption', 'error'] },
        },
        max_attempts: { type: 'integer', minimum: 1, maximum: 1000 },
        duration,
      },
    },
    resources: {
      type: 'object',
      additionalProperties: false,
      properties: {
        cpu: { type: 'number', minimum: 0.001, maximum: 1024, description: 'Cores.' },
        memory: { type: 'string', pattern: SIZE_PATTERN, description: 'With a unit: 512MB, 4GB (binary units).' },
        gpu: { type: 'integer', minimum: 0, maximum: 64 },
        disk: { type: 'string', pattern: SIZE_PATTERN, description: 'With a unit: 10GB (binary units).' },
      },
    },
    env: {
      type: 'object',
      propertyNames: { pattern: '^[A-Za-z_][A-Za-z0-9_]{0,255}$' },
      additionalProperties: { type: ['string', 'number', 'boolean'] },
    },
    job: {
      type: 'object',
      additionalProperties: false,
      required: ['commands'],
      properties: {
        name: { type: 'string', pattern: NAME, description: 'Unique in the file; what depends_on names.' },
        commands: {
          type: 'array',
          minItems: 1,
          items: { type: 'string' },
          description: 'Run in order in one bash shell; the first that fails ends the job.',
        },
        replicas: { type: 'integer', minimum: 1, maximum: 10000 },
        depends_on: { type: 'array', uniqueItems: true, items: { type: 'string', pattern: NAME } },
        always_run: { type: 'boolean' },
        resources: { $ref: '#/definitions/resources' },
        env: { $ref: '#/definitions/env' },
        image: { type: 'string', minLength: 1, maxLength: 512 },
        max_duration: duration,
      },
    },
    group: {
      type: 'object',
      additionalProperties: false,
      required: ['name'],
      properties: {
        name: { type: 'string', pattern: NAME, description: 'Unique among the groups of the file.' },
        attributes: { type: 'object' },
        cancel_after_n_failures: { type: 'integer', minimum: 1, maximum: 1000000 },
        groups: { type: 'array', items: { $ref: '#/definitions/group' } },
        jobs: { type: 'array', items: { $ref: '#/definitions/job' } },
      },
    },
  },
} as const;
