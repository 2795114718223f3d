import { runSuites } from '../support/suites';

// The console's team, analytics, agent trial and inbox files API.
// Run as one file so they share the loaded modules (test/support/suites.ts).
runSuites([
  'api/console-people',
  'api/console-agent-try',
  'api/console-analytics',
  'api/console-inbox-attachments',
]);
