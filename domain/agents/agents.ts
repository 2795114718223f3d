import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Agent, type IAgent } from '../../db/entities';
import { DomainError } from '../errors';
import { newId } from '../../lib/ids';
import { keysetFind } from '../../db/pagination';
import type { CredentialService } from '../credentials/credentials';
import type { FolderService } from '../kb/folders';
import type { ModelPolicy } from './model-policy';
import type { KnowledgeBaseRepository } from '../kb/repository';
import type { AgentRepository } from './repository';
import { ProviderError, type MsgappProvider } from '../ports/msgapp';
import { AgentSpec } from './spec';
import { generateAgentSpec } from './generate';
import type { LlmSettings, ModelFactory } from '../ports/llm';

/** What publishing needs to check that a msgapp number is the agent's to claim. */
export interface NumberOwnershipDeps {
  /** Null when no provider is configured: a number cannot be verified, so it is not claimed. */
  provider: MsgappProvider | null;
  credentials: CredentialService;
}

/** What an agent's knowledge-base selection is checked against. */
export interface AgentDeps extends NumberOwnershipDeps {
  folders: FolderService;
  /** This aggregate's rows as other modules read them (the number claim is checked through it too). */
  rows: AgentRepository;
  /** Whether the files an agent selects exist. */
  kb: Pick<KnowledgeBaseRepository, 'existingFiles'>;
  /** The operator's allow-list of models and max_tokens cap; absent: none applied (tests of other areas). */
  models?: ModelPolicy;
  /** The model that writes a draft from a description (POST /agents/generate); `llm` null: 503 llm_not_configured. */
  writer: { llm: LlmSettings | null; openModel: ModelFactory };
}

const UNIQUE_VIOLATION = '23505';
const CLAIM_INDEX = 'agents_msgapp_claim_uq';

export interface AgentView {
  id: string;
  name: string;
  status: 'draft' | 'published';
  spec: AgentSpec;
  runnable: boolean;
  invalid_reasons: string[];
  published_at: string | null;
  created_at: string;
  updated_at: string;
}

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

function view(r: IAgent): AgentView {
  return {
    id: r.id,
    name: r.name,
    status: r.status,
    spec: r.spec,
    runnable: r.status === 'published' && r.invalidReasons.length === 0,
    invalid_reasons: [...r.invalidReasons],
    published_at: iso(r.publishedAt ?? null),
    created_at: iso(r.createdAt)!,
    updated_at: iso(r.updatedAt)!,
  };
}

/** Re-validates a spec built from stored or merged parts; a failure names the field, as request validation does. */
function parseSpec(input: unknown): AgentSpec {
  const parsed = AgentSpec.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new DomainError('invalid_request', `body.${issue.path.join('.')}: ${issue.message}`);
  }
  return parsed.data;
}

const numberInUse = (phoneNumberId: string, agentId?: string) =>
  new DomainError('number_in_use', `msgapp phone_number_id ${phoneNumberId} is already claimed by another published agent`, agentId ? { agent_id: agentId } : {});

/** Runs the write that may claim a number; losing a concurrent race on the unique index is 409 number_in_use. */
async function claiming<T>(spec: AgentSpec, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    const e = err as { code?: string; constraint?: string; message?: string };
    if (e.code === UNIQUE_VIOLATION && (e.constraint === CLAIM_INDEX || e.message?.includes(CLAIM_INDEX))) {
      throw numberInUse(spec.triggers.msgapp?.phone_number_id ?? '');
    }
    throw err;
  }
}

/** What an agent held before an edit: whether its number is already claimed by it. */
interface ClaimState {
  id: string;
  status: 'draft' | 'published';
  spec: AgentSpec;
  invalidReasons: string[];
}

const snapshot = (a: IAgent): ClaimState => ({ id: a.id, status: a.status, spec: a.spec, invalidReasons: [...a.invalidReasons] });

const notFound = (id: string) => new DomainError('not_found', `No agent with id '${id}' in this workspace`);

/**
 * Agents: a spec document per agent, `draft` until published. Publishing checks what
 * the agent needs to run (instructions, a credential for its number, a knowledge-base
 * selection that exists) and records every problem in `invalid_reasons` — what a send
 * on its number reports as `sender_agent_invalid`. Edits of a published agent are
 * re-checked the same way.
 *
 * A msgapp `phone_number_id` is claimed by at most one agent in the whole installation:
 * the published agent that can run. Before an agent claims one, the provider is asked
 * with the agent's own credential whether that token owns the number (`GET
 * /{phone-number-id}`); a refusal is 422 `number_not_owned`, and a number another agent
 * holds is 409 `number_in_use` (also enforced by a unique index, so two concurrent
 * publishes cannot both win). An agent that cannot run claims nothing.
 */
export class AgentService {
  constructor(
    private readonly em: EntityManager,
    private readonly numbers: AgentDeps,
  ) {}

  /** A draft written by the model from a description (503 llm_not_configured, 502 llm_unavailable, 422 generation_failed), created as `create` does. */
  async generate(workspaceId: string, description: string): Promise<AgentView> {
    const { llm, openModel } = this.numbers.writer;
    return this.create(workspaceId, await generateAgentSpec(llm, description, openModel));
  }

  async create(workspaceId: string, input: unknown): Promise<AgentView> {
    const spec = parseSpec(input);
    await this.checkModel(workspaceId, spec);
    const em = this.em.fork();
    const row = em.create(Agent, { id: newId('agt'), workspaceId, name: spec.name, status: 'draft', spec, invalidReasons: [], publishedAt: null });
    await em.flush();
    return view(row);
  }

  async list(workspaceId: string, q: { status?: 'draft' | 'published'; limit: number; cursor?: string }): Promise<{ agents: AgentView[]; next_cursor: string | null }> {
    const page = await keysetFind(this.em.fork(), Agent, q.status ? { workspaceId, status: q.status } : { workspaceId }, q);
    return { agents: page.rows.map(view), next_cursor: page.next_cursor };
  }

  async get(workspaceId: string, id: string): Promise<AgentView> {
    return view(await this.row(this.em.fork(), workspaceId, id));
  }

  private async row(em: EntityManager, workspaceId: string, id: string, lock = false): Promise<IAgent> {
    const row = await em.findOne(Agent, { id, workspaceId }, lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
    if (!row) throw notFound(id);
    return row;
  }

  /** Replaces the top-level spec fields given; the result must be a valid spec. */
  async update(workspaceId: string, id: string, patch: Record<string, unknown>): Promise<AgentView> {
    return this.em.fork().transactional(async (em) => {
      const current = await this.row(em, workspaceId, id, true);
      const spec = parseSpec({ ...current.spec, ...patch });
      await this.checkModel(workspaceId, spec);
      const reasons = current.status === 'published' ? await this.reasons(em, workspaceId, spec) : [];
      if (current.status === 'published' && reasons.length === 0) await this.checkClaim(em, workspaceId, snapshot(current), spec);
      current.name = spec.name;
      current.spec = spec;
      current.invalidReasons = reasons;
      current.updatedAt = new Date();
      await claiming(spec, () => em.flush());
      return view(current);
    });
  }

  /**
   * Whatever writes a spec (create, from-spec, generate, PATCH): on the installation's key
   * only an allowed model and max_tokens up to the cap (400 invalid_request naming the
   * field); with the workspace's own llm credential (404 credential_not_found when it names
   * none), anything. The turn applies the same
   * policy again to whatever is stored (domain/chat/turn.ts).
   */
  private async checkModel(workspaceId: string, spec: AgentSpec): Promise<void> {
    const credentialId = spec.model.credential_id;
    if (credentialId !== undefined) {
      if (!(await this.numbers.credentials.hasLlmCredential(workspaceId, credentialId))) {
        // A reference to a resource that is not there, as the contract answers folder_not_found and parent_not_found: 404.
        throw new DomainError('credential_not_found', `body.model.credential_id: no llm credential '${credentialId}' in this workspace`);
      }
      return;
    }
    const refused = this.numbers.models?.refusal(spec.model);
    if (refused) throw new DomainError('invalid_request', `body.${refused.field}: ${refused.message}`);
  }

  async publish(workspaceId: string, id: string): Promise<AgentView> {
    return this.em.fork().transactional(async (em) => {
      const current = await this.row(em, workspaceId, id, true);
      const reasons = await this.reasons(em, workspaceId, current.spec);
      if (reasons.length === 0) await this.checkClaim(em, workspaceId, snapshot(current), current.spec);
      current.status = 'published';
      current.invalidReasons = reasons;
      current.publishedAt ??= new Date();
      current.updatedAt = new Date();
      await claiming(current.spec, () => em.flush());
      return view(current);
    });
  }

  /**
   * Before a runnable agent claims its msgapp number: no other agent holds it (409
   * number_in_use), and the provider confirms that the agent's own token owns it (422
   * number_not_owned; 502 provider_error when the provider cannot answer now). Skipped
   * when the agent already holds the same number with the same credential. The provider
   * is called while this agent's row is locked: only this agent's edits wait for it.
   */
  private async checkClaim(em: EntityManager, workspaceId: string, current: ClaimState, spec: AgentSpec): Promise<void> {
    const msgapp = spec.triggers.msgapp;
    if (!msgapp?.credential_id) return;
    const held = current.spec.triggers.msgapp;
    if (
      current.status === 'published' &&
      current.invalidReasons.length === 0 &&
      held?.phone_number_id === msgapp.phone_number_id &&
      held.credential_id === msgapp.credential_id
    ) {
      return;
    }
    const holder = await this.numbers.rows.agentClaimingNumber(em, msgapp.phone_number_id, current.id);
    // Another workspace's agent is never named.
    if (holder) throw numberInUse(msgapp.phone_number_id, holder.workspaceId === workspaceId ? holder.id : undefined);
    const token = await this.numbers.credentials.msgappToken(workspaceId, msgapp.credential_id);
    if (token === null || !this.numbers.provider) return; // reasons() has recorded why it cannot run
    try {
      await this.numbers.provider.getPhoneNumber(msgapp.phone_number_id, token);
    } catch (err) {
      if (err instanceof ProviderError && !err.retryable) {
        const reason = `the access token of credential ${msgapp.credential_id} does not own msgapp phone_number_id ${msgapp.phone_number_id} (provider: ${err.message})`;
        throw new DomainError('number_not_owned', `The provider does not confirm that this agent's credential owns phone_number_id ${msgapp.phone_number_id}`, {
          reasons: [reason],
        });
      }
      throw new DomainError('provider_error', `The provider could not confirm the number's owner now; try again: ${(err as Error).message}`);
    }
  }

  /** Why an agent with this spec cannot run; empty when it can. */
  private async reasons(em: EntityManager, workspaceId: string, spec: AgentSpec): Promise<string[]> {
    const out: string[] = [];
    if (!spec.instructions.trim()) out.push('instructions are empty');
    const msgapp = spec.triggers.msgapp;
    if (msgapp && !msgapp.credential_id) out.push(`msgapp number ${msgapp.number} has no credential_id for the provider's access token`);
    if (msgapp?.credential_id) {
      if (!(await this.numbers.credentials.hasMsgappToken(workspaceId, msgapp.credential_id))) out.push(`credential ${msgapp.credential_id} does not exist in this workspace`);
      else if (!this.numbers.provider) out.push(`msgapp phone_number_id ${msgapp.phone_number_id} cannot be verified: no msgapp provider is configured (MSGAPP_API_BASE)`);
    }
    if (spec.knowledge_base.folder_ids.length) {
      const found = await this.numbers.folders.existing(workspaceId, spec.knowledge_base.folder_ids, em);
      for (const f of spec.knowledge_base.folder_ids) if (!found.has(f)) out.push(`knowledge-base folder ${f} does not exist`);
    }
    if (spec.knowledge_base.file_ids.length) {
      const found = await this.numbers.kb.existingFiles(em, workspaceId, spec.knowledge_base.file_ids);
      for (const f of spec.knowledge_base.file_ids) if (!found.has(f)) out.push(`knowledge-base file ${f} does not exist`);
    }
    if (!msgapp && !spec.triggers.web_chat) out.push('no trigger: add a msgapp number or a web_chat site');
    return out;
  }
}
