import type { EntityManager } from '@mikro-orm/postgresql';
import { textArray } from '../db/sql';
import { ApiError } from '../errors';
import { newId } from '../ids';
import { Filters, keysetPage } from '../pagination';
import { AgentSpec } from './spec';

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

interface AgentRow {
  id: string;
  workspace_id: string;
  name: string;
  status: 'draft' | 'published';
  spec: AgentSpec;
  invalid_reasons: string[];
  published_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

function view(r: AgentRow): AgentView {
  return {
    id: r.id,
    name: r.name,
    status: r.status,
    spec: r.spec,
    runnable: r.status === 'published' && r.invalid_reasons.length === 0,
    invalid_reasons: r.invalid_reasons,
    published_at: iso(r.published_at),
    created_at: iso(r.created_at)!,
    updated_at: iso(r.updated_at)!,
  };
}

/** Re-validates a spec built from stored or merged parts; a failure names the field, as request validation does. */
function parseSpec(input: unknown): AgentSpec {
  const parsed = AgentSpec.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ApiError(400, 'invalid_request', `body.${issue.path.join('.')}: ${issue.message}`);
  }
  return parsed.data;
}

const notFound = (id: string) => new ApiError(404, 'not_found', `No agent with id '${id}' in this workspace`);

/**
 * Agents: a spec document per agent, `draft` until published. Publishing checks what
 * the agent needs to run (instructions, a credential for its number, a knowledge-base
 * selection that exists) and records every problem in `invalid_reasons` — what a send
 * on its number reports as `sender_agent_invalid`. Edits of a published agent are
 * re-checked the same way.
 */
export class AgentService {
  constructor(private readonly em: EntityManager) {}

  async create(workspaceId: string, input: unknown): Promise<AgentView> {
    const spec = parseSpec(input);
    const [row] = await this.em.fork().execute<AgentRow[]>(
      `insert into agents (id, workspace_id, name, status, spec) values (?, ?, ?, 'draft', ?::jsonb) returning *`,
      [newId('agt'), workspaceId, spec.name, JSON.stringify(spec)],
    );
    return view(row);
  }

  async list(workspaceId: string, q: { status?: 'draft' | 'published'; limit: number; cursor?: string }): Promise<{ agents: AgentView[]; next_cursor: string | null }> {
    const filters = new Filters('workspace_id = ?', workspaceId);
    if (q.status) filters.add('status = ?', q.status);
    const page = await keysetPage<AgentRow>(this.em.fork(), 'select * from agents', filters, q);
    return { agents: page.rows.map(view), next_cursor: page.next_cursor };
  }

  async get(workspaceId: string, id: string): Promise<AgentView> {
    return view(await this.row(this.em.fork(), workspaceId, id));
  }

  private async row(em: EntityManager, workspaceId: string, id: string, lock = false): Promise<AgentRow> {
    const [row] = await em.execute<AgentRow[]>(`select * from agents where id = ? and workspace_id = ?${lock ? ' for update' : ''}`, [id, workspaceId]);
    if (!row) throw notFound(id);
    return row;
  }

  /** Replaces the top-level spec fields given; the result must be a valid spec. */
  async update(workspaceId: string, id: string, patch: Record<string, unknown>): Promise<AgentView> {
    return this.em.fork().transactional(async (em) => {
      const current = await this.row(em, workspaceId, id, true);
      const spec = parseSpec({ ...current.spec, ...patch });
      const reasons = current.status === 'published' ? await this.reasons(em, workspaceId, spec) : [];
      const [row] = await em.execute<AgentRow[]>(
        `update agents set name = ?, spec = ?::jsonb, invalid_reasons = ?::text[], updated_at = now() where id = ? returning *`,
        [spec.name, JSON.stringify(spec), textArray(reasons), id],
      );
      return view(row);
    });
  }

  async publish(workspaceId: string, id: string): Promise<AgentView> {
    return this.em.fork().transactional(async (em) => {
      const current = await this.row(em, workspaceId, id, true);
      const reasons = await this.reasons(em, workspaceId, current.spec);
      const [row] = await em.execute<AgentRow[]>(
        `update agents set status = 'published', invalid_reasons = ?::text[], published_at = coalesce(published_at, now()), updated_at = now()
         where id = ? returning *`,
        [textArray(reasons), id],
      );
      return view(row);
    });
  }

  /** Why an agent with this spec cannot run; empty when it can. */
  private async reasons(em: EntityManager, workspaceId: string, spec: AgentSpec): Promise<string[]> {
    const out: string[] = [];
    if (!spec.instructions.trim()) out.push('instructions are empty');
    const msgapp = spec.triggers.msgapp;
    if (msgapp && !msgapp.credential_id) out.push(`msgapp number ${msgapp.number} has no credential_id for the provider's access token`);
    if (spec.knowledge_base.folder_ids.length) {
      const rows = await em.execute<{ id: string }[]>(`select id from kb_folders where workspace_id = ? and id = any(?::text[])`, [
        workspaceId,
        textArray(spec.knowledge_base.folder_ids),
      ]);
      const found = new Set(rows.map((r) => r.id));
      for (const f of spec.knowledge_base.folder_ids) if (!found.has(f)) out.push(`knowledge-base folder ${f} does not exist`);
    }
    if (spec.knowledge_base.file_ids.length) {
      const rows = await em.execute<{ id: string }[]>(`select id from kb_files where workspace_id = ? and id = any(?::text[])`, [
        workspaceId,
        textArray(spec.knowledge_base.file_ids),
      ]);
      const found = new Set(rows.map((r) => r.id));
      for (const f of spec.knowledge_base.file_ids) if (!found.has(f)) out.push(`knowledge-base file ${f} does not exist`);
    }
    if (!msgapp && !spec.triggers.web_chat) out.push('no trigger: add a msgapp number or a web_chat site');
    return out;
  }
}
