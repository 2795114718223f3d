import { Field } from '../../components/Field';
import { ApiError } from '../../lib/api';

/** What a sign-in (or a password reset) offers to enrol when the workspace requires a second factor. */
export type TotpEnrolment = { secret: string; otpauth_uri: string };

/** Whether an answer asks for the authenticator's code (then the form shows its field). */
export const asksForCode = (err: unknown) => err instanceof ApiError && ['second_factor_required', 'invalid_totp_code', 'totp_enrolment_required'].includes(err.code);

/** The secret a sign-in offers to enrol (403 totp_enrolment_required). */
export function enrolmentOf(err: unknown): TotpEnrolment | null {
  if (!(err instanceof ApiError) || err.code !== 'totp_enrolment_required') return null;
  const e = err.body.enrolment as Partial<TotpEnrolment> | undefined;
  return typeof e?.secret === 'string' && typeof e.otpauth_uri === 'string' ? { secret: e.secret, otpauth_uri: e.otpauth_uri } : null;
}

/** The second factor's answers said for a person; any other error as it is. */
export function secondFactorMessage(err: unknown): unknown {
  if (!(err instanceof ApiError)) return err;
  if (err.code === 'second_factor_required') return 'Enter the code from your authenticator app.';
  if (err.code === 'totp_enrolment_required') return null;
  if (err.code === 'invalid_totp_code') return 'That code is not right, or it was used already. Enter the next code your app shows.';
  return err;
}

/** The key to add (when enrolling) and the code field of a form that signs in. */
export function SecondFactorFields({ enrolment, code, onCode }: { enrolment: TotpEnrolment | null; code: string; onCode: (code: string) => void }) {
  return (
    <>
      {enrolment ? (
        <div className="notice stack-tight">
          <p>Your workspace requires two-step sign-in. Add this key to an authenticator app, then enter the code it shows.</p>
          <p>
            <a href={enrolment.otpauth_uri}>Open in an authenticator app</a>, or type the key: <code className="mono wrap-anywhere">{enrolment.secret}</code>
          </p>
        </div>
      ) : null}
      <Field label="Authentication code" name="totp_code" inputMode="numeric" autoComplete="one-time-code" pattern="[0-9 ]{6,8}" required value={code} onChange={(e) => onCode(e.target.value)} hint="The six digits your authenticator app shows for Concierge." />
    </>
  );
}
