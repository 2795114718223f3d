import { z } from 'zod';

/**
 * What `String.prototype.trim` removes (ECMAScript WhiteSpace and LineTerminator), spelled
 * as code points: the OpenAPI document carries these patterns, and every regex engine that
 * reads them (a client's, a fuzzer's) must agree with Node's on which strings are blank,
 * which `\s` does not guarantee (Python's `\s` lacks U+FEFF and holds U+001C–U+001F).
 */
const TRIMMED = '\\u0009-\\u000d\\u0020\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff';

/** A blank string: nothing but what trim() removes (or nothing at all). */
export const BLANK = new RegExp(`^[${TRIMMED}]*$`);

/** No C0 control character and no DEL. */
export const NO_CONTROL = /^[^\u0000-\u001f\u007f]*$/;

/**
 * Refuses a blank string, and says so in the document as `not: {pattern: BLANK}` (a negated
 * anchored pattern rather than "holds a non-blank character": generators, Schemathesis's
 * among them, then fit a long string's length into the string's own pattern instead of
 * searching for one that matches two).
 */
export const notBlank = (s: z.ZodString, message = 'must not be blank') => s.refine((v) => !BLANK.test(v), message).meta({ not: { pattern: BLANK.source } });

/**
 * "Not blank and no NUL" as one anchored pattern, for a multipart field: its schema only
 * documents what the handler checks, and Schemathesis (4.32) cannot judge a `not` beside a
 * binary file part in the same form.
 */
export const NON_BLANK_WITHOUT_NUL = `^[^\\u0000]*[^\\u0000${TRIMMED}][^\\u0000]*$`;

/**
 * A required free text of at most `max` characters that is not blank; the value is trimmed.
 * The length is checked before trimming, so the document's `maxLength` is the server's limit.
 */
export const nonBlankText = (max: number, blank = 'must not be blank') => notBlank(z.string().min(1).max(max), blank).trim();
