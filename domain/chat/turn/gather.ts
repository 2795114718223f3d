import type { AgentSpec } from '../../agents/spec';
import type { SearchMatch } from '../../kb/search';
import type { ChatMessageRow } from '../transcript';
import type { TraceRecorder } from './trace';
import { HISTORY_MESSAGES, UPLOAD_PASSAGES, type AttachmentText, type Passage, type TurnContext, type TurnDeps, type TurnInput } from './context';

/** What the model (or answerWithoutModel) is given besides the turn's context: read before anything is generated. */
export interface Gathered {
  /** The visitor message's query: its text, else its attachments' text. */
  query: string;
  attachments: AttachmentText[];
  /** The passages retrieved for the query: the agent's knowledge, then the conversation's own uploads. */
  passages: Passage[];
  /** Recent messages (read only when a model answers). */
  history: ChatMessageRow[];
}

/** The attachments' text, then the passages and (for the model) the recent history, read at once; the passages become the context's first `shown`. */
export async function gather(ctx: TurnContext): Promise<Gathered> {
  const { deps, input } = ctx;
  const attachments = await attachmentText(deps, ctx.visitor);
  const query = ctx.visitor.text || attachments.map((a) => a.content).join(' ').slice(0, 500);
  const [kbPassages, uploadPassages, history] = await Promise.all([
    query ? retrieve(deps, input.workspaceId, ctx.spec, query, ctx.topK, ctx.trace) : [],
    query ? fromUploads(deps, input.conversationId, query) : [],
    ctx.model ? deps.transcript.recent(input.conversationId, HISTORY_MESSAGES + 1) : [],
  ]);
  const passages = [...kbPassages, ...uploadPassages];
  // The first passages the model is shown, numbered from 1 in this order: what its markers name.
  ctx.shown.push(...passages);
  return { query, attachments, passages, history };
}

/** The conversation's agent (null: none, or deleted), its channel and the page commands its site allows. */
export async function agentOf(deps: TurnDeps, input: TurnInput) {
  const em = deps.em.fork();
  const conv = await deps.repos.conversations.conversationAgent(em, input.conversationId);
  const [agent, commands] = await Promise.all([
    conv?.agentId ? deps.repos.agents.findAgent(em, input.workspaceId, conv.agentId) : null,
    conv?.channel === 'web' && conv.siteId ? deps.repos.sites.sitePageCommands(deps.em.fork(), conv.siteId) : [],
  ]);
  return { agent, channel: conv?.channel ?? 'web', commands, test: conv?.isTest ?? false };
}

/**
 * The passages of the agent's knowledge: its folders and files, or the whole workspace when it names none.
 * A workspace with no searchable file (one indexed query) is not searched at all: no query embedding (the
 * first one loads the embedding model), no search; the turn's trace then has no `retrieve` step.
 */
export async function retrieve(deps: TurnDeps, workspaceId: string, spec: AgentSpec, query: string, topK: number, trace?: TraceRecorder): Promise<Passage[]> {
  if (!(await deps.repos.kb.hasSearchableFiles(deps.em.fork(), workspaceId))) return [];
  return trace ? trace.step('retrieve', () => search(deps, workspaceId, spec, query, topK)) : search(deps, workspaceId, spec, query, topK);
}

async function search(deps: TurnDeps, workspaceId: string, spec: AgentSpec, query: string, topK: number): Promise<Passage[]> {
  const { folder_ids, file_ids } = spec.knowledge_base;
  const scopes: Array<{ folder_id?: string; kb_id?: string }> = folder_ids.length || file_ids.length ? [...folder_ids.map((f) => ({ folder_id: f })), ...file_ids.map((f) => ({ kb_id: f }))] : [{}];
  const found: SearchMatch[] = [];
  for (const scope of scopes) {
    try {
      found.push(...(await deps.search.search(workspaceId, { query, top_k: topK, ...scope })));
    } catch (err) {
      // A folder deleted since publishing, or the embedder missing: answer from what is left.
      deps.log.warn({ err: (err as Error).message, scope }, 'knowledge-base retrieval failed for one scope');
    }
  }
  const best = new Map<string, SearchMatch>();
  for (const m of found) if (!best.has(m.id) || best.get(m.id)!.score < m.score) best.set(m.id, m);
  const top = [...best.values()].sort((a, b) => b.score - a.score).slice(0, topK);
  // The files' titles, for the model's labels and the citations: one read.
  const titles = await deps.repos.kb.kbFileTitles(deps.em.fork(), workspaceId, top.map((m) => m.file_id));
  return top.map((m) => ({ file_id: m.file_id, file_name: m.name, ...(titles.has(m.file_id) ? { title: titles.get(m.file_id) } : {}), text: m.text, score: m.score }));
}

/** Passages of the conversation's long uploads (indexed by their background task). */
async function fromUploads(deps: TurnDeps, conversationId: string, query: string): Promise<Passage[]> {
  try {
    const found = await deps.uploads.search(conversationId, query, UPLOAD_PASSAGES);
    return found.map((p) => ({ file_id: p.upload_id, file_name: p.file_name, text: p.text, score: p.score }));
  } catch (err) {
    deps.log.warn({ err: (err as Error).message }, 'searching the conversation uploads failed');
    return [];
  }
}

/** A messaging channel's media in the transcript: the stored media record, with its text once extracted. */
interface InlineMedia {
  type?: string;
  mime_type: string;
  filename?: string;
  text?: string;
}

async function attachmentText(deps: TurnDeps, visitor: ChatMessageRow): Promise<AttachmentText[]> {
  const all = (visitor.attachments ?? []) as Array<string | InlineMedia | { upload_id?: string }>;
  // A messaging channel's media carries its extracted text (or transcript) with it.
  const inline = all
    .filter((a): a is InlineMedia => typeof a === 'object' && a !== null && 'mime_type' in a && !('upload_id' in a))
    .map((a) => ({ file_name: a.filename ?? `${a.type ?? 'file'} from the customer`, mime_type: a.mime_type, content: a.text ?? '' }));
  const ids = all.map((a) => (typeof a === 'string' ? a : (a as { upload_id?: string }).upload_id)).filter(Boolean) as string[];
  if (!ids.length) return inline;
  return [...inline, ...(await deps.uploads.attachmentsOf(ids))];
}
