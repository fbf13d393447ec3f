import { formatErrors, parseRunFile } from '../../src/cli/run-file';
import { seconds, sizeMib } from '../../src/cli/run-file-build';
import { RUN_FILE_SCHEMA } from '../../src/modules/run-files/run-file.schema';

/** The run file: YAML → the API's run submission, every error with its line and column (no server involved). */
const parse = (text: string) => parseRunFile(text, RUN_FILE_SCHEMA);

const EXAMPLE = `name: sweep-1                      # run_name (optional)
retry: {on_events: [error], max_attempts: 3}
resources: {cpu: 1, memory: 512MB} # default for every job below
env: {STAGE: test, SEED: 7}
groups:
  - name: prep
    jobs:
      - name: download
        commands: [echo downloading]
  - name: sweep
    cancel_after_n_failures: 2
    attributes: {lr: 0.1}
    groups:
      - name: small
        jobs:
          - name: train
            replicas: 4
            depends_on: [download]
            commands: ["echo train $RUNPLANE_REPLICA_NUM"]
            resources: {cpu: 2, memory: 4GB, gpu: 0}
            env: {SEED: 8}
            max_duration: 10m
jobs:
  - name: report
    depends_on: [train]
    always_run: true
    commands: [echo report]
`;

describe('a run file', () => {
  it("becomes the API's submission: groups by ref, depends_on by name, units converted, defaults merged", () => {
    const r = parse(EXAMPLE);
    if (!r.ok) throw new Error(formatErrors('run.yml', r.errors));
    expect(r.run.body).toEqual({
      run_name: 'sweep-1',
      retry: { on_events: ['error'], max_attempts: 3 },
      job_groups: [
        { ref: 'prep', attributes: { name: 'prep' } },
        { ref: 'sweep', attributes: { name: 'sweep', lr: 0.1 }, cancel_after_n_failures: 2 },
        { ref: 'small', parent_ref: 'sweep', attributes: { name: 'small' } },
      ],
      jobs: [
        {
          name: 'download',
          ref: 'download',
          group_ref: 'prep',
          spec: {
            commands: ['echo downloading'],
            env: { STAGE: 'test', SEED: '7' },
            resources: { cpu: 1, memory_mib: 512 },
          },
        },
        {
          name: 'train',
          ref: 'train',
          group_ref: 'small',
          replicas: 4,
          depends_on: ['download'],
          spec: {
            commands: ['echo train $RUNPLANE_REPLICA_NUM'],
            env: { STAGE: 'test', SEED: '8' },
            resources: { cpu: 2, memory_mib: 4096, gpu: 0 },
            max_duration_s: 600,
          },
        },
        {
          name: 'report',
          always_run: true,
          depends_on: ['train'],
          spec: {
            commands: ['echo report'],
            env: { STAGE: 'test', SEED: '7' },
            resources: { cpu: 1, memory_mib: 512 },
          },
        },
      ],
    });
    expect(r.run.jobs.map((j) => [j.name, j.group])).toEqual([
      ['download', 'prep'],
      ['train', 'sweep/small'],
      ['report', ''],
    ]);
  });

  it('sends no ref nor depends_on when nothing depends on anything (what servers before the DAG accept)', () => {
    const r = parse('resources: {cpu: 1, memory: 1GB}\njobs:\n  - name: a\n    commands: [x]\n  - commands: [y]\n');
    if (!r.ok) throw new Error(formatErrors('run.yml', r.errors));
    expect(r.run.body.jobs).toEqual([
      { name: 'a', spec: { commands: ['x'], resources: { cpu: 1, memory_mib: 1024 } } },
      { spec: { commands: ['y'], resources: { cpu: 1, memory_mib: 1024 } } },
    ]);
  });

  it('reports every error at once, each with its line and column, in file order', () => {
    const text = [
      'name: Bad_Name', // 1
      'retry: {on_events: [oops]}', // 2
      'resources: {cpu: 0, memory: 4 gigs}', // 3
      'colour: blue', // 4
      'groups:', // 5
      '  - jobs:', // 6
      '      - name: a', // 7
      '        commands: [x]', // 8
      '        replicas: two', // 9
      '        depends_on: [nope]', // 10
      '      - name: a', // 11
      '        comands: [y]', // 12
      '        resources: {gpu: 1.5}', // 13
      '  - name: g', // 14
      '    jobs:', // 15
      '      - name: b', // 16
      '        commands: [z]', // 17
      '        depends_on: [c]', // 18
      '      - name: c', // 19
      '        commands: [z]', // 20
      '        depends_on: [b]', // 21
    ].join('\n');
    const r = parse(text);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(formatErrors('run.yml', r.errors)).toBe(
      [
        'run.yml:1:7: name: must be lowercase letters, digits and -, starting with a letter or digit (at most 63)',
        'run.yml:2:21: retry.on_events[0]: must be one of: no_capacity, interruption, error',
        'run.yml:3:18: resources.cpu: must be >= 0.001',
        'run.yml:3:29: resources.memory: must be a size with a unit, like 512MB or 4GB',
        'run.yml:4:1: colour: unknown key "colour" (known: name, attributes, priority, cancel_after_n_failures, ' +
          'retry, resources, env, image, max_duration, groups, jobs)',
        'run.yml:6:5: groups[0]: missing "name"',
        'run.yml:9:19: groups[0].jobs[0].replicas: must be an integer',
        'run.yml:10:22: groups[0].jobs[0].depends_on[0]: no job named "nope" in the file',
        'run.yml:11:9: groups[0].jobs[1]: missing "commands"',
        'run.yml:11:15: groups[0].jobs[1].name: job name "a" is used twice (also at groups[0].jobs[0])',
        'run.yml:12:9: groups[0].jobs[1].comands: unknown key "comands" (known: name, commands, replicas, ' +
          'depends_on, always_run, resources, env, image, max_duration)',
        'run.yml:13:26: groups[0].jobs[1].resources.gpu: must be an integer',
        'run.yml:18:21: groups[1].jobs[0].depends_on: jobs depend on each other in a cycle: b → c → b',
        '',
      ].join('\n'),
    );
  });

  it('reports YAML syntax errors with their position, and a file with no jobs', () => {
    const bad = parse('jobs:\n  - name: a\n    commands: [x\n');
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.errors[0]).toMatchObject({ line: expect.any(Number), col: expect.any(Number) });
    const dup = parse('name: a\nname: b\n');
    expect(dup.ok).toBe(false);
    if (!dup.ok) expect(formatErrors('f', dup.errors)).toMatch(/^f:2:1: Map keys must be unique/);
    const empty = parse('name: nothing\n');
    expect(empty.ok).toBe(false);
    if (!empty.ok)
      expect(formatErrors('f', empty.errors)).toBe(
        'f:1:1: the run has no jobs: add a jobs list (at the top or in a group)\n',
      );
  });

  it('needs cpu and memory for each job, from the job or the defaults', () => {
    const r = parse('jobs:\n  - name: a\n    commands: [x]\n    resources: {cpu: 1}\n');
    expect(r.ok).toBe(false);
    if (!r.ok)
      expect(formatErrors('f', r.errors)).toBe(
        'f:2:5: jobs[0]: no memory: set resources.memory on the job, or at the top of the file for every job\n',
      );
  });

  it('reads sizes in binary units and durations with units', () => {
    expect([sizeMib('512MB'), sizeMib('4GB'), sizeMib('1.5GiB'), sizeMib('1TB')]).toEqual([512, 4096, 1536, 1048576]);
    expect([seconds(90), seconds('90s'), seconds('10m'), seconds('2h'), seconds('1d')]).toEqual([
      90, 90, 600, 7200, 86400,
    ]);
  });

  it('refuses groups nested deeper than the API allows', () => {
    let yaml = 'resources: {cpu: 1, memory: 1GB}\n';
    let indent = '';
    for (let d = 1; d <= 6; d++) {
      yaml += `${indent}groups:\n${indent}  - name: g${d}\n`;
      indent += '    ';
    }
    yaml += `${indent}jobs: [{commands: [x]}]\n`;
    const r = parse(yaml);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(formatErrors('f', r.errors)).toMatch(/groups nest at most 5 deep below the run/);
  });
});
