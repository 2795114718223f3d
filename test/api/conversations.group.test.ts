import { runSuites } from '../support/suites';

// Conversations across tenants: hand-off to a person, tenancy of the widget's routes, no secret in the logs.
// Run as one file so they share the loaded modules (test/support/suites.ts).
runSuites([
  'api/human-handoff',
  'api/widget-tenancy',
  'api/secret-logs',
]);
