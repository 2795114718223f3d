import { runSuites } from '../support/suites';

// MCP servers and who owns a blob.
// Run as one file so they share the loaded modules (test/support/suites.ts).
runSuites([
  'api/mcp',
  'api/mcp-security',
  'api/blob-owners',
]);
