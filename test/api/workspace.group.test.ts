import { runSuites } from '../support/suites';

// A workspace's resources: folders, customers, agents and their models, analytics, webhook subscriptions, support.
// Run as one file so they share the loaded modules (test/support/suites.ts).
runSuites([
  'api/folders',
  'api/customers',
  'api/agents',
  'api/agent-models',
  'api/analytics',
  'api/webhook-subscriptions',
  'api/support',
]);
