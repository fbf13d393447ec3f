import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, auth, call } from './api';
import { Link, navigate, query, useLocation } from './router';
import { AdminPage } from './pages/admin';
import { BillingPage } from './pages/billing';
import { JobPage } from './pages/job';
import { ProjectsPage } from './pages/projects';
import { RunPage } from './pages/run';
import { RunsPage } from './pages/runs';
import { SignInPage } from './pages/signin';
import './style.css';

type Me = { name: string; global_role: string };

/** The page a path names (every page has a deep link). */
function route(url: URL, me: Me | undefined) {
  const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  const q = url.searchParams;
  if (parts[0] === 'admin' && parts.length === 1) return <AdminPage />;
  if (parts[0] === 'projects' && parts.length >= 2) {
    const p = parts[1];
    if (parts.length === 2) return <RunsPage project={p} q={q} />;
    if (parts[2] === 'runs' && parts.length === 3) return <RunsPage project={p} q={q} />;
    if (parts[2] === 'billing' && parts.length === 3) return <BillingPage project={p} q={q} />;
    if (parts[2] === 'runs' && parts.length === 4) return <RunPage project={p} runId={parts[3]} q={q} />;
    if (parts[2] === 'runs' && parts[4] === 'jobs' && parts.length === 6)
      return <JobPage project={p} runId={parts[3]} jobId={parts[5]} q={q} />;
  }
  if (parts.length === 0) return <ProjectsPage me={me} />;
  return (
    <div class="error" role="alert">
      <h1>Page not found</h1>
      <p>
        Nothing lives at <code>{url.pathname}</code>. <Link href="/">Go to your projects</Link>.
      </p>
    </div>
  );
}

function App() {
  const url = useLocation();
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  const token = auth.token;

  useEffect(() => {
    const out = () => {
      auth.signOut();
      setMe(null);
    };
    window.addEventListener('runplane:unauthenticated', out);
    return () => window.removeEventListener('runplane:unauthenticated', out);
  }, []);

  useEffect(() => {
    if (!token) return setMe(null);
    call(api().GET('/api/v1/users/me')).then(setMe, () => setMe(null));
  }, [token]);

  if (url.pathname === '/signin' || !token || me === null) {
    if (url.pathname !== '/signin') {
      const next = url.pathname + url.search;
      navigate(`/signin${query({ next: next === '/' ? undefined : next })}`, true);
    }
    return <SignInPage next={url.searchParams.get('next') ?? '/'} onSignedIn={(m) => setMe(m)} />;
  }
  // The page starts loading while the token is checked (a bad token signs out through any 401).

  const project = /^\/projects\/([^/]+)/.exec(url.pathname)?.[1];
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <nav aria-label="Main">
          <Link href="/" class="brand">
            runplane
          </Link>
          {project && (
            <>
              <Link href={`/projects/${project}/runs`} aria-current={/\/runs/.test(url.pathname) ? 'page' : undefined}>
                Runs
              </Link>
              <Link
                href={`/projects/${project}/billing`}
                aria-current={/\/billing$/.test(url.pathname) ? 'page' : undefined}
              >
                Billing
              </Link>
            </>
          )}
          {me?.global_role === 'admin' && (
            <Link href="/admin" aria-current={url.pathname === '/admin' ? 'page' : undefined}>
              Admin
            </Link>
          )}
        </nav>
        <div class="who">
          <span>
            Signed in as <strong>{me?.name ?? '…'}</strong>
          </span>
          <button
            type="button"
            onClick={() => {
              auth.signOut();
              setMe(null);
              navigate('/signin', true);
            }}
          >
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        {route(url, me)}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app') as HTMLElement);
