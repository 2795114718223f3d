import { runSuites } from '../support/suites';

// The widget's small routes: assets, init, feedback, appearance, team availability.
// Run as one file so they share the loaded modules (test/support/suites.ts).
runSuites([
  'api/widget-assets',
  'api/widget-init',
  'api/widget-feedback',
  'api/site-appearance',
  'api/team-availability',
]);
