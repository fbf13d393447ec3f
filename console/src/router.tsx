import type { ComponentChildren, JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';

/** History-API routing: every page has its own URL (deep links), and the server answers any of them with the app. */
export function navigate(to: string, replace = false): void {
  if (replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  window.dispatchEvent(new Event('runplane:navigate'));
  if (!replace) window.scrollTo(0, 0);
}

export function useLocation(): URL {
  const [href, setHref] = useState(location.href);
  useEffect(() => {
    const on = () => setHref(location.href);
    window.addEventListener('popstate', on);
    window.addEventListener('runplane:navigate', on);
    return () => {
      window.removeEventListener('popstate', on);
      window.removeEventListener('runplane:navigate', on);
    };
  }, []);
  return new URL(href);
}

/** A query string from the non-empty entries of `params`. */
export function query(params: Record<string, string | number | boolean | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

export function Link(props: JSX.HTMLAttributes<HTMLAnchorElement> & { href: string; children: ComponentChildren }) {
  const { href, children, ...rest } = props;
  return (
    <a
      {...rest}
      href={href}
      onClick={(e) => {
        if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(href);
      }}
    >
      {children}
    </a>
  );
}

export const enc = encodeURIComponent;
