import { EspeakSynthesizer } from '../../providers/speech/tts';
import { ClauseStream, sentences, VoiceAgent } from '../../domain/voice/agent';
import type { SpeechRecognizer } from '../../domain/ports/speech';
import { MemoryLeg } from './memory-leg';

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
