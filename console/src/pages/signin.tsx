import { useState } from 'preact/hooks';
import { api, ApiFailure, auth, call } from '../api';
import { navigate } from '../router';

/** Sign in with an API token; it is kept in this browser (localStorage) until "Sign out". */
export function SignInPage({
  next,
  onSignedIn,
}: {
  next: string;
  onSignedIn: (me: { name: string; global_role: string }) => void;
}) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  return (
    <main id="main" class="signin">
      <h1>Sign in to runplane</h1>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          setBusy(true);
          setError(undefined);
          try {
            const me = await call(api(token.trim()).GET('/api/v1/users/me'));
            auth.signIn(token.trim());
            onSignedIn(me);
            navigate(next.startsWith('/') && !next.startsWith('//') ? next : '/', true);
          } catch (err) {
            setError(
              err instanceof ApiFailure && err.status === 401
                ? 'That token was not accepted (401): check it, or ask an admin for a new one.'
                : `Could not sign in: ${(err as Error).message}`,
            );
          } finally {
            setBusy(false);
          }
        }}
      >
        <label for="token">API token</label>
        <input
          id="token"
          name="token"
          type="password"
          autoComplete="current-password"
          required
          value={token}
          onInput={(e) => setToken(e.currentTarget.value)}
          aria-describedby={error ? 'signin-error' : 'token-help'}
        />
        <p id="token-help" class="muted">
          The token printed at the server's first start, or one from <code>POST /api/v1/users/me/tokens</code>. It is
          kept in this browser until you sign out.
        </p>
        {error && (
          <p id="signin-error" class="error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
