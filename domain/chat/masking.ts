import { findPhoneNumbersInText } from 'libphonenumber-js';
// One validator module each, not the package's index (its 110 modules load with every process otherwise).
import isCreditCard from 'validator/lib/isCreditCard';
import isEmail from 'validator/lib/isEmail';
import isIBAN from 'validator/lib/isIBAN';

export type MaskedKind = 'card' | 'iban' | 'email' | 'phone';

/** Digit runs that may be a card number (13–19 digits, spaces or dashes between groups). */
const CARD = /(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])/g;
/** Two letters, two check digits, then 11–30 letters or digits, optionally in groups of four. */
const IBAN = /\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b/g;
const EMAIL = /[^\s@<>()[\]"',;:]+@[^\s@<>()[\]"',;:]+\.[A-Za-z]{2,}/g;

/**
 * Masks personal details in a reply: card numbers that pass the Luhn check and an
 * issuer's pattern (validator's isCreditCard) keep their last four digits, IBANs (valid
 * check digits) their country and last four, e-mail addresses (validator's isEmail) and
 * phone numbers in international format (libphonenumber-js) are replaced. Candidates are
 * found by pattern and confirmed by the library, so an order number is left alone.
 */
export function maskPersonalDetails(text: string): { text: string; masked: Record<MaskedKind, number> } {
  const masked: Record<MaskedKind, number> = { card: 0, iban: 0, email: 0, phone: 0 };
  let out = text.replace(CARD, (m) => {
    const digits = m.replace(/\D/g, '');
    if (!isCreditCard(digits)) return m;
    masked.card++;
    return `•••• ${digits.slice(-4)}`;
  });
  out = out.replace(IBAN, (m) => {
    const compact = m.replace(/ /g, '');
    if (!isIBAN(compact)) return m;
    masked.iban++;
    return `${compact.slice(0, 2)}•• •••• ${compact.slice(-4)}`;
  });
  out = out.replace(EMAIL, (m) => {
    if (!isEmail(m)) return m;
    masked.email++;
    return '[email address hidden]';
  });
  // From the end, so earlier offsets stay valid.
  for (const found of findPhoneNumbersInText(out).reverse()) {
    masked.phone++;
    out = `${out.slice(0, found.startsAt)}[phone number hidden]${out.slice(found.endsAt)}`;
  }
  return { text: out, masked };
}
