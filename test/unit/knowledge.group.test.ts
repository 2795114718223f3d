import { runSuites } from '../support/suites';

// Answers, chunks, citations, embeddings, extraction, storage, composition and the docs' links.
// Run as one file so they share the loaded modules (test/support/suites.ts).
runSuites([
  'unit/answer-without-model',
  'unit/chunker',
  'unit/citations',
  'unit/embedder-config',
  'unit/embedder',
  'unit/structured-extraction',
  'unit/blob-store',
  'unit/storage-config',
  'unit/conversation-debugger',
  'unit/compose',
  'unit/docs-links',
  'unit/whisper-ggml',
]);
