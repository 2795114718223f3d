import { ConfigError, loadConfig } from '../../app/config';
import type { LocalEmbedder } from '../../providers/embeddings/embedder';
import { embedderFromConfig } from '../../app/compose';

/** The local embedder's settings come from the config module, parsed at boot, not from process.env at first use. */
describe('embedder settings', () => {
  test('threads, hub fetching and the hub come from the config', async () => {
    const embedder = (await embedderFromConfig(
      loadConfig({ CONCIERGE_MODELS_DIR: '/srv/models', CONCIERGE_EMBED_THREADS: '3', CONCIERGE_MODELS_ALLOW_REMOTE: 'yes', HF_ENDPOINT: 'https://hub.example' }),
    )()) as LocalEmbedder;
    expect({ threads: embedder.threads, allowRemote: embedder.allowRemote, remoteHost: embedder.remoteHost, modelsDir: embedder.modelsDir }).toEqual({
      threads: 3,
      allowRemote: true,
      remoteHost: 'https://hub.example/',
      modelsDir: '/srv/models',
    });
  });

  test('defaults: one thread, no hub fetching', async () => {
    const embedder = (await embedderFromConfig(loadConfig({}))()) as LocalEmbedder;
    expect([embedder.threads, embedder.allowRemote, embedder.remoteHost]).toEqual([1, false, 'https://huggingface.co/']);
  });

  test('a value that is not one of the accepted spellings fails at boot, naming the setting', () => {
    expect(() => loadConfig({ CONCIERGE_MODELS_ALLOW_REMOTE: 'maybe' })).toThrow(ConfigError);
    expect(() => loadConfig({ CONCIERGE_MODELS_ALLOW_REMOTE: 'maybe' })).toThrow(/CONCIERGE_MODELS_ALLOW_REMOTE/);
    expect(() => loadConfig({ CONCIERGE_EMBED_THREADS: '0' })).toThrow(/CONCIERGE_EMBED_THREADS/);
  });
});
