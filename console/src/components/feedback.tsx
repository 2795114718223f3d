import { createContext, useCallback, useContext, useState, type ReactNode } from 'react';
import { describeError } from '../lib/api';

/** A failure, said in an alert region (read out at once). Nothing rendered without one. */
export function ErrorAlert({ error, id }: { error: unknown; id?: string }) {
  return (
    <div className="alert-slot" role="alert" id={id}>
      {error ? <p className="alert">{typeof error === 'string' ? error : describeError(error)}</p> : null}
    </div>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p className="muted" role="status">
      Loading {what}…
    </p>
  );
}

const Announce = createContext<(message: string) => void>(() => undefined);

/** Short confirmations ("Copied", "Key deleted") in one polite live region, shown at the bottom of the screen. */
export function AnnouncerProvider({ children }: { children: ReactNode }) {
  const [message, setMessage] = useState({ text: '', n: 0 });
  const announce = useCallback((text: string) => setMessage((m) => ({ text, n: m.n + 1 })), []);
  return (
    <Announce.Provider value={announce}>
      {children}
      <div className="toast-slot" role="status" aria-live="polite">
        {message.text ? (
          <p className="toast" key={message.n}>
            {message.text}
          </p>
        ) : null}
      </div>
    </Announce.Provider>
  );
}

export const useAnnounce = () => useContext(Announce);
