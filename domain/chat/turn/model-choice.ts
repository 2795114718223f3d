import type { AgentSpec } from '../../agents/spec';
import type { CredentialService } from '../../credentials/credentials';
import { LlmError } from '../../ports/llm';
import { UnsafeUrlError } from '../../../lib/net/ssrf';
import type { TurnDeps, TurnModelChoice } from './context';

/**
 * The model this turn runs on. With the agent's own llm credential: that endpoint, the
 * spec's model and max_tokens as they are, and nothing metered (the workspace pays its
 * provider). On the installation's key: the operator's policy applied to whatever the
 * stored spec says (a refused model runs as the default one, max_tokens capped), metered
 * under the model it ran on. Null: no model at all (answers come from the passages).
 */
export async function chooseModel(deps: TurnDeps, workspaceId: string, agentId: string, spec: AgentSpec): Promise<TurnModelChoice | null> {
  const { models, log } = deps;
  const credentialId = spec.model.credential_id;
  if (credentialId !== undefined && models) {
    let endpoint: Awaited<ReturnType<CredentialService['llmEndpoint']>>;
    try {
      endpoint = await models.credentials.llmEndpoint(workspaceId, credentialId);
    } catch (err) {
      if (err instanceof UnsafeUrlError) throw new LlmError(`The agent's llm credential is not called: base_url ${err.reason}`, false);
      throw err;
    }
    if (endpoint) {
      const name = spec.model.name ?? models.policy.defaultModel ?? 'default';
      return { model: models.open({ ...endpoint, model: name }), name, max_tokens: spec.model.max_tokens, usageKind: null };
    }
    // Deleted since the spec was written: the installation's key, under its policy.
    log.warn({ agentId, credentialId }, "the agent's llm credential is gone: the installation's model answers");
  }
  if (!deps.model) return null;
  if (!models) return { model: deps.model, name: spec.model.name, max_tokens: spec.model.max_tokens, usageKind: 'llm_tokens' };
  const run = models.policy.forTurn(spec.model);
  if (run.refused !== undefined) log.warn({ agentId, model: run.refused }, 'the agent names a model this installation does not allow: the default model answers');
  return { model: deps.model, name: run.name, max_tokens: run.max_tokens, usageKind: models.policy.usageKind(run.name) };
}
