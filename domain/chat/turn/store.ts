import { titleOf } from '../answer-without-model';
import { maskPersonalDetails } from '../masking';
import { richBlocks } from '../rich';
import type { ChatMessageRow, StoredCitation } from '../transcript';
import type { Passage, TurnContext } from './context';
import type { Answer } from './generate';

/**
 * The reply, stored once under its id (insert-if-absent) with its extras, and metered. Masked
 * here: the stored reply and the final `reply` frame never carry personal details (deltas may have).
 */
export async function storeReply(ctx: TurnContext, answer: Answer): Promise<ChatMessageRow> {
  const { deps, input, spec, elements } = ctx;
  const text = spec.privacy?.mask_personal_details ? maskPersonalDetails(answer.text).text : answer.text;
  // The whole answer, validated before it is stored or sent: its structure as rich blocks (tables fitted to their header).
  const rich = ctx.sockets ? richBlocks(text) : null;
  const citations = await citationsOf(ctx, answer.cited);
  const { row } = await deps.transcript.append({
    id: input.replyId,
    workspaceId: input.workspaceId,
    conversationId: input.conversationId,
    role: 'assistant',
    replyTo: input.messageId,
    text,
    attachments: elements.attachments,
    extras: {
      citations,
      ...(answer.suggested.length ? { suggested_actions: answer.suggested } : {}),
      ...(elements.cards.length ? { cards: elements.cards } : {}),
      ...(elements.charts.length ? { charts: elements.charts } : {}),
      ...(rich ? { rich } : {}),
    },
  });
  // Metered (GET /billing/usage), once per reply: a retried turn that stored its reply counts nothing again.
  const usageKind = ctx.model?.usageKind;
  // A console test conversation is not billed (docs/console.md).
  if (usageKind && !ctx.test) await deps.repos.usage.recordTokenUsage(deps.em.fork(), { workspaceId: input.workspaceId, replyId: row.id, tokens: answer.tokens, kind: usageKind });
  return row;
}

/**
 * The reply's citations: each file it used, under its title. A knowledge-base file the agent may
 * hand out (as POST /file_url decides: one it selects, or under its folders) carries a signed link
 * to its bytes, re-signed when the history is read; any other document (the whole workspace's, a
 * visitor's upload) is named, never handed out.
 */
async function citationsOf(ctx: TurnContext, cited: Passage[]): Promise<StoredCitation[]> {
  const { deps, input, spec } = ctx;
  const em = deps.em.fork();
  const out: StoredCitation[] = [];
  for (const p of cited) {
    const file = /^file_[0-9a-f]{24}$/.test(p.file_id) ? await deps.repos.kb.downloadableKbFile(em, input.workspaceId, p.file_id, spec.knowledge_base) : null;
    out.push({ file_id: p.file_id, file_name: p.file_name, title: p.title || titleOf(p.file_name), ...(file ? { url: deps.uploads.signKbFile(file) } : {}) });
  }
  return out;
}
