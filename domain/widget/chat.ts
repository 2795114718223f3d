import type { Logger } from 'pino';
import { replyFrame, type ChatTranscript } from '../chat/transcript';
import type { TaskService } from '../chat/tasks';
import type { FeedbackService } from './feedback';
import { DomainError } from '../errors';
import { newId } from '../../lib/ids';
import { noWorkflowService, type ConversationRuns } from '../ports/workflow-runs';
import type { WidgetSessionService } from './sessions';
import type { SiteRow } from './sites';
import type { UploadSearchService, UploadService } from './uploads';

type UserContext = Parameters<WidgetSessionService['authorize']>[2];

/** POST /send's body, as the route parsed it. */
export interface WidgetSendInput {
  conversation_id: string;
  customer_id?: string;
  text: string;
  file_refs?: string[];
  user_context?: UserContext;
  delivery: 'sync' | 'async';
  client_message_id?: string;
}

/** POST /send's answer: 202 with the ids (async), or 200 with the reply (sync). */
export type WidgetSendAnswer =
  | { status: 202; body: { accepted: true; message_id: string; reply_id: string; server_time: string } }
  | { status: 200; body: { message_id: string } & Partial<Omit<ReturnType<typeof replyFrame>, 'type' | 'reply_id'>> & { text: string } };

export interface WidgetChatDeps {
  widget: Pick<WidgetSessionService, 'agentFor' | 'authorize' | 'startNew' | 'leaveContact'>;
  uploads: Pick<UploadService, 'forSend'>;
  uploadSearch: Pick<UploadSearchService, 'needsIndexing' | 'describeStored' | 'resignCitations'>;
  transcript: Pick<ChatTranscript, 'announceVisitorMessage' | 'get' | 'history'>;
  tasks: Pick<TaskService, 'open'>;
  feedback: Pick<FeedbackService, 'rateReply' | 'rateConversation'>;
  /** The conversation actors' client; null in a process without a workflow service. */
  conversations: () => ConversationRuns | null;
}

/**
 * The visitor's side of the conversation actor (the widget's send, history, new
 * conversation and task cancelling): the identity rules, the uploads attached, the actor's
 * update, and the answer the route replies with.
 */
export class WidgetChat {
  constructor(private readonly deps: WidgetChatDeps) {}

  private actors(): ConversationRuns {
    const runs = this.deps.conversations();
    if (!runs) throw noWorkflowService();
    return runs;
  }

  /**
   * A visitor message: checked (identity, customer, open conversation, the send rate
   * `limitSends` enforces, text or files), its uploads attached, stored and handed to the
   * actor, whose validator answers 409 task_in_progress while a blocking task runs; the
   * visitor's other tabs hear of it; a sync send waits for the reply.
   */
  async send(site: SiteRow, body: WidgetSendInput, opts: { limitSends: (conversationId: string) => Promise<void>; log: Pick<Logger, 'warn'> }): Promise<WidgetSendAnswer> {
    const agent = await this.deps.widget.agentFor(site);
    const conv = await this.deps.widget.authorize(site, body.conversation_id, body.user_context, agent.spec);
    if (body.customer_id && body.customer_id !== conv.customer_id) throw new DomainError('forbidden', 'customer_id does not match the conversation');
    if (conv.status === 'closed') throw new DomainError('conversation_closed', 'This conversation is closed; start a new one with conversations/new');
    await opts.limitSends(conv.id);
    const refs = [...new Set(body.file_refs ?? [])];
    if (!body.text.trim() && !refs.length) throw new DomainError('invalid_request', 'text: may be empty only when file_refs is present');
    const uploads = refs.length ? await this.deps.uploads.forSend(site, conv.id, refs) : [];

    // Stored, then handed to the actor, whose validator answers 409 task_in_progress while a blocking task runs.
    const clientMessageId = body.client_message_id ?? newId('msg');
    const result = await this.actors().send(
      { id: conv.id, workspaceId: site.workspace_id },
      {
        clientMessageId,
        text: body.text,
        uploadIds: uploads.map((u) => u.id),
        indexUploads: uploads.filter((u) => this.deps.uploadSearch.needsIndexing(u)).map((u) => ({ uploadId: u.id, fileName: u.file_name })),
        delivery: body.delivery,
      },
    );
    // The visitor's other tabs show the message too (a repeat was announced the first time). The message is taken
    // already: a failed announcement is logged, never the send's failure.
    if (!result.duplicate) {
      await this.deps.transcript
        .announceVisitorMessage(conv.id, { message_id: result.message_id, reply_id: result.reply_id, client_message_id: clientMessageId }, (a) => this.deps.uploadSearch.describeStored(a))
        .catch((err: Error) => opts.log.warn({ err: err.message, conversationId: conv.id }, 'visitor message not announced to the other sockets'));
    }
    if (body.delivery === 'async') {
      return { status: 202, body: { accepted: true, message_id: result.message_id, reply_id: result.reply_id, server_time: new Date().toISOString() } };
    }
    if (result.error) throw new DomainError('workflow_execution_failed', 'The agent could not answer this message; please try again');
    // A human has the conversation: the message is taken, the agent does not answer; the human's reply comes unsolicited.
    if (result.reply?.held) return { status: 200, body: { message_id: result.message_id, text: '' } };
    // A repeated send whose first answer is no longer in the actor's memory: read it back.
    const answer = result.reply ?? (await this.deps.transcript.get(result.reply_id));
    if (!answer && conv.needs_human) return { status: 200, body: { message_id: result.message_id, text: '' } };
    if (!answer) throw new DomainError('message_in_progress', 'This message is still being answered; the reply will follow');
    // The same optional fields, non-empty only, as the socket's reply frame.
    const { type: _type, reply_id: _replyId, ...optional } = replyFrame({ id: result.reply_id, text: answer.text, attachments: answer.attachments ?? [], extras: answer.extras ?? {}, unsolicited: false });
    return { status: 200, body: { message_id: result.reply_id, ...optional } };
  }

  /** A page of the transcript (the identity rules first), attachments and citations freshly signed. */
  async history(site: SiteRow, q: { conversation_id?: string; before?: string; user_context?: UserContext }, limit: number) {
    if (!q.conversation_id) throw new DomainError('invalid_request', 'conversation_id: required');
    const conv = await this.deps.widget.authorize(site, q.conversation_id, q.user_context);
    return this.deps.transcript.history(
      conv.id,
      { limit, before: q.before },
      (attachments) => this.deps.uploadSearch.describeStored(attachments),
      (citations) => this.deps.uploadSearch.resignCitations(site, citations),
    );
  }

  /** Closes the visitor's open conversation (its actor told to finish, when there is a workflow service) and starts a fresh one. */
  async startNew(site: SiteRow, body: Parameters<WidgetSessionService['startNew']>[1]): Promise<{ conversation_id: string; customer_id: string }> {
    const { closed, ...ref } = await this.deps.widget.startNew(site, body);
    await this.deps.conversations()?.closed(closed);
    return ref;
  }

  /** The conversation's open background tasks (the identity rules first). */
  async openTasks(site: SiteRow, conversationId: string, ctx: UserContext | undefined) {
    const conv = await this.deps.widget.authorize(site, conversationId, ctx);
    return { tasks: await this.deps.tasks.open(conv.id) };
  }

  /** An email the visitor leaves for the team: the identity rules, the conversation's send rate (`limitSends`), then stored. */
  async leaveContact(
    site: SiteRow,
    body: { conversation_id: string; customer_id?: string; email: string; user_context?: UserContext },
    limitSends: (conversationId: string) => Promise<void>,
  ): Promise<{ stored: true; email: string }> {
    const conv = await this.deps.widget.authorize(site, body.conversation_id, body.user_context);
    await limitSends(conv.id);
    return this.deps.widget.leaveContact(site, conv, body);
  }

  /** A thumb on an agent's reply (the identity rules first); `created`: the reply had none before. */
  async rateReply(site: SiteRow, body: Parameters<FeedbackService['rateReply']>[2] & { conversation_id: string; user_context?: UserContext }) {
    const conv = await this.deps.widget.authorize(site, body.conversation_id, body.user_context);
    return this.deps.feedback.rateReply(site, conv.id, body);
  }

  /** The visitor's rating of the conversation (the identity rules first; a closed conversation may be rated); `created`: it had none before. */
  async rateConversation(site: SiteRow, body: Parameters<FeedbackService['rateConversation']>[2] & { conversation_id: string; user_context?: UserContext }) {
    const conv = await this.deps.widget.authorize(site, body.conversation_id, body.user_context);
    return this.deps.feedback.rateConversation(site, conv.id, body);
  }

  /** Cancels an open background task of the conversation; false when it has none by that key. */
  async cancelTask(site: SiteRow, conversationId: string, taskKey: string, ctx: UserContext | undefined): Promise<{ cancelled: boolean }> {
    const conv = await this.deps.widget.authorize(site, conversationId, ctx);
    const task = (await this.deps.tasks.open(conv.id)).find((t) => t.task_key === taskKey);
    if (!task) return { cancelled: false };
    return { cancelled: await this.actors().cancelTask(conv.id, task.task_key) };
  }
}
