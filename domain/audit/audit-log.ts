import type { EntityManager } from '@mikro-orm/postgresql';
import { AuditEvent, type ActorType, type IAuditEvent } from '../../db/entities';
import { keysetFind } from '../../db/pagination';
import { newId } from '../../lib/ids';

/**
 * Who acted: a console user (id and email, kept as text so the record outlives the user), an API key, the admin
 * CLI on the server, nobody known (a failed sign-in), or the service itself (code that acts for no one: tests,
 * benchmarks, workflows).
 */
export type Actor =
  | { type: 'user'; id: string; email: string }
  | { type: 'key'; id: string }
  | { type: 'cli' }
  | { type: 'anonymous'; email?: string }
  | { type: 'system' };

/** Who, and from where (the API fills ip and user agent from the request). */
export interface AuditContext {
  actor: Actor;
  ip?: string | null;
  userAgent?: string | null;
}

export const CLI_CONTEXT: AuditContext = { actor: { type: 'cli' } };
export const SYSTEM_CONTEXT: AuditContext = { actor: { type: 'system' } };

/** Every act the log records (docs/security.md "Audit log"). */
export type AuditAction =
  | 'user.signed_in'
  | 'user.sign_in_failed'
  | 'user.signed_out_everywhere'
  | 'user.created'
  | 'user.invited'
  | 'user.invitation_accepted'
  | 'user.role_changed'
  | 'user.removed'
  | 'user.password_reset_requested'
  | 'user.password_reset_completed'
  | 'user.sign_in_link_issued'
  | 'key.created'
  | 'key.copied'
  | 'key.rotated'
  | 'key.deleted'
  | 'site.secret_rotated'
  | 'credential.added'
  | 'webhook_subscription.secret_rotated'
  | 'sso.settings_changed'
  | 'user.totp_enrolled'
  | 'user.totp_reset'
  | 'sign_in_policy.changed'
  | 'conversation.debug_viewed'
  | 'conversation.history_exported';

export interface AuditRecord {
  workspaceId: string | null;
  action: AuditAction;
  target?: { type: string; id: string } | null;
  details?: Record<string, unknown>;
}

export interface AuditEventView {
  id: string;
  action: string;
  created_at: string;
  actor: { type: ActorType; id: string | null; email: string | null };
  ip: string | null;
  user_agent: string | null;
  target: { type: string; id: string } | null;
  details: Record<string, unknown>;
}

const clip = (v: string | null | undefined, max: number) => (v ? v.slice(0, max) : null);

function view(row: IAuditEvent): AuditEventView {
  return {
    id: row.id,
    action: row.action,
    created_at: row.createdAt.toISOString(),
    actor: { type: row.actorType, id: row.actorId ?? null, email: row.actorEmail ?? null },
    ip: row.ip ?? null,
    user_agent: row.userAgent ?? null,
    target: row.targetType && row.targetId ? { type: row.targetType, id: row.targetId } : null,
    details: row.details ?? {},
  };
}

/**
 * Appends one event on the EntityManager given, so an act and its record commit together when the caller passes its
 * transaction. The only write path to audit_events; the database refuses every other (UPDATE, DELETE, TRUNCATE).
 */
export async function recordAudit(em: EntityManager, ctx: AuditContext, rec: AuditRecord): Promise<void> {
  const a = ctx.actor;
  await em.insert(AuditEvent, {
    id: newId('aud'),
    workspaceId: rec.workspaceId,
    action: rec.action,
    actorType: a.type,
    actorId: a.type === 'user' || a.type === 'key' ? a.id : null,
    actorEmail: a.type === 'user' ? a.email : a.type === 'anonymous' ? (a.email ?? null) : null,
    ip: clip(ctx.ip, 100),
    userAgent: clip(ctx.userAgent, 500),
    targetType: rec.target?.type ?? null,
    targetId: rec.target?.id ?? null,
    details: rec.details ?? {},
  });
}

/** Whether a user of this email was removed from the workspace (the log keeps it): SSO does not make them again. */
export async function wasRemoved(em: EntityManager, workspaceId: string, email: string): Promise<boolean> {
  return (await em.count(AuditEvent, { workspaceId, action: 'user.removed', details: { email } })) > 0;
}

/** The audit log as the console reads it: a workspace's events, newest first. */
export class AuditLog {
  constructor(private readonly em: EntityManager) {}

  record(ctx: AuditContext, rec: AuditRecord, em: EntityManager = this.em.fork()): Promise<void> {
    return recordAudit(em, ctx, rec);
  }

  async list(workspaceId: string, q: { limit: number; cursor?: string; action?: string }): Promise<{ events: AuditEventView[]; next_cursor: string | null }> {
    const where = q.action ? { workspaceId, action: q.action } : { workspaceId };
    const page = await keysetFind(this.em.fork(), AuditEvent, where, q);
    return { events: page.rows.map(view), next_cursor: page.next_cursor };
  }
}
