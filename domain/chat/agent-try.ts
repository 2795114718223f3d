import type { EntityManager } from '@mikro-orm/postgresql';
import type { AgentService } from '../agents/agents';
import { DomainError } from '../errors';
import { noWorkflowService, type ConversationRuns } from '../ports/workflow-runs';
import type { Repositories } from '../repositories';
import { newId } from '../../lib/ids';
import { HANDOFF_STUBBED_EVENT } from './tools/handoff';

/** What the agent would have done outside, had this not been a test: a tool call or a send, recorded and (if it acts outside) not made. */
export interface TryAction {
  kind: 'mcp_tool' | 'sender' | 'handoff';
  /** The MCP tool's name, `send_reply` for a messaging channel's send, `handoff` for a person asked to take over. */
  name: string;
  server_id: string | null;
  arguments: Record<string, unknown>;
  /** Not made: it acts outside (an MCP tool its server does not mark read-only, a send). */
  stubbed: boolean;
  ok: boolean;
  output: string;
}

export interface TryTurn {
  conversation_id: string;
  message_id: string;
  reply: { id: string; text: string; extras: Record<string, unknown>; handoff: boolean; held: boolean } | null;
  /** Why the turn gave no reply (the model failed, the conversation is closed). */
  error: string | null;
  actions: TryAction[];
}

/** The timeline event of a send that a test conversation did not make. */
export const SENDER_STUBBED_EVENT = 'sender.stubbed';

/**
 * The console's "Try it" (POST /api/console/agents/{id}/try): one real turn of the agent, through its conversation actor
 * as a web visitor's message goes, in a test conversation (`is_test`, made here and nowhere else) that no list,
 * analytics or billing counts. Tools that act outside are stubbed by the turn (domain/chat/tools/mcp.ts, and a handoff in
 * tools/handoff.ts: no person is asked); an agent with a
 * messaging number would send its reply there, which is recorded here and not done. Everything is scoped to the
 * session's workspace: another workspace's agent or conversation is 404, as an unknown id.
 */
export class AgentTrials {
  constructor(
    private readonly deps: {
      em: EntityManager;
      repos: Pick<Repositories, 'conversations'>;
      agents: Pick<AgentService, 'get'>;
      conversations: () => ConversationRuns | null;
    },
  ) {}

  async run(workspaceId: string, agentId: string, body: { text: string; conversation_id?: string }): Promise<TryTurn> {
    const { em, repos, agents } = this.deps;
    const agent = await agents.get(workspaceId, agentId);
    const runs = this.deps.conversations();
    if (!runs) throw noWorkflowService();
    let conversationId = body.conversation_id;
    if (conversationId) {
      const conv = await repos.conversations.testConversation(em.fork(), workspaceId, agent.id, conversationId);
      if (!conv) throw new DomainError('not_found', `No test conversation '${conversationId}' with this agent; leave conversation_id out to start one`);
      if (conv.status !== 'open') throw new DomainError('conversation_closed', 'This test conversation is closed; start a new one');
    } else {
      conversationId = await repos.conversations.insertTestConversation(em.fork(), { workspaceId, agentId: agent.id });
    }
    const sent = await runs.send({ id: conversationId, workspaceId }, { clientMessageId: newId('msg'), text: body.text, uploadIds: [], indexUploads: [], delivery: 'sync' });
    const reply = sent.reply;
    const events = await repos.conversations.replyEvents(em.fork(), conversationId, sent.reply_id);
    const actions: TryAction[] = events.flatMap((e): TryAction[] => {
      if (e.type === HANDOFF_STUBBED_EVENT) {
        return [{ kind: 'handoff', name: 'handoff', server_id: null, arguments: { reason: e.data.reason }, stubbed: true, ok: true, output: 'No person was asked (test conversation).' }];
      }
      if (e.type !== 'mcp.tool_call') return [];
      return [
        {
          kind: 'mcp_tool',
          name: String(e.data.tool ?? ''),
          server_id: typeof e.data.server_id === 'string' ? e.data.server_id : null,
          arguments: (e.data.arguments ?? {}) as Record<string, unknown>,
          stubbed: e.data.stubbed === true,
          ok: e.data.ok === true,
          output: String(e.data.output ?? ''),
        },
      ];
    });
    // On its messaging number the reply would leave as a message: said, recorded, never sent.
    const number = agent.spec.triggers.msgapp?.number;
    if (reply && !reply.held && reply.text && number) {
      const send: TryAction = {
        kind: 'sender',
        name: 'send_reply',
        server_id: null,
        arguments: { channel: 'msgapp', from: number, text: reply.text },
        stubbed: true,
        ok: true,
        output: `On msgapp this reply would leave as a message from ${number}; not sent (test conversation).`,
      };
      await repos.conversations.addConversationEvent(em.fork(), conversationId, SENDER_STUBBED_EVENT, { ...send.arguments, reply_id: sent.reply_id });
      actions.push(send);
    }
    return {
      conversation_id: conversationId,
      message_id: sent.message_id,
      reply: reply && !sent.error ? { id: reply.reply_id, text: reply.text, extras: { ...reply.extras } as Record<string, unknown>, handoff: reply.handoff, held: reply.held === true } : null,
      error: sent.error ?? null,
      actions,
    };
  }
}
