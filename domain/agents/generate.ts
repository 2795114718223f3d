import { DomainError } from '../errors';
import { LlmError, type CompletionResult, type LlmSettings, type ModelFactory } from '../ports/llm';
import { AgentSpec } from './spec';

export type { LlmSettings };

const SYSTEM = `You design customer-service agents. Reply with one JSON object only: an agent spec with the keys
name (string), instructions (string: how the agent should behave), knowledge_base ({folder_ids: [], file_ids: []}),
triggers ({}), actions (an array of {"type": "kb_search"} and {"type": "handoff"}), templates ([]).
Do not invent phone numbers, ids or URLs.`;

/**
 * Drafts an agent spec from a plain-language description through an OpenAI-compatible
 * chat-completions endpoint. The reply must validate as an AgentSpec; ids and triggers
 * are never taken from the model (the caller adds them).
 */
export async function generateAgentSpec(llm: LlmSettings | null, description: string, openModel: ModelFactory): Promise<AgentSpec> {
  if (!llm) throw new DomainError('llm_not_configured', 'Agent generation needs a language model: set LLM_BASE_URL (and LLM_API_KEY, LLM_MODEL)');
  let reply: CompletionResult;
  try {
    reply = await openModel(llm).complete({
      temperature: 0.2,
      response_format: { type: 'json_object' },
      messages: [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: description },
      ],
    });
  } catch (err) {
    if (err instanceof LlmError) throw new DomainError('llm_unavailable', err.message);
    throw err;
  }
  let draft: unknown;
  try {
    draft = JSON.parse(reply.text.replace(/^```(?:json)?\s*|\s*```$/g, ''));
  } catch {
    throw new DomainError('generation_failed', 'The language model did not reply with a JSON agent spec');
  }
  const d = (draft ?? {}) as Record<string, unknown>;
  const parsed = AgentSpec.safeParse({
    name: d.name,
    instructions: d.instructions,
    actions: Array.isArray(d.actions) ? d.actions.filter((a) => ['kb_search', 'handoff'].includes((a as { type?: string })?.type ?? '')) : [],
  });
  if (!parsed.success) throw new DomainError('generation_failed', `The generated spec is not valid: ${parsed.error.issues[0].path.join('.')}: ${parsed.error.issues[0].message}`);
  return parsed.data;
}
