import { useEffect, useId, useLayoutEffect, useRef, type ReactNode } from 'react';
import { ErrorAlert } from './feedback';

/**
 * A modal dialog on the native <dialog>: showModal() makes the rest of the page inert (focus stays inside), Escape
 * closes it, and the browser gives the focus back to what opened it. Render it only while open; `onClose` runs
 * whatever closed it (Escape, a Cancel button, a finished action).
 */
export function Dialog({ title, onClose, children, wide }: { title: string; onClose: () => void; children: ReactNode; wide?: boolean }) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
  }, []);
  // Closed before React removes it, so the browser restores the focus to the opener.
  useLayoutEffect(() => () => ref.current?.close(), []);
  return (
    <dialog
      ref={ref}
      className={wide ? 'dialog wide' : 'dialog'}
      aria-labelledby={titleId}
      onCancel={(event) => {
        event.preventDefault();
        onClose();
      }}
    >
      <h2 id={titleId}>{title}</h2>
      {children}
    </dialog>
  );
}

/** "Are you sure?": the consequence said plainly, the action named on its button. */
export function ConfirmDialog(props: { title: string; body: ReactNode; confirm: string; danger?: boolean; busy: boolean; error: unknown; onConfirm: () => void; onClose: () => void; children?: ReactNode }) {
  return (
    <Dialog title={props.title} onClose={props.onClose}>
      <div className="dialog-body">{props.body}</div>
      {props.children}
      <ErrorAlert error={props.error} />
      <div className="dialog-actions">
        <button type="button" className="button" onClick={props.onClose}>
          Cancel
        </button>
        <button type="button" className={props.danger ? 'button danger' : 'button primary'} disabled={props.busy} onClick={props.onConfirm}>
          {props.confirm}
        </button>
      </div>
    </Dialog>
  );
}
