import { runSuites } from '../support/suites';

// The console's sign-in, SSO, TOTP and sites API.
// Run as one file so they share the loaded modules (test/support/suites.ts).
runSuites([
  'api/console-auth',
  'api/console-sso',
  'api/console-totp',
  'api/console-sites',
]);
