import type { EntityManager } from '@mikro-orm/postgresql';
import type { AgentService } from '../agents/agents';
import { ChatFrames } from '../chat/frames';
import { replyFrame, type ChatTranscript, type HistoryMessage } from '../chat/transcript';
import type { ConversationInbox, InboxFilter, InboxRow } from '../conversations/inbox';
import { DomainError } from '../errors';
import type { DomainErrorCode } from '../../lib/errors';
import type { MessageService } from '../messaging/messages';
import { MAX_TEXT_CHARS, SESSION_WINDOW_HOURS } from '../messaging/plan';
import type { MessageRuns } from '../ports/workflow-runs';
import { noWorkflowService, type ConversationRuns } from '../ports/workflow-runs';
import type { CallService } from '../voice/calls';
import type { StagedBlob } from '../ports/blob-store';
import type { UploadSearchService, UploadService } from '../widget/uploads';
import { newId } from '../../lib/ids';
import { SYSTEM_ACTOR, type OperatorAction, type OperatorActionResult, type OperatorActor } from './actions';
import { WORKING_ROLES, type InboxStore } from './store';

/** Who acts, as the console's session names them. */
export interface InboxUser {
  id: string;
  email: string;
  name: string | null;
  workspaceId: string;
  role: string;
}

/** An action as the API takes it (the actor and the ids are added here). */
export type ActionRequest =
  | { kind: 'take' }
  | { kind: 'assign'; assignee_id: string }
  | { kind: 'reply'; text?: string; template?: { name: string; language?: string; variables?: string[] }; attachments?: string[] }
  | { kind: 'note'; text: string }
  | { kind: 'hand_back' }
  | { kind: 'close'; reason: string };

export interface InboxDeps {
  em: EntityManager;
  conversations: ConversationInbox;
  store: InboxStore;
  transcript: ChatTranscript;
  messages: Pick<MessageService, 'plan'>;
  agents: Pick<AgentService, 'get'>;
  calls: Pick<CallService, 'recordingsOfConversation'>;
  uploadSearch: Pick<UploadSearchService, 'describeStored' | 'signKbFile'>;
  /** Files people attach to web chat replies, stored as the widget's uploads are. */
  uploads: Pick<UploadService, 'storeForOperator' | 'operatorAttachment'>;
  /** An active knowledge-base file of the workspace a person may attach (its bytes' reference), or null. */
  kbFile: (workspaceId: string, fileId: string) => Promise<{ sha256: string; mime_type: string; name: string } | null>;
  /** The conversation actors; null in a process without a workflow service (503 workflow_unavailable). */
  runs: () => ConversationRuns | null;
}

const notFound = (id: string) => new DomainError('not_found', `No conversation with id '${id}' in this workspace`);
const refused = (code: string, message: string): OperatorActionResult => ({ ok: false, code, message });
const displayName = (a: OperatorActor) => a.name?.trim() || a.email.split('@')[0];

/**
 * The console's inbox (issue 31): the workspace's conversations across channels, one conversation's transcript with
 * its notes and recordings, and every person's action on it through the conversation's actor (the `operatorAction`
 * update; `apply` is its activity's body); the queue's automatic assignment (round robin over available people within
 * their capacity) and re-queueing of what people who went offline or away held.
 */
export class InboxService {
  private readonly frames: ChatFrames;

  constructor(private readonly deps: InboxDeps) {
    this.frames = new ChatFrames(deps.em);
  }

  get store(): InboxStore {
    return this.deps.store;
  }

  list(user: InboxUser, filter: InboxFilter) {
    return this.deps.conversations.list(user.workspaceId, user.id, filter);
  }

  /** One conversation as a person opens it: the transcript as the visitor saw it, the team's notes, recordings, how to reply. */
  async detail(user: InboxUser, id: string) {
    const conversation = await this.deps.conversations.row(user.workspaceId, id);
    if (!conversation) throw notFound(id);
    const history = await this.deps.transcript.history(id, { limit: 200 }, (attachments) => this.deps.uploadSearch.describeStored(attachments));
    const [notes, recordings] = await Promise.all([
      this.deps.store.notes(user.workspaceId, id),
      conversation.channel === 'voice' || conversation.channel === 'web' ? this.deps.calls.recordingsOfConversation(user.workspaceId, id) : Promise.resolve([]),
    ]);
    return { conversation, messages: history.messages as HistoryMessage[], has_more: history.has_more, notes, recordings, reply: await this.replyOptions(user.workspaceId, conversation) };
  }

  /** How a person may answer: web chat always; msgapp free text inside the 24-hour window, else an approved template. */
  private async replyOptions(workspaceId: string, c: InboxRow) {
    if (c.channel === 'voice') return { channel: c.channel, can_reply: false, window_open: false, window_closes_at: null, templates: [] };
    if (c.channel === 'web') return { channel: c.channel, can_reply: c.status === 'open', window_open: true, window_closes_at: null, templates: [] };
    const closes = c.last_inbound_at ? new Date(new Date(c.last_inbound_at).getTime() + SESSION_WINDOW_HOURS * 3_600_000) : null;
    const agent = c.agent ? await this.deps.agents.get(workspaceId, c.agent.id).catch(() => null) : null;
    const templates = (agent?.spec.templates ?? []).filter((t) => t.status === 'approved').map((t) => ({ name: t.name, language: t.language, body: t.body }));
    return { channel: c.channel, can_reply: c.status === 'open', window_open: Boolean(closes && closes.getTime() > Date.now()), window_closes_at: closes?.toISOString() ?? null, templates };
  }

  /**
   * A person's action, through the conversation's actor (started when it has none running). A closed conversation is
   * 409 conversation_closed before any workflow is asked; a refusal of the action (taken by someone else, the window
   * closed) is its domain error.
   */
  async act(user: InboxUser, id: string, request: ActionRequest): Promise<OperatorActionResult & { ok: true }> {
    const conv = await this.deps.conversations.row(user.workspaceId, id);
    if (!conv) throw notFound(id);
    if (conv.status !== 'open') throw new DomainError('conversation_closed', `Conversation '${id}' is closed: nothing more can be done in it (its customer starts a new one by writing again)`);
    if (request.kind === 'reply' && conv.channel === 'voice') throw new DomainError('invalid_request', 'text: a voice conversation takes no written reply');
    if (request.kind === 'reply' && conv.channel === 'web' && !request.text) throw new DomainError('invalid_request', 'text: required (templates are for msgapp)');
    if (request.kind === 'reply' && request.attachments?.length && conv.channel !== 'web' && conv.channel !== 'msgapp') throw new DomainError('invalid_request', `attachments: files go with web chat and msgapp replies only (this conversation is ${conv.channel})`);
    if (request.kind === 'reply' && request.attachments?.length && conv.channel === 'msgapp') {
      if (request.template) throw new DomainError('invalid_request', 'attachments: a template carries no file (send the file in the 24-hour window, as a reply with text)');
      if (request.attachments.length > 1) throw new DomainError('invalid_request', 'attachments: a msgapp reply carries one file (its text is the caption)');
    }
    if (request.kind === 'assign') {
      const team = await this.deps.store.team(user.workspaceId, 0, async () => new Map());
      if (!team.some((t) => t.id === request.assignee_id)) throw new DomainError('not_found', `assignee_id: no teammate with id '${request.assignee_id}' who works conversations in this workspace`);
    }
    const runs = this.deps.runs();
    if (!runs) throw noWorkflowService();
    const actor: OperatorActor = { id: user.id, email: user.email, name: user.name };
    const action: OperatorAction =
      request.kind === 'reply' ? { ...request, actor, id: newId('msg') } : request.kind === 'note' ? { ...request, actor, id: newId('note') } : ({ ...request, actor } as OperatorAction);
    const result = await runs.operatorAction({ id, workspaceId: user.workspaceId, channel: conv.channel }, action);
    if (!result.ok) throw new DomainError(result.code as DomainErrorCode, result.message);
    return result;
  }

  /**
   * The conversation a person may attach a file to (open, web chat or msgapp), checked before any byte is read; 404 for
   * another workspace's or an unknown conversation.
   */
  async attachable(user: InboxUser, id: string): Promise<InboxRow> {
    const conv = await this.deps.conversations.row(user.workspaceId, id);
    if (!conv) throw notFound(id);
    if (conv.status !== 'open') throw new DomainError('conversation_closed', `Conversation '${id}' is closed: nothing more can be done in it (its customer starts a new one by writing again)`);
    if (!(conv.channel === 'web' && conv.site_id) && conv.channel !== 'msgapp') throw new DomainError('invalid_request', `file: only web chat and msgapp replies carry files (this conversation is ${conv.channel})`);
    return conv;
  }

  /** Stores a file for a reply (`attachable` first): typed from its bytes, refused as the widget's uploads are. */
  async attach(conv: InboxRow, input: { staged: StagedBlob; fileName: string }) {
    return this.deps.uploads.storeForOperator(conv, input);
  }

  /** The `operatorAction` update's activity: writes and publishes one action. Idempotent on the action's ids. */
  async apply(workspaceId: string, id: string, action: OperatorAction, sender: Pick<MessageRuns, 'send'> | null): Promise<OperatorActionResult> {
    const conv = await this.deps.conversations.row(workspaceId, id);
    if (!conv) return refused('not_found', `No conversation with id '${id}' in this workspace`);
    switch (action.kind) {
      case 'take':
        return this.take(conv, action.actor);
      case 'assign': {
        const by = action.actor.id === SYSTEM_ACTOR.id ? { id: null, how: action.how ?? ('assign' as const) } : { id: action.actor.id, how: 'assign' as const };
        let outcome = await this.deps.conversations.assign(workspaceId, id, action.assignee_id, by, null);
        // Passing on one's own conversation.
        if (outcome.kind === 'taken' && outcome.by === action.actor.id) outcome = await this.deps.conversations.assign(workspaceId, id, action.assignee_id, by, action.actor.id);
        if (outcome.kind === 'assigned' && conv.channel === 'web' && !outcome.wasNeedsHuman) await this.frames.publish(id, { type: 'handoff', active: true });
        return this.outcome(outcome, id);
      }
      case 'reply':
        return this.reply(conv, action, sender);
      case 'note':
        await this.deps.store.addNote(workspaceId, id, action.actor, action.text).catch(async (err: unknown) => {
          // A retried activity: the note is there already.
          if ((await this.deps.store.notes(workspaceId, id)).some((n) => n.id === action.id)) return;
          throw err;
        });
        return { ok: true, note_id: action.id };
      case 'requeue':
        return (await this.deps.conversations.requeue(workspaceId, id, action.from, action.reason)) ? { ok: true } : refused('not_held', `${action.from} no longer holds this conversation`);
      case 'hand_back': {
        if (!(await this.deps.conversations.handBack(workspaceId, id, action.actor.id))) return refused('not_handed_off', 'The agent answers this conversation already: nobody holds it');
        if (conv.channel === 'web') await this.frames.publish(id, { type: 'handoff', active: false });
        return { ok: true };
      }
      case 'close': {
        if (!(await this.deps.conversations.close(workspaceId, id, action.actor.id, action.reason))) return refused('conversation_closed', `Conversation '${id}' is closed already`);
        // The visitor's sockets re-check their authorization: a closed conversation's close.
        await this.frames.recheck({ conversation: id });
        return { ok: true };
      }
    }
  }

  /** A take: held by this person now (exactly one of two at once); the visitor sees that a person joined. */
  private async take(conv: InboxRow, actor: OperatorActor): Promise<OperatorActionResult> {
    const outcome = await this.deps.conversations.assign(conv.workspace_id, conv.id, actor.id, { id: actor.id, how: 'take' }, null);
    if (outcome.kind !== 'assigned') return this.outcome(outcome, conv.id);
    if (conv.channel === 'web') {
      await this.frames.publish(conv.id, { type: 'handoff', active: true });
      // The contract's unsolicited reply (widget-api.md, Events rule 1): a person joined.
      const { row } = await this.deps.transcript.append({
        id: newId('msg'),
        workspaceId: conv.workspace_id,
        conversationId: conv.id,
        role: 'human',
        text: `${displayName(actor)} joined the conversation.`,
        unsolicited: true,
        extras: { author: { name: displayName(actor) } },
      });
      await this.frames.publish(conv.id, replyFrame(row), row.id);
    }
    return { ok: true };
  }

  private async reply(conv: InboxRow, action: Extract<OperatorAction, { kind: 'reply' }>, sender: Pick<MessageRuns, 'send'> | null): Promise<OperatorActionResult> {
    const workspaceId = conv.workspace_id;
    // Replying holds the conversation: taken when nobody holds it, refused when someone else does.
    if (conv.assignee?.id !== action.actor.id) {
      const taken = await this.deps.conversations.assign(workspaceId, conv.id, action.actor.id, { id: action.actor.id, how: 'take' }, null);
      if (taken.kind !== 'assigned' && taken.kind !== 'already_yours') return this.outcome(taken, conv.id);
      if (taken.kind === 'assigned' && conv.channel === 'web' && !taken.wasNeedsHuman) await this.frames.publish(conv.id, { type: 'handoff', active: true });
    }
    if (conv.channel === 'web') {
      const name = displayName(action.actor);
      const attachments = await this.replyFiles(conv, action.attachments ?? []);
      if ('refused' in attachments) return attachments.refused;
      // As transcript.humanMessage writes it (POST /api/v1/outbound), under the id the API named for this reply.
      const { row } = await this.deps.transcript.append({ id: action.id, workspaceId, conversationId: conv.id, role: 'human', text: action.text ?? '', attachments: attachments.files, unsolicited: true, extras: { author: { name } } });
      await this.frames.publish(conv.id, replyFrame(row), row.id);
      return { ok: true, message_id: row.id };
    }
    if (conv.channel !== 'msgapp' || !conv.agent || !conv.customer?.phone) return refused('invalid_request', 'This conversation has no channel a person can write to');
    if (!sender) return refused('messaging_unavailable', 'Sending is not configured on this server');
    try {
      const text = action.text && action.text.length > MAX_TEXT_CHARS ? action.text.slice(0, MAX_TEXT_CHARS) : action.text;
      // A file goes as the provider's media message (a signed link it fetches), the reply's text its caption.
      const files = action.template ? { files: [] } : await this.replyFiles(conv, action.attachments ?? []);
      if ('refused' in files) return files.refused;
      const file = files.files[0];
      if (file && text && mediaType(file.mime_type) === 'audio') return refused('invalid_request', 'attachments: an audio file on msgapp carries no caption: send the text as a reply of its own');
      const plan = await this.deps.messages.plan(workspaceId, {
        agent_id: conv.agent.id,
        to: conv.customer.phone,
        customer_id: conv.customer.id,
        ...(action.template
          ? { template: action.template }
          : file
            ? { media: mediaOf(file, text) }
            : { text: text ?? '' }),
      });
      // `api`: a person's message, which the transcript records as the human's once the provider took it.
      const sent = await sender.send({ ...plan, messageId: action.id, source: 'api', conversationId: conv.id });
      if (sent.status === 'failed') return refused('provider_error', `The provider did not accept the message: ${sent.error}`);
      return { ok: true, message_id: action.id };
    } catch (err) {
      if (err instanceof DomainError) return refused(err.code, err.message);
      throw err;
    }
  }

  /**
   * A reply's files: knowledge-base files, as the agent's attach_file tool attaches them (a signed link, re-signed in
   * the history), and files the person uploaded for this conversation (POST …/attachments, `upl_…`).
   */
  private async replyFiles(conv: InboxRow, ids: string[]): Promise<{ files: ReplyFile[] } | { refused: OperatorActionResult }> {
    const files: ReplyFile[] = [];
    for (const fileId of ids) {
      if (fileId.startsWith('upl_')) {
        const upload = await this.deps.uploads.operatorAttachment(conv.id, fileId);
        if (!upload) return { refused: refused('not_found', `attachments: no file with id '${fileId}' uploaded to this conversation`) };
        files.push(upload);
        continue;
      }
      const file = await this.deps.kbFile(conv.workspace_id, fileId);
      if (!file) return { refused: refused('not_found', `attachments: no active knowledge-base file with id '${fileId}' in this workspace`) };
      files.push({ file_key: `kb/${fileId}`, file_name: file.name, mime_type: file.mime_type, url: this.deps.uploadSearch.signKbFile(file) });
    }
    return { files };
  }

  private outcome(outcome: Awaited<ReturnType<ConversationInbox['assign']>>, id: string): OperatorActionResult {
    switch (outcome.kind) {
      case 'assigned':
      case 'already_yours':
        return { ok: true };
      case 'taken':
        return refused('already_assigned', 'Someone else holds this conversation already');
      case 'closed':
        return refused('conversation_closed', `Conversation '${id}' is closed`);
      case 'missing':
        return refused('not_found', `No conversation with id '${id}' in this workspace`);
    }
  }

  /** The people who work conversations, with presence and load (online: heard from within `graceMs`). */
  team(workspaceId: string, graceMs: number) {
    return this.deps.store.team(workspaceId, graceMs, (ids) => this.deps.conversations.heldBy(ids));
  }

  queueLength(workspaceId: string): Promise<number> {
    return this.deps.conversations.queueLength(workspaceId);
  }

  /** A teammate's capacity (owner or admin). */
  async setCapacity(workspaceId: string, userId: string, capacity: number): Promise<void> {
    const team = await this.deps.store.team(workspaceId, 0, async () => new Map());
    if (!team.some((t) => t.id === userId)) throw new DomainError('not_found', `No teammate with id '${userId}' who works conversations in this workspace`);
    await this.deps.store.setPresence(workspaceId, userId, { capacity });
  }

  /** Whether this role works conversations (a viewer reads only). */
  static works(role: string): boolean {
    return (WORKING_ROLES as readonly string[]).includes(role);
  }

  /**
   * The queue's upkeep (each API process, every heartbeat): what people who went offline or away held goes back to
   * the queue; then, in these workspaces where automatic assignment is on, queued conversations go round robin to
   * available people below their capacity (the one assigned longest ago first).
   */
  async rebalance(workspaceIds: string[], graceMs: number): Promise<{ requeued: number; assigned: number }> {
    // One pass at a time in this process, so a person's load is counted before the next pass gives them more (passes
    // of other processes may overlap: a person's capacity may then be passed by one; a conversation is never held twice).
    const run = this.rebalancing.then(() => this.rebalanceNow(workspaceIds, graceMs));
    this.rebalancing = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  private rebalancing: Promise<void> = Promise.resolve();

  private async rebalanceNow(workspaceIds: string[], graceMs: number): Promise<{ requeued: number; assigned: number }> {
    let requeued = 0;
    for (const g of await this.deps.conversations.unavailableHolders(graceMs)) {
      const done = await this.system({ id: g.id, workspaceId: g.workspace_id, channel: g.channel }, { kind: 'requeue', actor: SYSTEM_ACTOR, from: g.assignee_id, reason: g.away ? 'away' : 'offline' });
      if (done) requeued++;
    }
    let assigned = 0;
    const waiting = await this.deps.conversations.workspacesWithQueue(workspaceIds);
    for (const ws of await this.deps.store.autoAssigning(waiting)) assigned += await this.autoAssign(ws, graceMs);
    return { requeued, assigned };
  }

  /**
   * The queue's upkeep acts as people do, through the conversation's actor (so its history shows "assign by system"),
   * or directly in a process without a workflow service. A refusal (taken meanwhile, closed) is no failure: false.
   */
  private async system(conv: { id: string; workspaceId: string; channel: InboxRow['channel'] }, action: OperatorAction): Promise<boolean> {
    const runs = this.deps.runs();
    try {
      const result = runs ? await runs.operatorAction(conv, action) : await this.apply(conv.workspaceId, conv.id, action, null);
      return result.ok;
    } catch (err) {
      if (err instanceof DomainError) return false;
      throw err;
    }
  }

  private async autoAssign(workspaceId: string, graceMs: number): Promise<number> {
    const order = await this.deps.store.roundRobinOrder(workspaceId, graceMs);
    if (!order.length) return 0;
    const held = await this.deps.conversations.heldBy(order.map((o) => o.id));
    let assigned = 0;
    for (const conv of await this.deps.conversations.queued(workspaceId, 50)) {
      const i = order.findIndex((o) => (held.get(o.id) ?? 0) < o.capacity);
      if (i < 0) break;
      const person = order[i];
      if (!(await this.system({ id: conv.id, workspaceId, channel: conv.channel }, { kind: 'assign', actor: SYSTEM_ACTOR, assignee_id: person.id, how: 'round_robin' }))) continue;
      assigned++;
      held.set(person.id, (held.get(person.id) ?? 0) + 1);
      await this.deps.store.markAssigned(person.id);
      // Round robin: the one just given a conversation goes last.
      order.splice(i, 1);
      order.push(person);
    }
    return assigned;
  }
}

/** A file a reply carries: a signed link and what it is. */
interface ReplyFile {
  upload_id?: string;
  file_key: string;
  file_name: string;
  mime_type: string;
  url: string;
}

/** The provider's media type of a file: images, audio and video as themselves, anything else a document. */
function mediaType(mime: string): 'image' | 'audio' | 'video' | 'document' {
  if (/^image\/(jpeg|png)$/.test(mime)) return 'image';
  if (mime.startsWith('audio/')) return 'audio';
  if (/^video\/(mp4|3gpp)$/.test(mime)) return 'video';
  return 'document';
}

/** A msgapp media message of a reply's file, its text the caption (audio takes none), a document with its name. */
function mediaOf(file: ReplyFile, caption: string | undefined): { type: 'image' | 'audio' | 'video' | 'document'; url: string; caption?: string; filename?: string } {
  const type = mediaType(file.mime_type);
  if (type === 'audio') return { type, url: file.url };
  return { type, url: file.url, ...(caption ? { caption } : {}), ...(type === 'document' ? { filename: file.file_name } : {}) };
}
