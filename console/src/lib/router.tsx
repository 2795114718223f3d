import { useSyncExternalStore, type AnchorHTMLAttributes, type MouseEvent } from 'react';

/**
 * A small path router: the console has a handful of pages, each a path under /console/. The server answers
 * index.html for every such path (api/routes/console-assets.ts), so a reload or a shared link lands on the page.
 */
export const BASE = '/console';
const CHANGE = 'console:navigate';

function subscribe(onChange: () => void): () => void {
  window.addEventListener('popstate', onChange);
  window.addEventListener('hashchange', onChange);
  window.addEventListener(CHANGE, onChange);
  return () => {
    window.removeEventListener('popstate', onChange);
    window.removeEventListener('hashchange', onChange);
    window.removeEventListener(CHANGE, onChange);
  };
}

/** The page's path below /console, starting with '/' ('/' for the console's home). */
export function usePath(): string {
  const pathname = useSyncExternalStore(subscribe, () => window.location.pathname);
  const rest = pathname.startsWith(BASE) ? pathname.slice(BASE.length) : pathname;
  return rest.replace(/\/+$/, '') || '/';
}

/** The query string, with its '?' ('' for none): a page's state that a shared link carries (the analytics range). */
export function useSearch(): string {
  return useSyncExternalStore(subscribe, () => window.location.search);
}

/** The fragment, with its '#' (a one-time link carries its token there: never sent to a server, never in a Referer). */
export function useHash(): string {
  return useSyncExternalStore(subscribe, () => window.location.hash);
}

let navigated = false;
/** Whether the person has moved between pages (then a new page takes the focus to its heading). */
export const hasNavigated = () => navigated;
/** A new page without a new address (signed in, signed out): it too takes the focus to its heading. */
export const pageChanged = () => void (navigated = true);

export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  const url = `${BASE}${to === '/' ? '/' : to}`;
  navigated = true;
  if (opts.replace) window.history.replaceState(null, '', url);
  else window.history.pushState(null, '', url);
  window.dispatchEvent(new Event(CHANGE));
  window.scrollTo(0, 0);
}

type LinkProps = Omit<AnchorHTMLAttributes<HTMLAnchorElement>, 'href'> & { to: string };

/** A real link (open in a new tab works), followed in place when clicked plainly. */
export function Link({ to, onClick, ...rest }: LinkProps) {
  const handle = (event: MouseEvent<HTMLAnchorElement>) => {
    onClick?.(event);
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(to);
  };
  return <a href={`${BASE}${to === '/' ? '/' : to}`} onClick={handle} {...rest} />;
}
