import { parsePhoneNumberFromString, type CountryCode } from 'libphonenumber-js/max';
import type { ICall } from '../../db/entities';
import { DomainError } from '../errors';
import { checkDestination, type DialOutPolicy } from './destinations';
import { enforceDialOut, type DialOutLimits } from '../../lib/ratelimit';
import { noWorkflowService, type CallRuns } from '../ports/workflow-runs';
import type { CallService } from './calls';
import type { VoiceSessionService } from './sessions';

export interface DialOutDeps {
  sessions: Pick<VoiceSessionService, 'reserveCall' | 'callStatus'>;
  /** The API's checks of a call and the call as it shows it. */
  calls: Pick<CallService, 'prepareOutbound' | 'get'>;
  /** The call workflow's client; null in a process without a workflow service. */
  runs: () => CallRuns | null;
  /** The telephony provider's kind (recorded on the call), or null when this process has none. */
  telephonyKind: () => string | null;
}

/**
 * Places a checked dial-out call (POST /widget/call, POST /api/v1/outbound channel voice):
 * takes a slot and pays the first minute (429 concurrent_voice_limit_reached, 402
 * out_of_credits), then starts its `call:call_…` workflow; a call whose workflow could not
 * start is marked failed, so it holds no slot.
 */
export class DialOut {
  constructor(private readonly deps: DialOutDeps) {}

  async place(c: { workspaceId: string; siteId: string | null; conversationId: string; agentId: string; phone: string; destinationClass?: 'fixed' | 'mobile' | 'other'; creditsPerMinute?: number }): Promise<ICall> {
    const runs = this.deps.runs();
    if (!runs) throw noWorkflowService();
    const row = await this.deps.sessions.reserveCall({ ...c, provider: this.deps.telephonyKind() ?? 'none' });
    try {
      await runs.startCall({ callId: row.id, workspaceId: c.workspaceId, conversationId: c.conversationId, phone: c.phone, siteId: c.siteId });
    } catch (err) {
      await this.deps.sessions.callStatus(row.id, 'failed', { error: 'the call could not be started' });
      throw err;
    }
    return row;
  }

  /**
   * POST /api/v1/outbound channel voice: the agent phones `to`. Checked (the agent, its
   * toggle, the number, the prerequisites, the conversation: CallService.prepareOutbound),
   * the calls to that number across all workspaces capped once the number is accepted
   * (429 rate_limited), placed, and answered as GET /api/v1/calls/{id} shows it.
   */
  async fromApi(workspaceId: string, body: { to: string; agent_id: string; conversation_id?: string }, limits: DialOutLimits) {
    const call = await this.deps.calls.prepareOutbound(workspaceId, body, (dest) => enforceDialOut(limits, 'perDestination', dest.phone));
    const row = await this.place({ workspaceId, siteId: null, ...call });
    return this.deps.calls.get(workspaceId, row.id);
  }
}

/** An extension: what a transfer or the keypad may reach without the destination policy (1-6 digits, * and #). */
const EXTENSION = /^[0-9*#]{1,6}$/;

/**
 * A transfer target (AgentSpec.phone.transfer_targets[].to) before the REFER: an extension
 * of the trunk's PBX as it is, a number only when it passes the workspace's destination
 * policy (checkDestination, as a dial-out number: 400 invalid_phone_number naming why).
 * What goes into Refer-To.
 */
export function checkTransferTarget(to: string, policy: DialOutPolicy): string {
  const t = to.trim();
  if (EXTENSION.test(t)) return t;
  if (!t.startsWith('+')) throw new DomainError('invalid_phone_number', 'phone number: a transfer target is a number in E.164 (+14155550123) or an extension of 1-6 digits, * and #');
  return checkDestination(t, policy).phone;
}

/**
 * Keys the agent presses on a call (send_digits): 1-32 of 0-9 * # A-D. A menu choice or an
 * extension (runs of at most 6 digits) goes as it is; a longer run of digits is a number
 * being dialled through the far end (a PBX's outside line, a calling card) and must pass
 * the destination policy, read in international form (+ the digits) or in the national
 * form of the called number's country — one reading that passes is enough; none: 400
 * invalid_phone_number with the reason.
 */
export function checkKeypadDigits(digits: string, policy: DialOutPolicy, calledPhone: string): string {
  const d = digits.trim().toUpperCase();
  if (!/^[0-9*#A-D]{1,32}$/.test(d)) throw new DomainError('invalid_request', 'digits: 1-32 of 0-9, *, #, A-D');
  const country = parsePhoneNumberFromString(calledPhone)?.country as CountryCode | undefined;
  for (const run of d.match(/[0-9]{7,}/g) ?? []) {
    const readings = [`+${run}`, ...(country ? [parsePhoneNumberFromString(run, country)?.number].filter((x): x is NonNullable<typeof x> => !!x) : [])];
    const refusals: string[] = [];
    const passes = readings.some((r) => {
      try {
        checkDestination(r, policy);
        return true;
      } catch (err) {
        refusals.push(err instanceof DomainError ? err.message.replace(/^phone number: /, '') : 'not a number the destination policy allows');
        return false;
      }
    });
    if (!passes) {
      // The reason of a reading that is a number (premium-rate, a country not allowed) says more than "not valid".
      const why = refusals.find((r) => !r.startsWith('not a valid')) ?? refusals[0];
      throw new DomainError('invalid_phone_number', `keypad digits ${run} read as a number: ${why}`);
    }
  }
  return d;
}
