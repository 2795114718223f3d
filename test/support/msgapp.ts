import { agentReplyId } from '../../app/temporal-clients/conversations';
import { Message, MsgappInboundEvent } from '../../db/entities';
import type { Orm } from '../../db/orm';
import { messageSendWorkflowId } from '../../workflows/message-send';
import { msgappInboundWorkflowId, type MsgappInboundResult } from '../../workflows/msgapp-inbound';
import { OutboxDispatcher } from '../../worker/outbox-dispatcher';
import { msgappInbound } from '../../worker/outbox-sources';
import type { TestApp } from './app';
import { testLogger } from './secret-log';
import { workflowResult, type TestWorker } from './temporal';

/**
 * The worker's relay of inbound msgapp messages (as worker/runtime.ts runs it), with a
 * short sweep: a message the webhook recorded goes to its conversation's actor, a media
 * message becomes its `msgapp-inbound:<wamid>` workflow.
 */
export async function startInboundDispatcher(tw: TestWorker): Promise<OutboxDispatcher> {
  const source = msgappInbound(tw.composition.services.providerEvents, tw.client, { taskQueue: tw.taskQueue, actor: tw.composition.workflows!.conversations });
  const d = new OutboxDispatcher(tw.composition.notifications!, [source], testLogger(), 500);
  await d.start();
  return d;
}

/**
 * Waits for an inbound message to be handed on — a text message (recorded by the webhook)
 * to its conversation's actor by the relay, a media message through its workflow — and,
 * when the agent answers it, for the reply's send (`message-send:<reply id>`) too, so what
 * a test sends next is not overtaken by the agent. `reply: false`: the agent will not send
 * (a human has the conversation).
 */
export async function inboundDone(tw: TestWorker, providerMessageId: string, opts: { reply?: boolean } = {}): Promise<MsgappInboundResult> {
  const done = await handedOn(tw, providerMessageId);
  if (done.status === 'recorded' && done.answered && opts.reply !== false) await workflowResult(tw.client, messageSendWorkflowId(agentReplyId(done.messageId)), 30_000);
  return done;
}

/** An inbound message's outcome once the relay (or its workflow) handed it on: as the inbound workflow answers it. */
async function handedOn(tw: TestWorker, providerMessageId: string): Promise<MsgappInboundResult> {
  const em = tw.composition.em;
  const deadline = Date.now() + 15_000;
  for (;;) {
    const event = await em.fork().findOne(MsgappInboundEvent, { providerMessageId }, { refresh: true });
    if (event && (event.message as { media?: unknown }).media) return workflowResult<MsgappInboundResult>(tw.client, msgappInboundWorkflowId(providerMessageId));
    if (event?.dispatchedAt) {
      if (!event.recordedMessageId) return { status: 'duplicate' };
      const message = await em.fork().findOneOrFail(Message, { id: event.recordedMessageId });
      if (!message.conversationId) return { status: 'recorded', messageId: message.id };
      const party = { workspaceId: event.workspaceId, agentId: event.agentId, customerId: message.customerId ?? '', conversationId: message.conversationId };
      const silence = await tw.composition.services.providerEvents.agentSilence(party);
      return { status: 'recorded', messageId: message.id, answered: !silence, ...(silence ? { silence } : {}) };
    }
    if (Date.now() > deadline) throw new Error(`inbound message ${providerMessageId} was not handed on within 15 s (${event ? 'stored' : 'not stored'})`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * An agent on the fake messaging app's number `number` (its access token stored as the workspace's credential),
 * published: it sends, hands off to a person ("A colleague will write to you here shortly."), and has one approved
 * template, order_update (en): "Your order {{1}} is on its way.". Its id.
 */
export async function publishedMsgappAgent(t: TestApp, auth: Record<string, string>, workspaceId: string, number: { id: string; display: string }, accessToken = 'token-1'): Promise<string> {
  const cred = (await t.services.credentials.create(workspaceId, 'msgapp_access_token', 'number', accessToken)).id;
  const made = await t.app.inject({
    method: 'POST',
    url: '/api/v1/agents',
    headers: auth,
    payload: {
      name: 'Messaging helper',
      instructions: 'Help customers.',
      triggers: { msgapp: { number: number.display, phone_number_id: number.id, credential_id: cred } },
      actions: [{ type: 'sender' }, { type: 'handoff', message: 'A colleague will write to you here shortly.' }],
      templates: [{ name: 'order_update', language: 'en', body: 'Your order {{1}} is on its way.', status: 'approved' }],
    },
  });
  if (made.statusCode !== 201) throw new Error(`agent not created: ${made.body}`);
  const published = await t.app.inject({ method: 'POST', url: `/api/v1/agents/${made.json().id}/publish`, headers: auth });
  if (published.statusCode !== 200) throw new Error(`agent not published: ${published.body}`);
  return made.json().id as string;
}

/** A day later: the conversation's 24-hour window has closed (its inbound messages and last inbound time 25 hours back). */
export async function closeWindow(orm: Orm, conversationId: string): Promise<void> {
  await orm.em.fork().execute(`update messages set created_at = now() - interval '25 hours' where conversation_id = ? and direction = 'inbound'`, [conversationId]);
  await orm.em.fork().execute(`update conversations set last_inbound_at = now() - interval '25 hours' where id = ?`, [conversationId]);
}
