import { OperationalError } from '../../lib/failures';
import type { CallEnd } from './types';

/** A dial-out that ended before it was answered, with the call's terminal status. */
export class DialFailed extends OperationalError {
  constructor(
    readonly status: Exclude<CallEnd, 'completed'>,
    message: string,
    readonly sipStatusCode?: number,
  ) {
    // Never retried by itself: a second attempt is a second phone call.
    super('DialFailed', message, false);
  }
}

/**
 * The SIP final response of a failed dial as the call's status: busy (486 Busy Here,
 * 600 Busy Everywhere, 603 Decline), no answer (408 Request Timeout, 480 Temporarily
 * Unavailable, 487 Request Terminated: the ringing timeout ran out), anything else failed.
 */
export function dialStatus(sipStatusCode: number | undefined): Exclude<CallEnd, 'completed'> {
  if (sipStatusCode === 486 || sipStatusCode === 600 || sipStatusCode === 603) return 'busy';
  if (sipStatusCode === 408 || sipStatusCode === 480 || sipStatusCode === 487) return 'no_answer';
  return 'failed';
}
