import type { Composition } from '../app/compose';
import { LocalEmbedder, queryVector } from '../providers/embeddings/embedder';
import { EmbeddedSpeechRecognizer } from '../providers/speech/stt';
import { MEDIA_RATE } from '../domain/ports/voice';

/** What was loaded and how long each took (ms), for the start-up log. */
export type Preloaded = Record<string, number | string>;

/**
 * Loads the models a voice turn needs at worker start, so the first call is as fast as the
 * rest (issue 32, item 6): before, the first reply loaded the local embedding model on the
 * main thread (onnxruntime's session creation and first run are synchronous: ~0.5 + 0.25 s
 * of a frozen event loop, during a call whose audio that loop paces).
 *
 * - The local embedding model (transformers.js): loaded and run once. An OpenAI-compatible
 *   one is not asked anything (a request costs money and tells nothing).
 * - The embedded speech-to-text (whisper.cpp, Moonshine), when the process can run calls (a
 *   synthesizer too): each model's thread loaded by transcribing half a second of tone, final
 *   and partial (they may be two models). An HTTP transcriber is left alone.
 * - Text-to-speech: Piper loads from when it is made (at composition); it is awaited here so
 *   the log says when it is ready. espeak-ng and HTTP synthesis have nothing to load.
 *
 * Meant to run in the background (not awaited before the worker polls): the speech models
 * load on their own threads; the embedding model's load holds this thread once, while the
 * worker is still starting, not during a call. Never fails: a model that cannot load is
 * logged and left to load (or fail) on first use as before.
 */
export async function preloadModels(c: Pick<Composition, 'embedder' | 'voice' | 'log'>): Promise<Preloaded> {
  const done: Preloaded = {};
  /** Times `run`; what it answers (a reason nothing was loaded) is logged instead of the time. */
  const timed = async (name: string, run: () => Promise<string | void>) => {
    const t0 = performance.now();
    try {
      done[name] = (await run()) ?? Math.round(performance.now() - t0);
    } catch (err) {
      done[name] = `failed: ${err instanceof Error ? err.message : String(err)}`;
    }
  };
  const started = performance.now();
  const jobs: Array<Promise<void>> = [];
  const { stt, tts } = c.voice;
  // Speech only where calls can run (both ways): Moonshine holds ~770 MB once loaded.
  if (stt instanceof EmbeddedSpeechRecognizer && tts) {
    // Half a second of a 440 Hz tone at -20 dBFS: loud enough not to be skipped as silence.
    const tone = Int16Array.from({ length: MEDIA_RATE / 2 }, (_, i) => Math.round(3277 * Math.sin((2 * Math.PI * 440 * i) / MEDIA_RATE)));
    const paths = stt.modelPaths;
    jobs.push(
      timed('stt', async () => {
        await stt.transcribe(tone);
        if (paths.partial !== paths.final) await stt.transcribe(tone, undefined, { partial: true });
      }),
    );
  }
  const voice = tts as { ready?: () => Promise<void> } | null;
  if (voice && typeof voice.ready === 'function') jobs.push(timed('tts', () => voice.ready!()));
  // The embedding model last: the speech threads load meanwhile; this one holds the main thread.
  jobs.push(
    timed('embeddings', async () => {
      const embedder = await c.embedder();
      if (!(embedder instanceof LocalEmbedder)) return 'not local: nothing to load';
      await embedder.load();
      await queryVector(embedder, 'warm up');
    }),
  );
  await Promise.all(jobs);
  c.log.info({ preloaded: done, ms: Math.round(performance.now() - started) }, 'models preloaded');
  return done;
}
