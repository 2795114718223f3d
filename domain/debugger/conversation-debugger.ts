import type { TurnReply } from '../chat/turn';
import type { TurnTrace } from '../chat/turn/trace';
import { maskPersonalDetails } from '../chat/masking';
import { DomainError } from '../errors';
import type { AuditContext, AuditLog } from '../audit/audit-log';
import type { RecordedActivity, RecordedHistory, WorkflowHistories } from '../ports/workflow-history';
import { noWorkflowService } from '../ports/workflow-runs';
import { redactSecrets } from './redact';

/** The conversation actor's workflow id (workflows/conversation.ts conversationWorkflowId: types only may cross, so it is spelt here too). */
export const conversationWorkflowIdOf = (conversationId: string) => `conversation:${conversationId}`;

/** One latency step of a turn: from the history's event times (`event`), or measured inside the turn (`turn`). */
export interface LatencyStep {
  step: string;
  ms: number;
  source: 'event' | 'turn';
}

export interface TurnToolCallView {
  round: number;
  name: string;
  /** The arguments as JSON, secrets redacted. */
  arguments: string;
  output: string;
  ms: number;
}

export interface TurnView {
  /** The turn's activity within the run (its ActivityTaskScheduled event id). */
  event_id: number;
  message_id: string;
  reply_id: string;
  status: 'answered' | 'held' | 'failed' | 'running';
  /** When the actor took the visitor's message (the update or signal), null when the run does not hold it. */
  received_at: string | null;
  scheduled_at: string;
  started_at: string | null;
  completed_at: string | null;
  attempt: number | null;
  error: string | null;
  model: string | null;
  query: string;
  passages: Array<{ file_id: string; file_name: string; title: string | null; score: number; text: string }>;
  prompt: { instructions: string; context: string[]; history: Array<{ role: string; text: string }>; message: string };
  rounds: Array<{ ms: number; tokens: number; text: string }>;
  tool_calls: TurnToolCallView[];
  /** The reply as stored and sent (masked when the agent masks personal details). */
  output: string;
  /** The model's answer before masking: owners and admins only (each view audited); null for other roles. */
  output_unmasked: string | null;
  latency: LatencyStep[];
  /** Whether the history holds the turn's trace (turns recorded before the debugger existed hold only the reply). */
  traced: boolean;
}

export interface ConversationDebugView {
  conversation_id: string;
  workflow: { id: string; run_id: string; status: string; started_at: string; ui_url: string | null } | null;
  /** Whether this view shows the unmasked outputs (owner and admin). */
  unmasked: boolean;
  turns: TurnView[];
}

export interface DebugViewer {
  workspaceId: string;
  /** Owners and admins see the model's output before masking; each such view is audited. */
  unmasked: boolean;
  audit: AuditContext;
}

const ms = (from: string | null, to: string | null) => (from && to ? Math.max(0, Date.parse(to) - Date.parse(from)) : null);

/**
 * The console's conversation debugger: each agent turn of a conversation as its actor's workflow recorded it (the
 * `runAgentTurn` activity's input, its result with the turn's trace, and the events' times), mapped to a typed view.
 * Workspace-scoped: a conversation of another workspace is not found. What reaches the page is redacted of secrets
 * (keys, tokens, passwords in tool arguments and outputs); the unmasked output only for owners and admins, audited.
 */
export class ConversationDebugger {
  constructor(
    private readonly deps: {
      conversations: { get(workspaceId: string, id: string): Promise<unknown> };
      histories: () => WorkflowHistories | null | undefined;
      audit: Pick<AuditLog, 'record'>;
      /** The Temporal UI's origin (TEMPORAL_UI_ORIGIN's first) and namespace, for the link to the workflow. */
      temporalUi: () => { origin: string | null; namespace: string };
    },
  ) {}

  private histories(): WorkflowHistories {
    const h = this.deps.histories();
    if (!h) throw noWorkflowService();
    return h;
  }

  async turns(viewer: DebugViewer, conversationId: string): Promise<ConversationDebugView> {
    await this.deps.conversations.get(viewer.workspaceId, conversationId);
    const history = await this.histories().read(conversationWorkflowIdOf(conversationId));
    if (history && !this.ownedBy(history, viewer.workspaceId)) throw notFound(conversationId);
    const turns = history ? turnsOf(history, viewer.unmasked) : [];
    if (viewer.unmasked) {
      await this.deps.audit.record(viewer.audit, {
        workspaceId: viewer.workspaceId,
        action: 'conversation.debug_viewed',
        target: { type: 'conversation', id: conversationId },
        details: { run_id: history?.runId ?? null, turns: turns.length, unmasked: true },
      });
    }
    return {
      conversation_id: conversationId,
      workflow: history ? { id: history.workflowId, run_id: history.runId, status: history.status, started_at: history.startedAt, ui_url: this.uiUrl(history) } : null,
      unmasked: viewer.unmasked,
      turns,
    };
  }

  /** The latest run's history as `npm run replay` reads it (payloads as stored, encrypted); audited. */
  async exportHistory(viewer: DebugViewer, conversationId: string): Promise<{ file_name: string; json: string }> {
    await this.deps.conversations.get(viewer.workspaceId, conversationId);
    const workflowId = conversationWorkflowIdOf(conversationId);
    const history = await this.histories().read(workflowId);
    if (!history || !this.ownedBy(history, viewer.workspaceId)) throw new DomainError('not_found', `Conversation '${conversationId}' has no workflow history yet`);
    const json = await this.histories().exportJson(workflowId);
    if (!json) throw new DomainError('not_found', `Conversation '${conversationId}' has no workflow history yet`);
    await this.deps.audit.record(viewer.audit, {
      workspaceId: viewer.workspaceId,
      action: 'conversation.history_exported',
      target: { type: 'conversation', id: conversationId },
      details: { run_id: history.runId },
    });
    return { file_name: `${workflowId.replace(/[^A-Za-z0-9_-]/g, '_')}.json`, json };
  }

  /** The run's own input names its workspace: a second check beside the conversation's row. */
  private ownedBy(history: RecordedHistory, workspaceId: string): boolean {
    const input = history.activities.find((a) => a.type === 'runAgentTurn')?.input[0] as { workspaceId?: string } | undefined;
    return !input || input.workspaceId === workspaceId;
  }

  private uiUrl(history: RecordedHistory): string | null {
    const { origin, namespace } = this.deps.temporalUi();
    if (!origin) return null;
    return `${origin}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(history.workflowId)}/${encodeURIComponent(history.runId)}/history`;
  }
}

const notFound = (id: string) => new DomainError('not_found', `No conversation with id '${id}' in this workspace`);

/** Every `runAgentTurn` of the run, oldest first, with what the run recorded around it. */
export function turnsOf(history: RecordedHistory, unmasked: boolean): TurnView[] {
  const received = new Map<string, string>();
  for (const m of history.messages) {
    const messageId = (m.args[0] as { messageId?: unknown } | undefined)?.messageId;
    if (typeof messageId === 'string' && !received.has(messageId)) received.set(messageId, m.at);
  }
  // A messaging channel's reply leaves through its own activity after the turn (workflows/conversation.ts sendReply).
  const sends = new Map<string, RecordedActivity>();
  for (const a of history.activities) {
    const replyId = (a.input[0] as { replyId?: unknown } | undefined)?.replyId;
    if (a.type === 'sendAgentReply' && typeof replyId === 'string') sends.set(replyId, a);
  }
  return history.activities.filter((a) => a.type === 'runAgentTurn').map((a) => turnOf(a, received, sends, unmasked));
}

function turnOf(a: RecordedActivity, received: Map<string, string>, sends: Map<string, RecordedActivity>, unmasked: boolean): TurnView {
  const input = (a.input[0] ?? {}) as { messageId?: string; replyId?: string };
  const reply = a.outcome === 'completed' ? (a.result as TurnReply | undefined) : undefined;
  const trace: TurnTrace | undefined = reply?.trace;
  // Model-written text is masked for roles that may not see it unmasked; every text is redacted of secrets.
  const shown = (text: string) => redactSecrets(unmasked ? text : maskPersonalDetails(text).text);
  const receivedAt = input.messageId ? (received.get(input.messageId) ?? null) : null;
  const latency: LatencyStep[] = [];
  const push = (step: string, value: number | null, source: LatencyStep['source']) => value !== null && latency.push({ step, ms: value, source });
  push('waiting in the conversation', ms(receivedAt, a.scheduledAt), 'event');
  push('queued for a worker', ms(a.scheduledAt, a.startedAt), 'event');
  push('the turn (last attempt)', ms(a.startedAt, a.closedAt), 'event');
  for (const s of trace?.steps ?? []) push(s.step, s.ms, 'turn');
  const send = input.replyId ? sends.get(input.replyId) : undefined;
  if (send) push('sending the reply (message-send)', ms(send.scheduledAt, send.closedAt), 'event');
  return {
    event_id: a.scheduledEventId,
    message_id: input.messageId ?? '',
    reply_id: input.replyId ?? '',
    status: a.outcome === 'pending' ? 'running' : a.outcome !== 'completed' ? 'failed' : reply?.held ? 'held' : 'answered',
    received_at: receivedAt,
    scheduled_at: a.scheduledAt,
    started_at: a.startedAt,
    completed_at: a.closedAt,
    attempt: a.attempt,
    error: a.failure ? redactSecrets(a.failure) : null,
    model: trace?.model ?? null,
    query: redactSecrets(trace?.query ?? ''),
    passages: (trace?.passages ?? []).map((p) => ({ file_id: p.file_id, file_name: p.file_name, title: p.title ?? null, score: p.score, text: redactSecrets(p.text) })),
    prompt: {
      instructions: redactSecrets(trace?.prompt.instructions ?? ''),
      context: (trace?.prompt.context ?? []).map(redactSecrets),
      history: (trace?.prompt.history ?? []).map((m) => ({ role: m.role, text: m.role === 'assistant' ? shown(m.text) : redactSecrets(m.text) })),
      message: redactSecrets(trace?.prompt.message ?? ''),
    },
    rounds: (trace?.rounds ?? []).map((r) => ({ ms: r.ms, tokens: r.tokens, text: shown(r.text) })),
    tool_calls: (trace?.rounds ?? []).flatMap((r, round) =>
      r.tool_calls.map((c) => ({ round: round + 1, name: c.name, arguments: shown(argumentsText(c.arguments)), output: shown(c.output), ms: c.ms })),
    ),
    output: redactSecrets(reply?.text ?? ''),
    output_unmasked: unmasked && trace ? redactSecrets(trace.output) : null,
    latency,
    traced: Boolean(trace),
  };
}

/** A tool call's arguments as JSON (models send them as a JSON string), secrets redacted by field and by shape. */
function argumentsText(args: unknown): string {
  let value: unknown = args;
  if (typeof args === 'string') {
    try {
      value = JSON.parse(args);
    } catch {
      return redactSecrets(args);
    }
  }
  return JSON.stringify(redactValue(value));
}

/** A value with the fields that name secrets replaced, and secret-looking strings redacted. */
function redactValue(v: unknown): unknown {
  if (typeof v === 'string') return redactSecrets(v);
  if (Array.isArray(v)) return v.map(redactValue);
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, SECRET_FIELD.test(k) ? '[redacted]' : redactValue(x)]));
  }
  return v;
}

const SECRET_FIELD = /secret|password|passwd|token|api[_-]?key|authorization|credential|private[_-]?key|cookie/i;
