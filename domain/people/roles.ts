import { CONSOLE_ROLES, type ConsoleRole } from '../../db/entities';
import { ALL_SCOPES, type Scope } from '../keys/scopes';

export { CONSOLE_ROLES, type ConsoleRole };

/**
 * Roles → the contract's scopes (shared/spec/DECISIONS.md "The console"): `owner` and `admin` every scope; `agent`
 * conversations:*, customers:*, kb:read, workflows:read; `viewer` every `:read` scope. A signed-in user calls the
 * /api/v1 operations with these, through the same deny-by-default check as a key.
 */
export const ROLE_SCOPES: Readonly<Record<ConsoleRole, readonly Scope[]>> = {
  owner: ALL_SCOPES,
  admin: ALL_SCOPES,
  agent: ALL_SCOPES.filter((s) => s.startsWith('conversations:') || s.startsWith('customers:') || s === 'kb:read' || s === 'workflows:read'),
  viewer: ALL_SCOPES.filter((s) => s.endsWith(':read')),
};

export function scopesOf(role: ConsoleRole): ReadonlySet<string> {
  return new Set(ROLE_SCOPES[role]);
}

export function isRole(value: string): value is ConsoleRole {
  return (CONSOLE_ROLES as readonly string[]).includes(value);
}

/** The console's own operations (under /api/console/): who may do what, beyond holding a session. */
export const CONSOLE_PERMISSIONS = {
  /** People: list, invite, change roles, remove (only an owner touches owners). */
  manageUsers: ['owner', 'admin'],
  /** The key console: list, create, copy, rotate, delete. */
  manageKeys: ['owner', 'admin'],
  /** Web-chat sites: create, origins, page commands, look, secret rotation, suspend and resume. */
  manageSites: ['owner', 'admin'],
  /** The audit log. */
  readAudit: ['owner', 'admin'],
  /** The agent builder's "Try it": a real turn in a test conversation (those who may edit agents). */
  tryAgents: ['owner', 'admin'],
  /** OpenID Connect sign-in's settings (shared/spec/DECISIONS.md: only an owner manages SSO). */
  manageSso: ['owner'],
  /** Whether the workspace requires a second factor at sign-in. */
  manageSignInPolicy: ['owner'],
  /** The conversation debugger's model output before masking (each view audited). */
  readUnmaskedOutput: ['owner', 'admin'],
  /** A conversation's workflow history, exported for `npm run replay` (audited). */
  exportHistories: ['owner', 'admin'],
  /** The inbox: read conversations, their notes and the team (conversations:read). */
  readInbox: ['owner', 'admin', 'agent', 'viewer'],
  /** The inbox: take over, assign, reply, note, hand back, close; one's own presence (conversations:write). */
  workInbox: ['owner', 'admin', 'agent'],
  /** The inbox's canned replies, automatic assignment and people's capacity. */
  manageInbox: ['owner', 'admin'],
} as const satisfies Record<string, readonly ConsoleRole[]>;
export type ConsolePermission = keyof typeof CONSOLE_PERMISSIONS;

export function may(role: ConsoleRole, permission: ConsolePermission): boolean {
  return (CONSOLE_PERMISSIONS[permission] as readonly ConsoleRole[]).includes(role);
}
