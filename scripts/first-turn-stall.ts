// How long the first agent turn after start holds the event loop (issue 32, item 6), measured with
// perf_hooks.monitorEventLoopDelay around one turn in a fresh process (the models load once per process).
//
//   node --import tsx scripts/first-turn-stall.ts            a workspace with nothing indexed
//   node --import tsx scripts/first-turn-stall.ts --kb       a workspace with one indexed file
//   add --preload                                             the worker's start-up preload first (worker/preload.ts)
//
// The turn runs in-process (services.turns.run, as the activity runs it) on a scratch database of
// BENCH_PG_URL, with the local embedding model (npm run models:fetch) and no language model (the
// answer comes from the passages: the model's time is not the point). With --kb the file is indexed
// by an embedder of its own (as another worker would have), unless --preload loaded the composition's.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { newId } from '../lib/ids';
import { IndexingService } from '../domain/kb/indexing';
import { benchApi, benchEmbedder, createKey, setUpBench } from '../bench/lib/setup';
import { createWidgetSite, initConversation } from '../bench/lib/widget';
import type { Cleanup } from '../bench/lib/child';

async function main() {
  const kb = process.argv.includes('--kb');
  const preload = process.argv.includes('--preload');
  const cleanup: Cleanup = [];
  try {
    const b = await setUpBench(cleanup);
    const embedder = benchEmbedder(b);
    const api = await benchApi(b, { overrides: { embedder: async () => embedder } });
    const c = api.c;
    if (preload) {
      const { preloadModels } = await import('../worker/preload.js');
      const during = monitorEventLoopDelay({ resolution: 5 });
      during.enable();
      const t0 = performance.now();
      const done = await preloadModels(c);
      during.disable();
      console.log(`preload: ${Math.round(performance.now() - t0)} ms ${JSON.stringify(done)}; event-loop delay max ${(during.max / 1e6).toFixed(0)} ms meanwhile`);
    }
    const ws = b.workspaceId;
    if (kb) {
      const { key } = await createKey(c.services, ws, ['kb:write']);
      const boundary = 'x' + newId('req');
      const payload = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="hours.txt"\r\nContent-Type: text/plain\r\n\r\nOur shop is open Monday to Saturday from 9am to 6pm and closed on Sundays.\r\n--${boundary}--\r\n`;
      const res = await api.app.inject({ method: 'POST', url: '/api/v1/kb/files', headers: { authorization: `Bearer ${key}`, 'content-type': `multipart/form-data; boundary=${boundary}` }, payload });
      if (res.statusCode !== 201) throw new Error(`upload answered ${res.statusCode}: ${res.body}`);
      const fileId = res.json().id as string;
      const indexer = preload ? embedder : benchEmbedder(b);
      const indexing = new IndexingService({ em: c.em, kb: c.services.repos.kb, blobs: c.blobs, extract: c.extract, embedder: async () => indexer });
      await indexing.begin(fileId);
      await indexing.extractAndChunk(fileId);
      await indexing.embed(fileId);
      console.log(`indexed: ${await indexing.finish(fileId)}`);
    }
    const { siteId } = await createWidgetSite(api, ws, 'Help shoppers.');
    const conversationId = await initConversation(api, siteId);
    const messageId = newId('msg');
    await c.services.transcript.storeVisitorMessage({ id: messageId, workspaceId: ws, conversationId, clientMessageId: `c-${messageId}`, text: 'When is your shop open?', uploadIds: [] });

    const h = monitorEventLoopDelay({ resolution: 5 });
    h.enable();
    const t0 = performance.now();
    const reply = await c.services.turns.run({ conversationId, workspaceId: ws, messageId, replyId: newId('msg') });
    const ms = performance.now() - t0;
    h.disable();
    const steps = (reply.trace?.steps ?? []).map((s) => `${s.step} ${s.ms}`).join(', ');
    console.log(
      `first turn (${kb ? 'one indexed file' : 'nothing indexed'}${preload ? ', preloaded' : ''}): ${Math.round(ms)} ms; ` +
        `event-loop delay max ${(h.max / 1e6).toFixed(0)} ms, p99 ${(h.percentile(99) / 1e6).toFixed(0)} ms; steps: ${steps}; passages ${reply.trace?.passages.length ?? '?'}`,
    );
  } finally {
    for (const [, step] of cleanup.reverse()) await step().catch(() => undefined);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
