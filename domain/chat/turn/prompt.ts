import type { AgentSpec } from '../../agents/spec';
import type { ChatTurnMessage } from '../../ports/llm';
import { UNTRUSTED_TOOL_NOTE } from '../tools/mcp';
import type { Gathered } from './gather';
import type { AttachmentText, Passage, TurnContext } from './context';

/** Characters of an attached upload's text shown to the model. */
const ATTACHMENT_CHARS = 12_000;

/**
 * The model's first request: the system prompt (the agent's instructions, the channel's manners, the passages),
 * the recent history and the visitor message with its attachments.
 */
export function modelMessages(ctx: TurnContext, gathered: Gathered, opts: { externalTools: boolean }): ChatTurnMessage[] {
  const { visitor } = ctx;
  const history = gathered.history.filter((m) => m.role !== 'tool' && m.id !== visitor.id);
  let system = systemPrompt(ctx.spec, gathered.passages, ctx.channel, ctx.kinds.includes('attachments'));
  if (opts.externalTools) system += `\n\n${UNTRUSTED_TOOL_NOTE}`;
  return [
    { role: 'system', content: system },
    ...history.map((m): ChatTurnMessage => ({ role: m.role === 'user' ? 'user' : 'assistant', content: m.text })),
    {
      role: 'user',
      content: [visitor.text, ...gathered.attachments.map(describeAttachment)].filter(Boolean).join('\n\n'),
    },
  ];
}

/**
 * An attachment as the model reads it. A file with no text (a photo, a blank scan, a
 * silent recording) is still named, with its kind, so the agent knows what was attached
 * instead of seeing nothing at all.
 */
export function describeAttachment(a: AttachmentText): string {
  if (a.content) return `[Attached file "${a.file_name}"]\n${a.content.slice(0, ATTACHMENT_CHARS)}`;
  const kind = a.mime_type.startsWith('image/') ? 'an image' : a.mime_type.startsWith('audio/') || a.mime_type.startsWith('video/') ? 'a recording' : 'a file';
  return `[Attached ${kind}, "${a.file_name}" (${a.mime_type}); no text could be read from it]`;
}

function systemPrompt(spec: AgentSpec, passages: Passage[], channel: string, withFileIds = false): string {
  const parts = [spec.instructions || `You are ${spec.name}, a helpful customer-service agent.`];
  if (channel === 'voice') parts.push('You are speaking on a phone call: your words are read aloud, so answer in a few short spoken sentences, with no Markdown, lists or links.');
  else if (channel !== 'web') parts.push('You are writing in a messaging app: plain text in short paragraphs, no Markdown headings or tables.');
  parts.push(
    'Answer from the knowledge-base passages below when they are relevant. After each statement you take from a passage, write its number in square brackets, like [1] or [1, 3]: the numbers are removed before the customer reads your answer, and the passages you marked are shown as its sources. Mark only passages you used. If they do not answer the question, say so rather than guessing.',
  );
  if (passages.length) {
    const label = (p: Passage) => [`file: ${p.file_name}`, ...(p.title ? [`title: ${p.title}`] : []), ...(withFileIds ? [`file_id: ${p.file_id}`] : [])].join(', ');
    parts.push('Knowledge-base passages:\n' + passages.map((p, i) => `[${i + 1}] (${label(p)})\n${p.text}`).join('\n\n'));
  } else {
    parts.push('No knowledge-base passage matched this message.');
  }
  return parts.join('\n\n');
}
