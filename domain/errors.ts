/**
 * The domain's errors: `DomainError` (a contract code, a message, details; no HTTP status),
 * defined in lib/errors.ts so lib/ and db/ can raise it too. The API maps each code to its
 * status in one table (api/http-errors.ts).
 */
export { DomainError, invalidRequest, notFound, type DomainErrorCode, type RetryHint } from '../lib/errors';
