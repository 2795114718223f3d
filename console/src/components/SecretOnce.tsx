import { useState } from 'react';
import { copyToClipboard } from '../lib/format';
import { ErrorAlert } from './feedback';

/**
 * A secret shown this once (a new key's value, an invitation link): in a read-only field a person can select, with a
 * Copy button. It leaves the page with the dialog that shows it.
 */
export function SecretOnce({ label, value, note }: { label: string; value: string; note: string }) {
  const [copied, setCopied] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const copy = async () => {
    setError(null);
    try {
      await copyToClipboard(value);
      setCopied(true);
    } catch (err) {
      setError(err instanceof Error ? err.message : err);
    }
  };
  return (
    <div className="secret">
      <p className="note">{note}</p>
      <label className="field">
        <span>{label}</span>
        <input className="mono" readOnly value={value} onFocus={(e) => e.currentTarget.select()} />
      </label>
      <div className="row">
        <button type="button" className="button primary" onClick={copy}>
          Copy
        </button>
        <span role="status" className="muted">
          {copied ? 'Copied to the clipboard.' : ''}
        </span>
      </div>
      <ErrorAlert error={error} />
    </div>
  );
}
