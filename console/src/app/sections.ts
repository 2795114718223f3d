import { hasScope, managesWorkspace, type Session } from '../features/auth/api';

export interface Section {
  path: string;
  label: string;
  about: string;
  /** Whether this person's role lets them see the page (the API enforces the same). */
  visible: (session: Session) => boolean;
}

const always = () => true;
const managers = (session: Session) => managesWorkspace(session.user.role);

/** The console's pages, in the navigation's order; each role sees those it may use. */
export const SECTIONS: Section[] = [
  { path: '/', label: 'Overview', about: 'Your workspace and your role.', visible: always },
  { path: '/agents', label: 'Agents', about: 'Build, try and publish the agents that answer your customers.', visible: (s) => hasScope(s, 'workflows:read') },
  { path: '/knowledge-base', label: 'Knowledge base', about: 'Folders and files your agents answer from: upload, index, search.', visible: (s) => hasScope(s, 'kb:read') },
  { path: '/inbox', label: 'Inbox', about: 'Every conversation, live: take over from the agent, reply, hand back; the queue of those waiting for a person.', visible: (s) => hasScope(s, 'conversations:read') },
  { path: '/keys', label: 'API keys', about: 'Create, copy, rotate and delete the keys your backend calls the API with.', visible: managers },
  { path: '/people', label: 'People', about: 'Invite people, change their roles, remove them.', visible: managers },
  { path: '/sites', label: 'Sites', about: 'The websites your chat widget runs on: origins, look, identity verification, secret, and the code to paste.', visible: managers },
  { path: '/webhooks', label: 'Webhooks', about: 'Endpoints your backend receives events on, their delivery log, retry and replay.', visible: (s) => hasScope(s, 'webhooks:read') },
  { path: '/credentials', label: 'Credentials', about: 'Your accounts at providers: secrets sealed, only their last four shown.', visible: (s) => hasScope(s, 'credentials:read') },
  { path: '/mcp-servers', label: 'MCP servers', about: 'Tool servers your agents can call, with their tools.', visible: (s) => hasScope(s, 'mcp_servers:read') },
  { path: '/debugger', label: 'Debugger', about: 'Each agent reply as its workflow recorded it: passages, prompt, tool calls, output, latency.', visible: (s) => hasScope(s, 'conversations:read') },
  { path: '/messages', label: 'Messages', about: 'Messages sent through the API, with their delivery status and errors.', visible: (s) => hasScope(s, 'conversations:read') },
  { path: '/analytics', label: 'Analytics', about: 'Conversations over time, by channel, resolution, response times, busiest hours, ratings.', visible: (s) => hasScope(s, 'analytics:read') },
  { path: '/billing', label: 'Billing', about: 'The credit balance and usage by day, priced.', visible: (s) => hasScope(s, 'analytics:read') },
  { path: '/support', label: 'Support', about: 'Tickets with the installation’s support: raise, reply, follow.', visible: (s) => hasScope(s, 'support:read') },
  { path: '/security', label: 'Two-step sign-in', about: 'A code from an authenticator app at every password sign-in; owners can require it.', visible: always },
  { path: '/sso', label: 'Single sign-on', about: 'Your identity provider (OpenID Connect): who signs in through it, and as what.', visible: (s) => s.user.role === 'owner' },
  { path: '/audit-log', label: 'Audit log', about: 'Every sign-in, key and people change, with who, when and from where.', visible: managers },
];

export const sectionsFor = (session: Session) => SECTIONS.filter((s) => s.visible(session));
