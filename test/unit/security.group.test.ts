import { runSuites } from '../support/suites';

// Redaction, masking, webhook signatures, payload codec, URLs and model policy.
// Run as one file so they share the loaded modules (test/support/suites.ts).
runSuites([
  'unit/log-redaction',
  'unit/masking',
  'unit/redact',
  'unit/ssrf',
  'unit/payload-codec',
  'unit/verify-webhook',
  'unit/public-base-url',
  'unit/model-policy',
]);
