import { createTestApp, TestApp, TestUser } from '../support/test-app';
import { jobSpec, makeProject, makeRun } from '../support/factories';
import { hasDocuments, JobView, RunView, withoutDocuments } from '../support/run-views';
import { giveHistory } from '../support/submission-histories';
import { ALL_RUNS, projectRuns } from '../support/runs-list';
import { required } from '../../src/common/required';

/*
 * Which submissions carry their documents (provisioning_data, runtime_data) in job views: on list pages only each
 * job's newest unless submission_data=all; the one-run view all of them unless asked otherwise; and everywhere the
 * newest once, on job_submissions' last item, with latest_job_submission beside it leaving them out.
 */
describe('run views: submission documents sent once and where asked', () => {
  let t: TestApp;
  let owner: TestUser;
  let project: string;
  let run: { id: string; jobs: { id: string }[] };
  /** Histories of the run's two jobs: the first with gaps, the second one submission. */
  const HISTORY = [0, 1, 3, 4];

  beforeAll(async () => {
    t = await createTestApp();
    owner = await t.user();
    project = (await makeProject(t, owner)).name;
    run = await makeRun(t, owner, project, {
      jobs: [
        { name: 'parent', ref: 'parent', spec: jobSpec() },
        { name: 'child', depends_on: ['parent'], spec: jobSpec() },
      ],
    });
    await giveHistory(t, run.jobs[0].id, HISTORY);
  });
  afterAll(() => t.close());

  const get = async (url: string, query: Record<string, string | number> = {}) => {
    const res = await t.http.get(url).set(owner.auth).query(query);
    if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${JSON.stringify(res.body)}`);
    return { body: res.body as unknown, text: res.text };
  };
  const listed = async (url: string, query: Record<string, string | number> = {}) => {
    const page = (await get(url, query)).body as { items: RunView[] };
    return required(
      page.items.find((r) => r.id === run.id),
      'the run on the page',
    );
  };
  const runUrl = () => `${projectRuns(project)}/${run.id}`;
  /** Per job: which shown submissions carry documents, and whether latest_job_submission does. */
  const shape = (jobs: JobView[]) =>
    jobs.map((j) => ({
      shown: j.job_submissions.map(hasDocuments),
      latest: j.latest_job_submission ? hasDocuments(j.latest_job_submission) : null,
    }));

  it("list pages: by default only each job's newest carries them; older ones leave both fields out", async () => {
    for (const url of [projectRuns(project), ALL_RUNS]) {
      const r = await listed(url);
      expect(shape(r.jobs)).toEqual([
        { shown: [false, false, false, true], latest: false },
        { shown: [true], latest: false },
      ]);
      const newest = required(r.jobs[0].job_submissions.at(-1), 'newest');
      expect(newest).toMatchObject({ submission_num: 4, provisioning_data: { attempt: 4 } });
      expect(newest.runtime_data).toEqual({ job: run.jobs[0].id, num: 4 });
      // The child's one submission: queued, nothing reported yet (null, which is not the same as left out).
      expect(r.jobs[1].job_submissions[0]).toMatchObject({ provisioning_data: null, runtime_data: null });
    }
  });

  it('latest_job_submission is job_submissions[-1] without its documents: the newest in full once', async () => {
    const { text, body } = await get(projectRuns(project), { submission_data: 'all' });
    const r = required(
      (body as { items: RunView[] }).items.find((x) => x.id === run.id),
      'the run',
    );
    for (const j of r.jobs) {
      const newest = required(j.job_submissions.at(-1), 'newest');
      expect(j.latest_job_submission).toEqual(withoutDocuments(newest));
    }
    // In the bytes sent: each document once, even when every submission is asked for in full (5 shown).
    const count = (re: RegExp) => (text.match(re) ?? []).length;
    for (const num of HISTORY)
      expect({ num, times: count(new RegExp(`"attempt":\\s*${num}\\b`, 'g')) }).toEqual({ num, times: 1 });
    expect(count(/"provisioning_data":/g)).toBe(5);
    expect(count(/"runtime_data":/g)).toBe(5);
    // By default: the two newest only.
    const { text: page } = await get(projectRuns(project));
    expect((page.match(/"runtime_data":/g) ?? []).length).toBe(2);
  });

  it('submission_data=all: every shown submission in full; none: no submission, latest included', async () => {
    for (const url of [projectRuns(project), ALL_RUNS]) {
      const all = await listed(url, { submission_data: 'all' });
      expect(shape(all.jobs)).toEqual([
        { shown: [true, true, true, true], latest: false },
        { shown: [true], latest: false },
      ]);
      expect(all.jobs[0].job_submissions.map((s) => s.provisioning_data)).toEqual(
        HISTORY.map((attempt) => ({ attempt })),
      );
      const none = await listed(url, { submission_data: 'none' });
      expect(shape(none.jobs)).toEqual([
        { shown: [false, false, false, false], latest: false },
        { shown: [false], latest: false },
      ]);
      // Apart from the documents, the same submissions.
      expect(none.jobs.map((j) => j.job_submissions)).toEqual(
        all.jobs.map((j) => j.job_submissions.map(withoutDocuments)),
      );
    }
  });

  it('job_submissions_limit=0: latest_job_submission, the only place left, has them (but for none)', async () => {
    for (const [submission_data, latest] of [
      ['newest', true],
      ['all', true],
      ['none', false],
    ] as const) {
      const r = await listed(projectRuns(project), { job_submissions_limit: 0, submission_data });
      expect({ submission_data, shape: shape(r.jobs) }).toEqual({
        submission_data,
        shape: [
          { shown: [], latest },
          { shown: [], latest },
        ],
      });
    }
    const r = await listed(projectRuns(project), { job_submissions_limit: 0 });
    expect(r.jobs[0].latest_job_submission).toMatchObject({ submission_num: 4, provisioning_data: { attempt: 4 } });
  });

  it('the one-run view: every shown submission in full by default; submission_data narrows it', async () => {
    const one = (await get(runUrl())).body as RunView;
    expect(shape(one.jobs)).toEqual([
      { shown: [true, true, true, true], latest: false },
      { shown: [true], latest: false },
    ]);
    const newest = (await get(runUrl(), { submission_data: 'newest' })).body as RunView;
    expect(shape(newest.jobs)).toEqual([
      { shown: [false, false, false, true], latest: false },
      { shown: [true], latest: false },
    ]);
    const none = (await get(runUrl(), { submission_data: 'none', job_submissions_limit: 2 })).body as RunView;
    expect(shape(none.jobs)).toEqual([
      { shown: [false, false], latest: false },
      { shown: [false], latest: false },
    ]);
    expect(none.jobs[0].job_submissions.map((s) => s.submission_num)).toEqual([3, 4]);
  });

  it("other job views (a group's jobs, a job's dependents) send the newest's documents once too", async () => {
    const groupJobs = (await get(`${runUrl()}/job-groups/0/jobs`)).body as { items: JobView[] };
    const dependents = (await get(`${runUrl()}/jobs/${run.jobs[0].id}/dependents`)).body as { items: JobView[] };
    expect(shape(groupJobs.items)).toEqual([
      { shown: [true], latest: false },
      { shown: [true], latest: false },
    ]);
    expect(shape(dependents.items)).toEqual([{ shown: [true], latest: false }]);
    for (const j of [...groupJobs.items, ...dependents.items])
      expect(j.latest_job_submission).toEqual(withoutDocuments(required(j.job_submissions[0], 'newest')));
  });

  it('an unknown submission_data is 400 VALIDATION_FAILED naming it, on the list and on one run', async () => {
    for (const url of [projectRuns(project), ALL_RUNS, runUrl()]) {
      for (const value of ['full', 'NEWEST', '', 'newest,all']) {
        const res = await t.http.get(url).set(owner.auth).query({ submission_data: value });
        expect({ url, value, status: res.status }).toEqual({ url, value, status: 400 });
        expect(res.body).toMatchObject({ status_code: 400, code: 'VALIDATION_FAILED' });
        expect(res.body.message).toContain('submission_data');
        expect(res.body.details.map((d: { field: string }) => d.field)).toContain('submission_data');
      }
      const repeated = await t.http.get(`${url}?submission_data=all&submission_data=none`).set(owner.auth);
      expect({ url, status: repeated.status }).toEqual({ url, status: 400 });
    }
  });
});
