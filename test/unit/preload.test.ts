import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { createEmbedder } from '../../providers/embeddings/embedder';
import { OpenAiTranscriber } from '../../providers/speech/openai-transcriber';
import { speechRecognizerFor } from '../../providers/speech/stt';
import { OpenAiSpeechSynthesizer } from '../../providers/speech/tts';
import type { VoiceParts } from '../../app/voice';
import { preloadModels } from '../../worker/preload';
import { MODELS_DIR } from '../support/app';

/** What preloadModels logged (info). */
function logged() {
  const lines: Array<{ obj: unknown; msg: string }> = [];
  const log = { info: (obj: unknown, msg: string) => lines.push({ obj, msg }) } as unknown as Logger;
  return { log, lines };
}

const voice = (v: Partial<VoiceParts>) => ({ stt: null, tts: null, ...v }) as VoiceParts;

describe('preloadModels (the worker start-up, issue 32 item 6)', () => {
  test('the local embedding model is loaded and run once, and the time logged; a model that cannot load is reported, never thrown', async () => {
    const local = createEmbedder({ provider: 'local', modelsDir: MODELS_DIR });
    const { log, lines } = logged();
    const done = await preloadModels({ embedder: async () => local, voice: voice({}), log });
    expect(done).toEqual({ embeddings: expect.any(Number) });
    expect(lines).toEqual([{ obj: { preloaded: done, ms: expect.any(Number) }, msg: 'models preloaded' }]);

    const missing = createEmbedder({ provider: 'local', modelsDir: '/nonexistent/models' });
    const failed = await preloadModels({ embedder: async () => missing, voice: voice({}), log: logged().log });
    expect(failed).toEqual({ embeddings: expect.stringMatching(/^failed: .*models:fetch/) });
  });

  test('providers over HTTP (embeddings, speech-to-text, text-to-speech) are asked nothing: a request costs money and loads nothing here', async () => {
    const asked: string[] = [];
    const server = http.createServer((req, res) => {
      asked.push(`${req.method} ${req.url}`);
      res.writeHead(500).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const done = await preloadModels({
        embedder: async () => createEmbedder({ provider: 'openai', baseUrl: url, model: 'text-embedding-3-small', modelsDir: '' }),
        voice: voice({ stt: speechRecognizerFor(new OpenAiTranscriber(url, '', 'whisper-1')), tts: new OpenAiSpeechSynthesizer({ baseUrl: url, model: 'tts-1', voice: 'alloy' }) }),
        log: logged().log,
      });
      expect(done).toEqual({ embeddings: 'not local: nothing to load' });
      expect(asked).toEqual([]);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
