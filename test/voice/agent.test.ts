import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { dbfs, wavToMono } from '../../lib/audio/audio';
import { MEDIA_RATE } from '../../domain/ports/voice';
import { SmartTurn } from '../../lib/audio/smart-turn';
import { SileroModel } from '../../lib/audio/silero-vad';
import { EspeakSynthesizer } from '../../providers/speech/tts';
import { MoonshineTranscriber } from '../../providers/speech/moonshine';
import { EmbeddedSpeechRecognizer } from '../../providers/speech/stt';
import { ClauseStream, sentences, VoiceAgent, type TurnStats, type VoiceAgentOptions } from '../../domain/voice/agent';
import { isBackchannel, turnModels, UNFINISHED_HOLD_MS, type TurnModels } from '../../domain/voice/turn-taking';
import type { SpeechRecognizer } from '../../domain/ports/speech';
import { MemoryLeg } from './memory-leg';
import { concat, recording, silence, wordGap } from './recordings';

const tts = new EspeakSynthesizer();
/** Text turns only (inject): nothing is transcribed. */
const noStt: SpeechRecognizer = { transcribe: () => Promise.reject(new Error('no speech in this test')) };
const until = (t: number) => new Promise((r) => setTimeout(r, Math.max(0, t - Date.now())));

describe('the reply streamed into speech', () => {
  test('clauses: sentence ends, and commas once the clause is 25 characters long; markdown cleaned per clause; a code block or link never split', () => {
    expect(sentences('Sure, we can. We are open from nine to five on weekdays, and from noon on Sundays! Anything else?')).toEqual([
      'Sure, we can.',
      'We are open from nine to five on weekdays,',
      'and from noon on Sundays!',
      'Anything else?',
    ]);
    expect(sentences('See [our **opening hours**, today](https://example.com/a.b, c) for details. e.g. Sundays.')).toEqual(['See our opening hours , today for details.', 'e.g. Sundays.']);
    expect(sentences('Run this:\n```\na. b, c; d\n```\nThen restart.')).toEqual(['Run this:', 'Then restart.']);
    const stream = new ClauseStream();
    for (const chunk of ['We are open from ni', 'ne to five on weekdays', ', and', ' from noon. Th', 'anks']) stream.write(chunk);
    expect([stream.take(), stream.take(), stream.take()]).toEqual(['We are open from nine to five on weekdays,', 'and from noon.', null]);
    stream.end();
    expect([stream.take(), stream.take()]).toEqual(['Thanks', null]);
  });

  test('deltas arriving over time: the first clause is heard before the model is done, the rest follows clause by clause', async () => {
    const leg = new MemoryLeg();
    let resolvedAt = 0;
    let firstDeltaAt = 0;
    const agent = new VoiceAgent({
      leg,
      stt: noStt,
      tts,
      turn: async (text, source, onDelta) => {
        expect([text, source]).toEqual(['When are you open?', 'text']);
        const t0 = Date.now();
        firstDeltaAt = t0 + 300;
        await until(t0 + 300);
        onDelta!('We are open from nine ');
        onDelta!('to five on weekdays, ');
        await until(t0 + 2500);
        onDelta!('and from noon on Sundays.');
        await until(t0 + 3000);
        resolvedAt = Date.now();
        return 'We are open from nine to five on weekdays, and from noon on Sundays.';
      },
    });
    const running = agent.run();
    agent.inject('When are you open?');
    const final = await leg.transcript((f) => f.speaker === 'assistant' && !f.partial);
    expect(final.text).toBe('We are open from nine to five on weekdays, and from noon on Sundays.');
    expect(leg.sent.length).toBeGreaterThan(0);
    // Heard well before the model resolved (espeak takes tens of ms for a clause).
    expect(leg.sent[0].at).toBeLessThan(resolvedAt - 1500);
    expect(leg.sent[0].at).toBeGreaterThanOrEqual(firstDeltaAt);
    const partials = leg.transcripts.filter((f) => f.speaker === 'assistant' && f.partial).map((f) => f.text);
    expect(partials).toEqual(['We are open from nine to five on weekdays,', 'We are open from nine to five on weekdays, and from noon on Sundays.']);
    leg.hangUp();
    expect(await running).toBe('remote_hung_up');
  });

  test('no deltas: the resolved reply is spoken, clause by clause', async () => {
    const leg = new MemoryLeg();
    const agent = new VoiceAgent({ leg, stt: noStt, tts, turn: async () => 'Certainly. Your order ships tomorrow morning, by courier.' });
    const running = agent.run();
    agent.inject('Where is my order?');
    await leg.transcript((f) => f.speaker === 'assistant' && !f.partial);
    expect(leg.transcripts.filter((f) => f.speaker === 'assistant').map((f) => [f.text, f.partial])).toEqual([
      ['Certainly.', true],
      ['Certainly. Your order ships tomorrow morning,', true],
      ['Certainly. Your order ships tomorrow morning, by courier.', true],
      ['Certainly. Your order ships tomorrow morning, by courier.', false],
    ]);
    expect(leg.sent.length).toBeGreaterThan(0);
    leg.hangUp();
    await running;
  });
});

describe('turn-taking on recorded speech (Silero VAD, Smart Turn, Moonshine)', () => {
  const MODELS_DIR = path.resolve(process.env.CONCIERGE_MODELS_DIR ?? path.join(__dirname, '../../.data/models'));
  let models: TurnModels;
  let moonshine: MoonshineTranscriber;
  /** The real recognizer, with the finals it was asked for (partials and over-the-agent checks apart). */
  let stt: SpeechRecognizer & { finals: number; finalSamples: number[] };

  beforeAll(async () => {
    models = await turnModels(MODELS_DIR);
    if (!models.silero || !models.smartTurn) throw new Error(`Silero VAD or Smart Turn missing under ${MODELS_DIR}: run npm run models:fetch`);
    moonshine = new MoonshineTranscriber({ modelDir: path.join(MODELS_DIR, 'moonshine', 'base-en'), maxSeconds: 20 });
    const real = new EmbeddedSpeechRecognizer(moonshine, 'en');
    stt = {
      finals: 0,
      finalSamples: [],
      transcribe(samples, signal, options) {
        if (!options?.partial) stt.finals++;
        if (!options?.partial) stt.finalSamples.push(samples.length);
        return real.transcribe(samples, signal, options);
      },
    };
    // Loaded before the first test: the first transcription loads Moonshine (seconds).
    await real.transcribe(recording('cards/003'));
  }, 120_000);

  // Moonshine on a busy 2-core machine takes seconds a turn: the turns' transcripts are awaited, not timed.
  jest.setTimeout(180_000);

  afterAll(async () => {
    await MoonshineTranscriber.unloadAll();
    await SmartTurn.unloadAll();
    await SileroModel.unloadAll();
    await EspeakSynthesizer.unloadAll();
  });

  const agentOn = (leg: MemoryLeg, turn: VoiceAgentOptions['turn'], onTurn?: (s: TurnStats) => void) => new VoiceAgent({ leg, stt, tts, models, turn, onTurn });

  test('a 700 ms pause mid-sentence ("He might even have … been made amiable himself") is not the end of the turn; the transcript started speculatively in the pause is kept as the first phrase of the turn and the final transcribes only what follows', async () => {
    const pcm = recording('librivox/sense_and_sensibility_01_austen_64kb-0930');
    const gap = wordGap(pcm, 950, 1250);
    const leg = new MemoryLeg();
    const turns: string[] = [];
    const agent = agentOn(leg, async (text) => (turns.push(text), ''));
    expect(agent.vadKind).toBe('silero');
    const running = agent.run();
    const finalsBefore = stt.finals;
    stt.finalSamples = [];
    await leg.speak(concat(silence(300), pcm.subarray(0, gap), silence(700), pcm.subarray(gap), silence(300)));
    const heard = await leg.transcript((f) => f.speaker === 'user' && !f.partial, 120_000);
    // Once quiet long enough for the turn to end whatever it sounds like.
    await new Promise((r) => setTimeout(r, 1200));
    expect(leg.transcripts.filter((f) => f.speaker === 'user' && !f.partial)).toHaveLength(1);
    expect(heard.text).toMatch(/might even have.*amiable himself/i);
    expect(turns).toEqual([heard.text]);
    // One final for the pause (kept as a phrase when the speech went on: over PHRASE_MIN_MS), then finals of what
    // follows it only: none of them as long as the audio spoken.
    expect(stt.finals - finalsBefore).toBeGreaterThanOrEqual(2);
    const spoken = ((300 + 700 + 300) * MEDIA_RATE) / 1000 + pcm.length;
    expect(Math.max(...stt.finalSamples.slice(1))).toBeLessThan(spoken - gap);
    leg.hangUp();
    await running;
  });

  test('a finished sentence ends its turn at the short hang-over: speechEndedAt - lastVoiceAt is the VAD window, not the hold for a pause', async () => {
    const leg = new MemoryLeg();
    const stats: TurnStats[] = [];
    const agent = agentOn(leg, async () => 'Noted.', (s) => stats.push(s));
    const running = agent.run();
    await leg.speak(concat(silence(300), recording('cards/005'), silence(1500)));
    await leg.transcript((f) => f.speaker === 'assistant' && !f.partial, 120_000);
    expect(stats).toHaveLength(1);
    expect(stats[0].text).toMatch(/eight of spades.*seven of hearts/i);
    expect(stats[0].speechEndedAt - stats[0].lastVoiceAt).toBeLessThan(UNFINISHED_HOLD_MS - 300);
    expect(stats[0].firstAudioAt).toBeGreaterThan(stats[0].speechEndedAt);
    leg.hangUp();
    await running;
  });

  /** The agent speaking a long reply to an injected question; resolves once its audio is playing. */
  async function talkingAgent(leg: MemoryLeg, turns: string[]) {
    const reply = 'Our opening hours are from nine in the morning to six in the evening on weekdays, and from ten to four on Saturdays. On Sundays and public holidays we are closed, but you can still order online at any time.';
    const agent = agentOn(leg, async (text) => (turns.push(text), turns.length === 1 ? reply : ''));
    const running = agent.run();
    agent.inject('When are you open?');
    while (!leg.sent.length) await new Promise((r) => setTimeout(r, 20));
    return { running, reply };
  }

  test('"yeah" over the agent (espeak-ng: no recording of a backchannel is packaged; Moonshine hears its "mhm" as a word) does not stop it: its whole reply is played, the backchannel is in the transcript, no model turn', async () => {
    const leg = new MemoryLeg();
    const turns: string[] = [];
    const { running, reply } = await talkingAgent(leg, turns);
    const yeah = wavToMono(execFileSync('espeak-ng', ['--stdout', '-v', 'en-us', '-s', '160'], { input: 'Yeah.' }), MEDIA_RATE);
    await new Promise((r) => setTimeout(r, 1000));
    await leg.speak(concat(yeah, silence(1500)));
    const backchannel = await leg.transcript((f) => f.speaker === 'user' && !f.partial && f.text !== 'When are you open?', 120_000);
    expect([backchannel.text, isBackchannel(backchannel.text)]).toEqual([expect.stringMatching(/yeah/i), true]);
    const final = await leg.transcript((f) => f.speaker === 'assistant' && !f.partial, 120_000);
    expect(final.text).toBe(reply);
    while (leg.playing) await new Promise((r) => setTimeout(r, 50));
    expect(leg.cleared.length).toBeLessThanOrEqual(1); // at most a pause, then resumed
    const said = sentences(reply);
    // Every clause of the reply reached the caller (none dropped by the backchannel).
    expect(leg.transcripts.filter((f) => f.speaker === 'assistant' && f.partial).at(-1)!.text).toBe(said.join(' '));
    const sentMs = leg.sent.length * 20;
    const synthesizedMs = (await Promise.all(said.map((c) => tts.synthesize(c)))).reduce((n, p) => n + Math.ceil(p.length / 160) * 20, 0);
    expect(sentMs).toBeGreaterThanOrEqual(synthesizedMs);
    expect(turns).toEqual(['When are you open?']);
    leg.hangUp();
    await running;
  });

  test('a real interruption (a recorded sentence) stops the agent within 300 ms of its onset and becomes the next turn', async () => {
    const leg = new MemoryLeg();
    const turns: string[] = [];
    const { running } = await talkingAgent(leg, turns);
    await new Promise((r) => setTimeout(r, 1000));
    const speech = recording('librivox/sense_and_sensibility_01_austen_64kb-0880');
    const lead = 200;
    const onsetMs = lead + speechOnsetMs(speech);
    let onsetAt = 0;
    await leg.speak(concat(silence(lead), speech, silence(1500)), (ms, at) => {
      if (ms === Math.floor(onsetMs / 20) * 20) onsetAt = at;
    });
    await leg.transcript((f) => f.speaker === 'user' && !f.partial && f.text !== 'When are you open?', 120_000);
    expect(onsetAt).toBeGreaterThan(0);
    // The last agent audio the caller hears: the last frame sent, at its play time (frames go a little ahead).
    const lastHeard = leg.sent.at(-1)!.due;
    expect(leg.cleared.length).toBeGreaterThanOrEqual(1);
    expect(lastHeard - onsetAt).toBeLessThanOrEqual(300);
    while (turns.length < 2) await new Promise((r) => setTimeout(r, 50));
    expect(turns[1]).toMatch(/he was not an/i);
    leg.hangUp();
    await running;
  });
});

/** Where speech starts in a recording: the first of three 20 ms frames in a row within 20 dB of its loudest (the room's noise is 30 dB under), in ms. */
function speechOnsetMs(pcm: Int16Array): number {
  const levels: number[] = [];
  for (let i = 0; i + 160 <= pcm.length; i += 160) levels.push(dbfs(pcm.subarray(i, i + 160)));
  const loud = Math.max(...levels);
  return levels.findIndex((_, i) => levels.slice(i, i + 3).every((l) => l > loud - 20)) * 20;
}
