import { ErrorAlert, Loading } from '../components/feedback';
import { Page } from '../components/Page';
import { Link, useHash, usePath } from '../lib/router';
import { useSession, type Session } from '../features/auth/api';
import { SignIn } from '../features/auth/SignIn';
import { LinkPage, linkToken } from '../features/auth/LinkPage';
import { KeysPage } from '../features/keys/KeysPage';
import { PeoplePage } from '../features/people/PeoplePage';
import { AuditPage } from '../features/audit/AuditPage';
import { SsoPage } from '../features/sso/SsoPage';
import { SecurityPage } from '../features/security/SecurityPage';
import { Overview } from '../features/home/Overview';
import { WebhooksPage } from '../features/webhooks/WebhooksPage';
import { WebhookPage } from '../features/webhooks/WebhookPage';
import { SitesPage } from '../features/sites/SitesPage';
import { SitePage } from '../features/sites/SitePage';
import { KnowledgeBasePage } from '../features/kb/KnowledgeBasePage';
import { AgentsPage } from '../features/agents/AgentsPage';
import { AgentPage } from '../features/agents/AgentPage';
import { CredentialsPage } from '../features/credentials/CredentialsPage';
import { BillingPage } from '../features/billing/BillingPage';
import { McpServersPage } from '../features/mcp/McpServersPage';
import { SupportPage, TicketPage } from '../features/support/SupportPage';
import { DebuggerIndexPage, DebuggerPage } from '../features/debugger/DebuggerPage';
import { MessagePage, MessagesPage } from '../features/messages/MessagesPage';
import { AnalyticsPage } from '../features/analytics/AnalyticsPage';
import { InboxPage } from '../features/inbox/InboxPage';
import { Shell } from './Shell';
import { sectionsFor } from './sections';

/**
 * The console: a one-time link's page for anyone holding one, the sign-in form for anyone signed out (on whatever
 * page they asked for, shown once they are in), else the page in the signed-in frame.
 */
export function App() {
  const path = usePath();
  const hash = useHash();
  const session = useSession();
  if (path === '/link' || path.startsWith('/link/')) return <LinkPage token={linkToken(path, hash)} />;
  if (session.isPending) {
    return (
      <main className="auth" id="main">
        <Loading what="the console" />
      </main>
    );
  }
  if (session.isError) {
    return (
      <main className="auth" id="main">
        <Page title="The console cannot start">
          <ErrorAlert error={session.error} />
        </Page>
      </main>
    );
  }
  if (!session.data) return <SignIn />;
  const sections = sectionsFor(session.data);
  return (
    <Shell session={session.data} sections={sections}>
      <Route path={path} session={session.data} />
    </Shell>
  );
}

function Route({ path, session }: { path: string; session: Session }) {
  const conversation = /^\/inbox\/([^/]+)$/.exec(path);
  if (conversation) return <InboxPage session={session} id={decodeURIComponent(conversation[1])} />;
  const site = /^\/sites\/([^/]+)$/.exec(path);
  if (site) return <SitePage session={session} id={decodeURIComponent(site[1])} />;
  const agent = /^\/agents\/([^/]+)$/.exec(path);
  if (agent) return <AgentPage session={session} id={decodeURIComponent(agent[1])} />;
  const webhook = /^\/webhooks\/([^/]+)$/.exec(path);
  if (webhook) return <WebhookPage session={session} id={decodeURIComponent(webhook[1])} />;
  const ticket = /^\/support\/([^/]+)$/.exec(path);
  if (ticket) return <TicketPage session={session} id={decodeURIComponent(ticket[1])} />;
  const debug = /^\/conversations\/([^/]+)\/debug$/.exec(path);
  if (debug) return <DebuggerPage session={session} id={decodeURIComponent(debug[1])} />;
  const message = /^\/messages\/([^/]+)$/.exec(path);
  if (message) return <MessagePage session={session} id={decodeURIComponent(message[1])} />;
  switch (path) {
    case '/':
      return <Overview session={session} sections={sectionsFor(session)} />;
    case '/inbox':
      return <InboxPage session={session} />;
    case '/keys':
      return <KeysPage session={session} />;
    case '/people':
      return <PeoplePage session={session} />;
    case '/sites':
      return <SitesPage session={session} />;
    case '/knowledge-base':
      return <KnowledgeBasePage session={session} />;
    case '/agents':
      return <AgentsPage session={session} />;
    case '/webhooks':
      return <WebhooksPage session={session} />;
    case '/credentials':
      return <CredentialsPage session={session} />;
    case '/mcp-servers':
      return <McpServersPage session={session} />;
    case '/billing':
      return <BillingPage session={session} />;
    case '/support':
      return <SupportPage session={session} />;
    case '/debugger':
      return <DebuggerIndexPage session={session} />;
    case '/messages':
      return <MessagesPage session={session} />;
    case '/analytics':
      return <AnalyticsPage session={session} />;
    case '/audit-log':
      return <AuditPage session={session} />;
    case '/sso':
      return <SsoPage session={session} />;
    case '/security':
      return <SecurityPage session={session} />;
    default:
      return (
        <Page title="Page not found">
          <p>
            There is no console page at this address. <Link to="/">Go to the overview</Link>.
          </p>
        </Page>
      );
  }
}
