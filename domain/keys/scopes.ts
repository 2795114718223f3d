/** Every scope of the contract's table (docs/api.md), with its console label. */
export const SCOPES = {
  'workflows:read': 'Read agents',
  'workflows:write': 'Create and edit agents',
  'workflows:publish': 'Publish agents',
  'kb:read': 'Read knowledge base',
  'kb:write': 'Upload and manage knowledge base',
  'customers:read': 'Read customers',
  'customers:write': 'Create and update customers',
  'conversations:read': 'Read conversations and transcripts',
  'conversations:write': 'Write conversations',
  'credentials:read': 'Read provider credentials',
  'credentials:write': 'Register provider credentials',
  'mcp_servers:read': 'Read MCP tool servers',
  'mcp_servers:write': 'Register MCP tool servers',
  'documents:extract': 'Structured document extraction',
  'analytics:read': 'Read analytics',
  'support:read': 'Read support tickets',
  'support:write': 'Raise and reply to support tickets',
  'webhooks:read': 'Read webhook subscriptions',
  'webhooks:write': 'Manage webhook subscriptions',
  // The legacy customer-memory ingestion scope: accepted on keys, required by no route.
  'memory:write': 'Customer memory ingestion (legacy)',
} as const;

export type Scope = keyof typeof SCOPES;
export const ALL_SCOPES = Object.keys(SCOPES) as Scope[];
export const LEGACY_SCOPES: readonly Scope[] = ['memory:write'];

/** What a new key starts with in the console. */
export const DEFAULT_SCOPES: readonly Scope[] = ['documents:extract', 'kb:read', 'kb:write', 'memory:write'];

export function isScope(value: string): value is Scope {
  return Object.prototype.hasOwnProperty.call(SCOPES, value);
}
