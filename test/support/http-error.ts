import { ApiError, asApiError } from '../../api/http-errors';

/**
 * How the API answers what `work` throws (status, code, body, headers): domain errors
 * carry no status, so a test of a service reads it through the API's one table.
 */
export async function answerOf(work: Promise<unknown> | (() => unknown)): Promise<ApiError> {
  let err: unknown;
  try {
    await (typeof work === 'function' ? work() : work);
  } catch (e) {
    err = e;
  }
  if (err === undefined) throw new Error('not refused');
  const answer = asApiError(err);
  if (!(answer instanceof ApiError)) throw err;
  return answer;
}
