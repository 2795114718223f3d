import { runSuites } from '../support/suites';

// Messaging, mail and the widget's words.
// Run as one file so they share the loaded modules (test/support/suites.ts).
runSuites([
  'unit/msgapp-provider',
  'unit/msgapp-sandbox',
  'unit/smtp-mailer',
  'unit/rich',
  'unit/widget-strings',
  'unit/site-appearance',
  'unit/team-availability',
  'unit/fair-pool',
  'unit/batcher',
  'unit/workflow-client-errors',
]);
