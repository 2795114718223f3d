import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { AgentSpec } from '../../agents/spec';
import type { ModelPolicy } from '../../agents/model-policy';
import type { CredentialService } from '../../credentials/credentials';
import type { SearchService } from '../../kb/search';
import type { McpService } from '../../mcp/servers';
import type { Repositories } from '../../repositories';
import type { AgentUploads } from '../../widget/uploads';
import type { ChatModel, ModelFactory } from '../../ports/llm';
import type { ElementKind, ReplyElements } from '../elements';
import type { ChatMessageRow, ChatTranscript, ReplyExtras } from '../transcript';
import type { TurnPublisher } from './publisher';
import type { TraceRecorder, TurnTrace } from './trace';

export interface TurnInput {
  conversationId: string;
  workspaceId: string;
  /** The visitor message this turn answers. */
  messageId: string;
  /** The id the reply is stored under (and the socket frames carry): fixed before the turn starts. */
  replyId: string;
  /** The step's attempt (1 when absent): a later one may follow a stream cut off mid-answer, so its first delta resets the live bubble. */
  attempt?: number;
}

export interface TurnReply {
  reply_id: string;
  text: string;
  attachments: unknown[];
  extras: ReplyExtras;
  handoff: boolean;
  /** Not answered: a human has the conversation (`needs_human`); nothing was stored or sent. */
  held?: boolean;
  /** The MCP tool calls of this turn, made or refused (kept in the workflow's history with the reply). */
  tool_calls?: TurnToolCall[];
  /** What the turn did (passages, prompt, rounds, tool calls, the unmasked output, step times): the console's debugger reads it from the history. */
  trace?: TurnTrace;
}

export interface TurnToolCall {
  server_id: string;
  tool: string;
  ok: boolean;
  /** Why it was not made: `cross_server_chaining` (another server's result came first and the agent does not allow it). */
  refused?: 'cross_server_chaining';
  /** A retried turn's call answered from the one recorded before (not made again). */
  reused?: true;
  /** A console test conversation: the tool acts outside, so the call was recorded and not made. */
  stubbed?: true;
  duration_ms: number;
}

export interface Passage {
  file_id: string;
  file_name: string;
  /** The knowledge-base file's title recorded at indexing (its first heading or declared title), when it has one. */
  title?: string;
  text: string;
  score: number;
}

/** A file attached to the visitor message, as the model reads it (text empty: none could be read). */
export interface AttachmentText {
  file_name: string;
  mime_type: string;
  content: string;
}

/** Messages of context given to the model besides the retrieved passages. */
export const HISTORY_MESSAGES = 20;
/** Tool rounds in one turn before the model must answer. */
export const MAX_TOOL_ROUNDS = 4;
export const DEFAULT_TOP_K = 5;
/** Passages taken from the conversation's own long uploads. */
export const UPLOAD_PASSAGES = 3;

/** The model a turn runs on (see chooseModel). */
export interface TurnModelChoice {
  model: ChatModel;
  /** Sent as the request's model (undefined: the client's own, LLM_MODEL). */
  name: string | undefined;
  max_tokens: number;
  /** The usage kind its tokens are metered under; null: not metered (the workspace's own key). */
  usageKind: string | null;
}

/** What every turn runs on: built once in the composition root (app/services.ts). */
export interface TurnDeps {
  em: EntityManager;
  repos: Pick<Repositories, 'conversations' | 'agents' | 'kb' | 'usage' | 'sites'>;
  transcript: ChatTranscript;
  search: Pick<SearchService, 'search'>;
  /** The visitor's attachments, passages of the conversation's long uploads, links to knowledge-base files. */
  uploads: AgentUploads;
  /** The installation's model; null: answers come from the passages (answerWithoutModel). */
  model: ChatModel | null;
  log: Pick<Logger, 'warn'>;
  mcp: Pick<McpService, 'toolsFor' | 'call'> | null;
  /**
   * The operator's model allow-list and cap, the workspaces' own llm credentials, and how a credential's
   * endpoint is opened as a model; null: the spec's settings as they are.
   */
  models: { policy: ModelPolicy; credentials: Pick<CredentialService, 'llmEndpoint'>; open: ModelFactory } | null;
  /** The frames the turn sends to the conversation's sockets. */
  publisher: TurnPublisher;
}

/** An external (MCP) tool offered this turn, under its own name `mcp_<n>_<tool>`. */
export interface McpToolRef {
  serverId: string;
  tool: string;
  /** The agent's action lets this server's tools be called after another server's result. */
  chaining: boolean;
  /** Marked read-only by its server: run even in a console test conversation (any other tool is stubbed there). */
  readOnly: boolean;
}

/** The MCP servers whose results the model has read this turn: the guard against one server steering calls to another. */
export interface McpTurnState {
  /** Servers whose results the model has read in earlier rounds. */
  resultsFrom: Set<string>;
  /** Servers answering in this round: judged from the next round on (a round's calls were written before its results were read). */
  answered: string[];
}

/**
 * What the steps of one turn share: who is answered (the conversation, its agent, the visitor
 * message), under which limits (the model, its max_tokens, top_k), and what the turn collects
 * as it goes (the passages shown, the reply's elements, the MCP calls made).
 */
export interface TurnContext {
  readonly deps: TurnDeps;
  readonly input: TurnInput;
  readonly agentId: string;
  readonly spec: AgentSpec;
  /** The conversation's channel: 'web', or a messaging/voice channel (whose reply the actor sends as a message). */
  readonly channel: string;
  /** Web chat has sockets to tell. */
  readonly sockets: boolean;
  /** The reply's deltas go to the sockets as the model writes them. */
  readonly stream: boolean;
  /** The page commands the conversation's site handles (web chat only). */
  readonly commands: readonly string[];
  readonly visitor: ChatMessageRow;
  /** Null: no model; the answer comes from the passages. */
  readonly model: TurnModelChoice | null;
  /** Passages retrieved per search (the agent's kb_search action, else DEFAULT_TOP_K). */
  readonly topK: number;
  /** The reply elements the agent may add (none off the web: a messaging channel's reply is text). */
  readonly kinds: readonly ElementKind[];
  /** Every passage the model is shown, numbered from 1 in that order (kb_search results are numbered on): what its markers name. */
  readonly shown: Passage[];
  /** What the element tools collected: the reply's extras besides its citations. */
  readonly elements: ReplyElements;
  readonly mcp: McpTurnState;
  /** The MCP tool calls of this turn, made or refused. */
  readonly toolCalls: TurnToolCall[];
  /**
   * A console test conversation ("Try it"): tools that act outside (MCP tools not marked read-only) are stubbed, the
   * call recorded on the timeline and not made, and its tokens are not metered.
   */
  readonly test: boolean;
  /** Called as the model streams: the activity's heartbeat. */
  readonly onProgress?: () => void;
  /** Collects the turn's trace (trace.ts). */
  readonly trace?: TraceRecorder;
}
