import { useState } from 'preact/hooks';
import { api, ApiFailure, call } from '../api';
import { Confirm, ErrorState, Loading, Time, useLoad } from '../ui';

/** Global admins: the billed resources' current rates (with their versions, a new version), the invariants report. */
export function AdminPage() {
  const rates = useLoad(() => call(api().GET('/api/v1/resources')), []);
  const [name, setName] = useState('');
  const [rate, setRate] = useState('');
  const [asking, setAsking] = useState(false);
  const [message, setMessage] = useState<string>();
  const [report, setReport] = useState<{
    checked_at: string;
    ok: boolean;
    mismatches: { invariant: string; detail: string }[];
  }>();
  const [checking, setChecking] = useState(false);
  const [checkError, setCheckError] = useState<unknown>();

  return (
    <section>
      <h1>Admin</h1>
      <h2>Rates</h2>
      {rates.loading && !rates.data && <Loading what="rates" />}
      {rates.error !== undefined && <ErrorState error={rates.error} what="rates" retry={rates.reload} />}
      {rates.data && (
        <div class="table-wrap">
          <table data-testid="rates">
            <thead>
              <tr>
                <th scope="col">Resource</th>
                <th scope="col">USD per unit-hour</th>
                <th scope="col">Unit</th>
                <th scope="col">Version</th>
                <th scope="col">In force since</th>
              </tr>
            </thead>
            <tbody>
              {rates.data.items.map((r) => (
                <tr key={r.id}>
                  <td>{r.name}</td>
                  <td>{r.rate_usd_per_unit_hour}</td>
                  <td>{r.unit}</td>
                  <td>v{r.version}</td>
                  <td>
                    <Time at={r.valid_from} full />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          setAsking(true);
        }}
      >
        <label>
          Resource
          <select value={name} onChange={(e) => setName(e.currentTarget.value)} required>
            <option value="">choose…</option>
            {rates.data?.items.map((r) => (
              <option key={r.name} value={r.name}>
                {r.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          New rate (USD per unit-hour)
          <input
            type="number"
            min="0"
            step="any"
            required
            value={rate}
            onInput={(e) => setRate(e.currentTarget.value)}
          />
        </label>
        <button type="submit">Add rate version</button>
      </form>
      {message && <p role="status">{message}</p>}
      <Confirm
        open={asking}
        title={`New rate for ${name}?`}
        confirm="Add version"
        onCancel={() => setAsking(false)}
        onConfirm={async () => {
          setAsking(false);
          try {
            const v = await call(
              api().POST('/admin/v1/resources', { body: { name, rate_usd_per_unit_hour: Number(rate) } }),
            );
            setMessage(`${v.name} is now ${v.rate_usd_per_unit_hour} USD per ${v.unit}-hour (version ${v.version}).`);
            rates.reload();
          } catch (err) {
            setMessage(err instanceof ApiFailure ? `${err.code}: ${err.message}` : String(err));
          }
        }}
      >
        <p>
          Work that starts from now on is billed at {rate || '?'} USD per unit-hour; usage already accrued keeps its
          rate.
        </p>
      </Confirm>

      <h2>Invariants</h2>
      <p class="muted">Recomputes counters, job facts, run status, billed usage and logs from the raw rows.</p>
      <button
        type="button"
        disabled={checking}
        onClick={async () => {
          setChecking(true);
          setCheckError(undefined);
          try {
            setReport(await call(api().GET('/admin/v1/invariants')));
          } catch (err) {
            setCheckError(err);
          } finally {
            setChecking(false);
          }
        }}
      >
        {checking ? 'Checking…' : 'Check invariants'}
      </button>
      {checkError !== undefined && <ErrorState error={checkError} what="invariants report" />}
      {report && (
        <div data-testid="invariants" role="status">
          <p>
            {report.ok ? '✓ Every invariant holds' : `✗ ${report.mismatches.length} mismatches`} (checked{' '}
            <Time at={report.checked_at} full />)
          </p>
          {report.mismatches.length > 0 && (
            <ul>
              {report.mismatches.map((m, i) => (
                <li key={i}>
                  <code>{m.invariant}</code>: {m.detail}
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
    </section>
  );
}
