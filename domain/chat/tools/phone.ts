import { Call } from '../../../db/entities';
import { DomainError } from '../../errors';
import { DialOutPolicyRepository } from '../../voice/destinations';
import { checkKeypadDigits, checkTransferTarget } from '../../voice/dial-out';
import { VOICE_CONTROL } from '../../voice/sessions';
import type { TurnContext } from '../turn/context';
import type { TurnTool } from './types';

/**
 * The phone's tools, offered to an agent with phone settings (AgentSpec.phone): transfer
 * the call to one of its transfer targets, press keys on the line. Each acts on the live
 * call of the conversation (its `in_progress` call): the turn may run on another worker
 * than the call's media, so the action goes as a control notice on VOICE_CONTROL
 * (`{s: call id, k: 'transfer', target}` / `{s, k: 'dtmf', digits}`), which the call's
 * media activity carries out on its leg (MediaLeg.transfer / sendDigits) once the agent's
 * reply has been said. Numbers (a transfer target, a long run of keypad digits) obey the
 * workspace's destination policy first. A refused call is told why.
 */

const policies = new DialOutPolicyRepository();

async function liveCall(ctx: TurnContext): Promise<{ id: string; phone: string } | null> {
  const row = await ctx.deps.em.fork().findOne(Call, { conversationId: ctx.input.conversationId, workspaceId: ctx.input.workspaceId, status: 'in_progress' }, { orderBy: { createdAt: 'desc' } });
  return row ? { id: row.id, phone: row.phone } : null;
}

async function notify(ctx: TurnContext, notice: Record<string, string>): Promise<void> {
  // raw SQL: pg_notify has no ORM form.
  // eslint-disable-next-line no-restricted-syntax
  await ctx.deps.em.fork().execute('select pg_notify(?, ?)', [VOICE_CONTROL, JSON.stringify(notice)]);
}

const refused = (err: unknown) => JSON.stringify({ error: err instanceof DomainError ? err.message : 'refused' });

export const transferCall: TurnTool = {
  name: 'transfer_call',
  definition: (ctx) => {
    const targets = ctx.spec.phone?.transfer_targets ?? [];
    if (!targets.length) return null;
    return {
      name: 'transfer_call',
      description: `Transfer the phone call to a person. Only during a phone call; say first that you are transferring. Targets: ${targets.map((t) => (t.description ? `${t.name} (${t.description})` : t.name)).join('; ')}.`,
      parameters: { type: 'object', properties: { target: { type: 'string', enum: targets.map((t) => t.name) } }, required: ['target'] },
    };
  },
  accepts: (ctx) => (ctx.spec.phone?.transfer_targets ?? []).length > 0,
  async run(ctx, args) {
    const target = (ctx.spec.phone?.transfer_targets ?? []).find((t) => t.name === args.target);
    if (!target) return JSON.stringify({ error: `no transfer target named ${String(args.target)}` });
    let to: string;
    try {
      to = checkTransferTarget(target.to, await policies.dialOutPolicy(ctx.deps.em, ctx.input.workspaceId));
    } catch (err) {
      return refused(err);
    }
    const call = await liveCall(ctx);
    if (!call) return JSON.stringify({ error: 'no phone call is live in this conversation' });
    await notify(ctx, { s: call.id, k: 'transfer', target: to });
    return JSON.stringify({ ok: true, note: 'The call is transferred once you have spoken. Tell the caller, briefly.' });
  },
};

export const sendDigits: TurnTool = {
  name: 'send_digits',
  definition: (ctx) =>
    ctx.spec.phone
      ? {
          name: 'send_digits',
          description: "Press keys on the phone line (an automated menu's choice, an extension). Only during a phone call.",
          parameters: { type: 'object', properties: { digits: { type: 'string', description: '0-9, *, #, A-D' } }, required: ['digits'] },
        }
      : null,
  accepts: (ctx) => !!ctx.spec.phone,
  async run(ctx, args) {
    const call = await liveCall(ctx);
    if (!call) return JSON.stringify({ error: 'no phone call is live in this conversation' });
    let digits: string;
    try {
      digits = checkKeypadDigits(String(args.digits ?? ''), await policies.dialOutPolicy(ctx.deps.em, ctx.input.workspaceId), call.phone);
    } catch (err) {
      return refused(err);
    }
    await notify(ctx, { s: call.id, k: 'dtmf', digits });
    return JSON.stringify({ ok: true, sent: digits });
  },
};
