import { runSuites } from '../support/suites';

// Temporal payloads and the database schema: the codec, payload encryption, data migrations, entities against migrations.
// Run as one file so they share the loaded modules (test/support/suites.ts).
runSuites([
  'api/temporal-codec',
  'api/temporal-payload-encryption',
  'api/msgapp-claim-migration',
  'api/credentials-migration',
  'db/entities-schema',
  'db/analytics-shards',
]);
