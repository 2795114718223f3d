import { runSuites } from '../support/suites';

// The API's own behaviour: errors, authentication, idempotency, metrics, served names, shutdown, provider events, the OpenAPI document.
// Run as one file so they share the loaded modules (test/support/suites.ts).
runSuites([
  'api/errors',
  'api/auth',
  'api/idempotency',
  'api/metrics',
  'api/served-names',
  'api/shutdown',
  'api/provider-events',
  'api/openapi',
]);
