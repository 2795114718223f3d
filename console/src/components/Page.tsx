import { useEffect, useRef, type ReactNode } from 'react';
import { hasNavigated } from '../lib/router';

/** A page: its one <h1> (which takes the focus after a move between pages, so a screen reader starts there), actions beside it. */
export function Page({ title, actions, children }: { title: string; actions?: ReactNode; children: ReactNode }) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = `${title} · Concierge console`;
    if (hasNavigated()) heading.current?.focus();
  }, [title]);
  return (
    <>
      <div className="page-head">
        <h1 ref={heading} tabIndex={-1}>
          {title}
        </h1>
        {actions ? <div className="actions">{actions}</div> : null}
      </div>
      {children}
    </>
  );
}

/** A refusal: the page exists, this person's role may not see it. */
export function NotAllowed({ title, why }: { title: string; why: string }) {
  return (
    <Page title={title}>
      <p className="notice" role="alert">
        {why}
      </p>
    </Page>
  );
}
