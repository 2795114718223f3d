/**
 * Turn-taking: when the caller has finished a turn, and when their voice over the agent's
 * is an interruption rather than a backchannel. The measured figures behind the
 * constants are in docs/voice.md ("Turn-taking").
 */
import path from 'node:path';
import { SileroModel } from '../../lib/audio/silero-vad';
import { SmartTurn } from '../../lib/audio/smart-turn';

/** Quiet after the last voiced window from which the turn is probably ending: its final transcription and the end-of-turn check start (speculatively). */
export const SPECULATE_AFTER_MS = 100;
/** Quiet that ends a turn that sounds finished (the VAD's hang-over, VOICE_SILENCE_MS). */
export const CONFIRM_AFTER_MS = 250;
/** Quiet that ends a turn that sounds unfinished (a pause mid-sentence): longer than people's usual 0.6-0.8 s pauses. */
export const UNFINISHED_HOLD_MS = 1100;
/** Longest the end of a turn waits for Smart Turn's verdict once the transcript is in hand (past it the text alone decides). */
export const SMART_TURN_WAIT_MS = 300;
/** Smart Turn's probability under which the turn sounds unfinished. */
export const SMART_TURN_THRESHOLD = 0.5;

/** Over the agent's voice: the caller's speech is transcribed once it has this much voiced audio, to tell a backchannel. */
export const OVERLAP_CHECK_MS = 120;
/** Voiced audio over the agent's voice from which it stops (within 300 ms of the onset), unless what was heard so far is a backchannel. */
export const INTERRUPT_AFTER_MS = 200;
/** A "backchannel" still going after this much voiced audio is an interruption anyway. */
export const BACKCHANNEL_MAX_MS = 1000;

/** The models of turn-taking, one per process, shared by every call; each null when its file is missing (fallbacks: energy VAD, text only). */
export interface TurnModels {
  silero: SileroModel | null;
  smartTurn: SmartTurn | null;
}

const loaded = new Map<string, Promise<TurnModels>>();

/** `<modelsDir>/silero-vad/silero_vad.onnx` and `<modelsDir>/smart-turn/smart-turn-v3.2-cpu.onnx` (npm run models:fetch), loaded once per process. */
export function turnModels(modelsDir: string): Promise<TurnModels> {
  let p = loaded.get(modelsDir);
  if (!p) {
    p = (async () => ({
      silero: await SileroModel.load(path.join(modelsDir, 'silero-vad', 'silero_vad.onnx')).catch(() => null),
      smartTurn: SmartTurn.for(path.join(modelsDir, 'smart-turn', 'smart-turn-v3.2-cpu.onnx')),
    }))();
    loaded.set(modelsDir, p);
  }
  return p;
}

/** The models directory as app/config.ts modelsDir() resolves it from the environment (CONCIERGE_MODELS_DIR, else <data dir>/models). */
export function defaultModelsDir(env: NodeJS.ProcessEnv = process.env): string {
  const dir = env.CONCIERGE_MODELS_DIR?.trim();
  return path.resolve(dir || path.join(env.CONCIERGE_DATA_DIR?.trim() || '.data', 'models'));
}

const words = (text: string) =>
  text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}'\s-]/gu, ' ')
    .replace(/-/g, ' ')
    .split(/\s+/)
    .filter(Boolean);

const BACKCHANNELS = new Set(['mhm', 'mm', 'mmm', 'hmm', 'hm', 'uh', 'huh', 'um', 'ah', 'oh', 'yeah', 'yea', 'yep', 'yes', 'yup', 'ok', 'okay', 'right', 'sure', 'alright', 'cool', 'nice', 'great', 'i', 'see', 'got', 'it', 'all', 'aha', 'ahh', 'wow', 'good', 'fine']);

/**
 * Whether a transcript is only a backchannel ("yeah", "mhm", "ok", "right", "I see",
 * "got it", repeated or together): listening noises that must not interrupt the agent or
 * start a new model turn. An empty transcript (a cough, a hum the model heard no word
 * in) counts as one. At most four words.
 */
export function isBackchannel(text: string): boolean {
  const w = words(text);
  if (w.length > 4) return false;
  // "mm-hmm", "uh-huh", "mmhmm" as the models spell them.
  return w.every((x) => BACKCHANNELS.has(x) || /^(m+h*m+|m+-?hm+|uh+|h+m+|a+h+|o+h+|m+)$/.test(x));
}

/** Words a sentence seldom ends on: conjunctions, some prepositions, articles, possessives, auxiliaries, fillers (a short answer that does, "yes I can", is only held 0.85 s longer). */
const UNFINISHED_LAST = new Set(
  'and or but because to of the a an with for from by into than which whose if my your our their be been being is are have has had do does will would can could should might must may um uh er erm very'.split(' '),
);

/** Whether a (speculative) transcript reads as cut mid-sentence: it ends on a comma, an ellipsis or a word no sentence ends on. */
export function soundsUnfinished(text: string): boolean {
  const t = text.trim();
  if (!t) return false;
  if (/(,|;|:|\.\.\.|…|-)$/.test(t)) return true;
  const w = words(t);
  return w.length > 0 && UNFINISHED_LAST.has(w[w.length - 1]);
}
