import { TokenVerifier, type ClaimGrants } from 'livekit-server-sdk';
import { ConfigError } from '../../app/config';
import { OperationalError } from '../../lib/failures';
import {
  DEFAULT_EGRESS_FILEPATH,
  DialFailed,
  LIVEKIT_REJECTED,
  LIVEKIT_UNAVAILABLE,
  LiveKitSipTelephony,
  LiveKitTransport,
  livekitFromConfig,
  type LiveKitSettings,
} from '../../providers/livekit/livekit';
import { LiveKitAgentLeg, loadRtc } from '../../providers/livekit/livekit-agent';
import { MEDIA_RATE } from '../../domain/ports/voice';
import { startFakeLiveKit, type FakeDialOutcome, type FakeLiveKit, type TwirpFailure } from '../support/fake-livekit';

/**
 * The LiveKit transport against a fake LiveKit speaking the real Twirp JSON protocol
 * (test/support/fake-livekit.ts). No LiveKit server exists here, so joining a room
 * (joinAsAgent, the media of a dial-out) is not exercised.
 */

const API_KEY = 'APIfakeKey1234';
const API_SECRET = 'fake-livekit-secret-0123456789abcdef';

let fake: FakeLiveKit;
let dial: (body: any) => FakeDialOutcome = () => ({ answer: true });
let fail: ((method: string) => TwirpFailure | undefined) | undefined;

beforeAll(async () => {
  fake = await startFakeLiveKit({
    apiKey: API_KEY,
    apiSecret: API_SECRET,
    trunks: ['ST_outbound1'],
    dial: (body) => dial(body),
    fail: (call) => fail?.(call.method),
  });
});
afterAll(async () => {
  await fake.close();
  // The native library joinAsAgent loaded: let the worker exit.
  const rtc = await import('@livekit/rtc-node');
  await rtc.dispose();
});
beforeEach(() => {
  fake.calls.length = 0;
  fake.rooms.clear();
  dial = () => ({ answer: true });
  fail = undefined;
});

const settings = (over: Partial<LiveKitSettings> = {}): LiveKitSettings => ({ url: fake.url, apiKey: API_KEY, apiSecret: API_SECRET, ...over });
const verify = (token: string) => new TokenVerifier(API_KEY, API_SECRET).verify(token) as Promise<ClaimGrants>;
/** LiveKit's rule for joining: the roomJoin grant, for that room by name. */
const grantsJoin = (claims: ClaimGrants, room: string) => claims.video?.roomJoin === true && claims.video.room === room;

describe('visitor tokens', () => {
  it('carry the visitor identity and a join grant for the voice session room only, expiring after the ttl', async () => {
    const transport = new LiveKitTransport(settings());
    const room = await transport.createRoom({ voiceSessionId: 'vs_a1', workspaceId: 'ws_1', identity: 'cus_42', ttlSeconds: 120 });

    const claims = await verify(room.rtc_token);
    expect(claims.sub).toBe('cus_42');
    expect(claims.iss).toBe(API_KEY);
    expect(claims.video).toMatchObject({ room: 'vs_a1', roomJoin: true, canPublish: true, canSubscribe: true, canPublishData: true, canPublishSources: ['microphone'] });
    // No server-side powers in a browser's token.
    expect(claims.video?.roomCreate).toBeUndefined();
    expect(claims.video?.roomAdmin).toBeUndefined();
    expect(claims.video?.roomRecord).toBeUndefined();
    expect(claims.exp! - claims.nbf!).toBeGreaterThanOrEqual(119);
    expect(claims.exp! - claims.nbf!).toBeLessThanOrEqual(121);
    expect(claims.exp! - Math.floor(Date.now() / 1000)).toBeGreaterThan(110);
  });

  it('for room A do not grant joining room B', async () => {
    const transport = new LiveKitTransport(settings());
    const a = await transport.createRoom({ voiceSessionId: 'vs_roomA', workspaceId: 'ws_1', identity: 'cus_1', ttlSeconds: 60 });
    const claims = await verify(a.rtc_token);
    expect(grantsJoin(claims, 'vs_roomA')).toBe(true);
    expect(grantsJoin(claims, 'vs_roomB')).toBe(false);
  });

  it('do not verify with another secret', async () => {
    const transport = new LiveKitTransport(settings());
    const room = await transport.createRoom({ voiceSessionId: 'vs_s', workspaceId: 'ws_1', identity: 'cus_1', ttlSeconds: 60 });
    await expect(new TokenVerifier(API_KEY, 'another-secret-0123456789abcdef').verify(room.rtc_token)).rejects.toThrow(/signature/);
  });

  it('are handed out with the ws URL of the server, even when LIVEKIT_URL is http(s)', async () => {
    const transport = new LiveKitTransport(settings({ url: fake.url.replace('ws://', 'http://') }));
    const room = await transport.createRoom({ voiceSessionId: 'vs_url', workspaceId: 'ws_1', identity: 'cus_1', ttlSeconds: 60 });
    expect(room).toMatchObject({ transport: 'livekit', room_name: 'vs_url', rtc_url: fake.url });
  });
});

describe('rooms', () => {
  it('createRoom calls CreateRoom with the session id, the empty timeout and three participants, with a roomCreate token', async () => {
    const transport = new LiveKitTransport(settings({ emptyTimeoutSeconds: 90 }));
    await transport.createRoom({ voiceSessionId: 'vs_create', workspaceId: 'ws_1', identity: 'cus_1', ttlSeconds: 60 });

    expect(fake.calls.map((c) => `${c.service}/${c.method}`)).toEqual(['RoomService/CreateRoom']);
    const [call] = fake.calls;
    expect(call.body).toEqual({ name: 'vs_create', emptyTimeout: 90, maxParticipants: 3 });
    expect(call.claims.video?.roomCreate).toBe(true);
    expect(fake.rooms.has('vs_create')).toBe(true);
  });

  it('deleteRoom removes the room, and an unknown room is not an error', async () => {
    const transport = new LiveKitTransport(settings());
    await transport.createRoom({ voiceSessionId: 'vs_del', workspaceId: 'ws_1', identity: 'cus_1', ttlSeconds: 60 });
    await transport.deleteRoom('vs_del');
    expect(fake.rooms.has('vs_del')).toBe(false);
    expect(fake.calls.at(-1)).toMatchObject({ method: 'DeleteRoom', body: { room: 'vs_del' } });

    await expect(transport.deleteRoom('vs_never_created')).resolves.toBeUndefined();
    expect(fake.calls.at(-1)).toMatchObject({ method: 'DeleteRoom', body: { room: 'vs_never_created' } });
  });

  it('a LiveKit outage is a retryable failure; bad credentials are not', async () => {
    fail = (method) => (method === 'DeleteRoom' ? { code: 'unavailable', msg: 'service unavailable' } : undefined);
    const down = new LiveKitTransport(settings());
    const outage = await down.deleteRoom('vs_x').catch((e: unknown) => e);
    expect(outage).toBeInstanceOf(OperationalError);
    expect(outage).toMatchObject({ code: LIVEKIT_UNAVAILABLE, retryable: true });

    const wrong = new LiveKitTransport(settings({ apiSecret: 'not-the-server-secret-0123456789' }));
    const refused = await wrong.createRoom({ voiceSessionId: 'vs_y', workspaceId: 'ws_1', identity: 'cus_1', ttlSeconds: 60 }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: LIVEKIT_REJECTED, retryable: false });
    expect((refused as Error).message).toMatch(/unauthenticated/);
    expect(fake.rooms.has('vs_y')).toBe(false);
  });
});

describe('recording', () => {
  it('starts an audio-only room-composite egress to an Ogg file uploaded to S3, and stops it', async () => {
    const transport = new LiveKitTransport(
      settings({ egress: { filepath: 'calls/{room_name}-{time}.ogg', s3: { bucket: 'recordings', region: 'eu-west-1', accessKey: 'AKIAFAKE', secret: 's3-secret' } } }),
    );
    const egressId = await transport.startRecording('vs_rec');
    expect(egressId).toMatch(/^EG_/);

    const start = fake.calls.find((c) => c.method === 'StartRoomCompositeEgress')!;
    expect(start.service).toBe('Egress');
    expect(start.claims.video?.roomRecord).toBe(true);
    expect(start.body).toMatchObject({
      roomName: 'vs_rec',
      audioOnly: true,
      fileOutputs: [{ fileType: 'OGG', filepath: 'calls/{room_name}-{time}.ogg', s3: { bucket: 'recordings', region: 'eu-west-1', accessKey: 'AKIAFAKE', secret: 's3-secret' } }],
    });
    expect(start.body.videoOnly).toBeFalsy();

    await transport.stopRecording(egressId);
    expect(fake.calls.at(-1)).toMatchObject({ service: 'Egress', method: 'StopEgress', body: { egressId } });
    expect(fake.egresses.get(egressId)?.status).toBe('EGRESS_ENDING');
    // An egress LiveKit no longer knows is already stopped.
    await expect(transport.stopRecording('EG_unknown')).resolves.toBeUndefined();
  });

  it('without S3 writes to the path on the egress worker', async () => {
    const parts = livekitFromConfig({ LIVEKIT_URL: fake.url, LIVEKIT_API_KEY: API_KEY, LIVEKIT_API_SECRET: API_SECRET })!;
    await parts.transport.startRecording('vs_local');
    const start = fake.calls.find((c) => c.method === 'StartRoomCompositeEgress')!;
    expect(start.body.fileOutputs).toEqual([{ fileType: 'OGG', filepath: DEFAULT_EGRESS_FILEPATH }]);
  });
});

describe('SIP dial-out', () => {
  const telephony = () => new LiveKitSipTelephony(new LiveKitTransport(settings()), { trunkId: 'ST_outbound1', ringingTimeoutSeconds: 25 });
  const input = { callId: 'call_1', workspaceId: 'ws_1', to: '+15551230000', room_name: 'call_1' };

  async function dialOutcome(outcome: FakeDialOutcome) {
    dial = () => outcome;
    const progress: string[] = [];
    const err = await telephony()
      .dial(input, (s) => progress.push(s), new AbortController().signal)
      .catch((e: unknown) => e);
    return { err, progress };
  }

  it('creates the call room and places CreateSIPParticipant on the trunk, waiting for the answer, with a sip.call token', async () => {
    const { err, progress } = await dialOutcome({ sipStatusCode: 486, sipStatus: 'Busy Here' });
    expect(err).toBeInstanceOf(DialFailed);
    expect(progress).toEqual(['ringing']);

    const [create, sip] = fake.calls;
    expect(create).toMatchObject({ method: 'CreateRoom', body: { name: 'call_1', maxParticipants: 3 } });
    expect(sip.service).toBe('SIP');
    expect(sip.method).toBe('CreateSIPParticipant');
    expect(sip.claims.sip?.call).toBe(true);
    expect(sip.body).toMatchObject({
      sipTrunkId: 'ST_outbound1',
      sipCallTo: '+15551230000',
      roomName: 'call_1',
      participantIdentity: 'phone',
      participantAttributes: { call_id: 'call_1', workspace_id: 'ws_1' },
      waitUntilAnswered: true,
      ringingTimeout: '25s',
    });
  });

  it('a busy callee (486) ends the call busy and removes its room', async () => {
    const { err } = await dialOutcome({ sipStatusCode: 486, sipStatus: 'Busy Here' });
    expect(err).toMatchObject({ status: 'busy', sipStatusCode: 486, code: 'DialFailed', retryable: false });
    expect(fake.calls.at(-1)).toMatchObject({ method: 'DeleteRoom', body: { room: 'call_1' } });
    expect(fake.rooms.has('call_1')).toBe(false);
  });

  it.each([
    [480, 'Temporarily Unavailable'],
    [408, 'Request Timeout'],
    [487, 'Request Terminated'],
  ])('an unanswered call (%i) ends no_answer', async (code, reason) => {
    const { err } = await dialOutcome({ sipStatusCode: code, sipStatus: reason });
    expect(err).toMatchObject({ status: 'no_answer', sipStatusCode: code });
  });

  it.each([
    [404, 'Not Found'],
    [503, 'Service Unavailable'],
  ])('any other SIP failure (%i) ends failed', async (code, reason) => {
    const { err } = await dialOutcome({ sipStatusCode: code, sipStatus: reason });
    expect(err).toMatchObject({ status: 'failed', sipStatusCode: code });
    expect((err as Error).message).toContain(`SIP call failed: ${code} ${reason}`);
  });

  it('an answered call reports in_progress, then the agent joins the call room with its own token (which this fake cannot complete)', async () => {
    fake.joins.length = 0;
    const progress: string[] = [];
    const err = await telephony()
      .dial(input, (s) => progress.push(s), new AbortController().signal)
      .catch((e: unknown) => e);
    expect(progress).toEqual(['ringing', 'in_progress']);
    expect(fake.joins.length).toBeGreaterThan(0);
    const claims = fake.joins[0].claims!;
    expect(claims.sub).toBe('agent');
    expect(claims.video).toMatchObject({ room: 'call_1', roomJoin: true, canPublish: true, canSubscribe: true, canPublishData: true, hidden: false });
    expect(claims.video?.roomCreate).toBeUndefined();
    // The join fails at signalling; the call is torn down rather than left ringing in an empty room.
    expect(err).toBeInstanceOf(DialFailed);
    expect(err).toMatchObject({ status: 'failed', sipStatusCode: undefined });
    expect((err as Error).message).toMatch(/answered but the agent could not join: the agent could not join LiveKit room call_1/);
    expect(fake.calls.at(-1)).toMatchObject({ method: 'DeleteRoom', body: { room: 'call_1' } });
  });

  it('an unknown trunk fails the call without a SIP status', async () => {
    const t = new LiveKitSipTelephony(new LiveKitTransport(settings()), { trunkId: 'ST_missing' });
    const err = await t.dial(input, () => undefined, new AbortController().signal).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 'failed', sipStatusCode: undefined });
    expect((err as Error).message).toMatch(/not_found/);
  });

  it('an abort while the phone rings stops waiting and removes the call room', async () => {
    dial = () => ({ answer: true, delayMs: 2000 });
    const ac = new AbortController();
    const progress: string[] = [];
    let abortedAt = 0;
    // Aborted 100 ms into the ringing (a fixed 100 ms from the start could come before the room exists on a busy
    // machine: CI once aborted before 'ringing', which the dial rightly never reported then).
    const ringing = (s: string) => {
      progress.push(s);
      if (s === 'ringing')
        setTimeout(() => {
          abortedAt = Date.now();
          ac.abort(new Error('call cancelled'));
        }, 100);
    };
    const done = telephony().dial(input, ringing, ac.signal);
    await expect(done).rejects.toThrow('call cancelled');
    // Not waiting for the answer, which the fake gives 2 s after the call was placed.
    expect(Date.now() - abortedAt).toBeLessThan(1500);
    expect(progress).toEqual(['ringing']);
    expect(fake.calls.at(-1)).toMatchObject({ method: 'DeleteRoom', body: { room: 'call_1' } });
  });

  it('an aborted dial places no call', async () => {
    const ac = new AbortController();
    ac.abort();
    const progress: string[] = [];
    await expect(telephony().dial(input, (s) => progress.push(s), ac.signal)).rejects.toThrow();
    expect(progress).toEqual([]);
    expect(fake.calls).toEqual([]);
  });
});

describe('the agent in a room', () => {
  it('joins with an agent token for that room only, and a server it cannot join is a retryable failure', async () => {
    fake.joins.length = 0;
    const transport = new LiveKitTransport(settings());
    const err = await transport.joinAsAgent('vs_join', new AbortController().signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OperationalError);
    expect(err).toMatchObject({ code: LIVEKIT_UNAVAILABLE, retryable: true, message: 'the agent could not join LiveKit room vs_join' });
    const claims = fake.joins[0].claims!;
    expect(claims.sub).toBe('agent');
    expect(grantsJoin(claims, 'vs_join')).toBe(true);
    expect(claims.exp! - claims.nbf!).toBeLessThanOrEqual(300);
  });

  it('an aborted join does not connect', async () => {
    fake.joins.length = 0;
    const ac = new AbortController();
    ac.abort(new Error('call ended'));
    await expect(new LiveKitTransport(settings()).joinAsAgent('vs_abort', ac.signal)).rejects.toThrow('call ended');
    expect(fake.joins).toEqual([]);
  });

  // The leg's playback runs on the native AudioSource, which paces without a server.
  const seconds = (s: number) => new Int16Array(Math.round(s * MEDIA_RATE)).fill(1000);
  async function leg() {
    const rtc = await loadRtc();
    return new LiveKitAgentLeg(rtc, new rtc.Room(), undefined);
  }
  async function untilQuiet(l: LiveKitAgentLeg, limitMs: number): Promise<number> {
    const t0 = Date.now();
    while (l.playing && Date.now() - t0 < limitMs) await new Promise((r) => setTimeout(r, 10));
    return Date.now() - t0;
  }

  it('plays agent audio paced in real time', async () => {
    const l = await leg();
    try {
      l.play(seconds(1));
      expect(l.playing).toBe(true);
      const elapsed = await untilQuiet(l, 3000);
      // One second of audio takes about a second (the source holds 100 ms ahead).
      expect(elapsed).toBeGreaterThanOrEqual(800);
      expect(elapsed).toBeLessThan(2000);
      expect(l.playing).toBe(false);
    } finally {
      await l.close();
    }
  });

  it('clearPlayback drops queued audio at once (barge-in)', async () => {
    const l = await leg();
    try {
      l.play(seconds(5));
      await new Promise((r) => setTimeout(r, 300));
      expect(l.playing).toBe(true);
      l.clearPlayback();
      // Nothing left: neither our frames nor the source's 100 ms queue.
      expect(l.playing).toBe(false);
      await new Promise((r) => setTimeout(r, 100));
      expect(l.playing).toBe(false);
    } finally {
      await l.close();
    }
  });

  it('drops transcript frames while not connected, and close() ends the leg', async () => {
    const l = await leg();
    expect(() => l.sendTranscript({ type: 'transcript', speaker: 'assistant', text: 'hello', timestamp: Date.now(), partial: false })).not.toThrow();
    await l.close();
    await expect(l.ended).resolves.toBe('closed');
  });
});

describe('configuration', () => {
  it('is off without LIVEKIT_URL', () => {
    expect(livekitFromConfig({})).toBeNull();
    expect(livekitFromConfig({ LIVEKIT_API_KEY: API_KEY, LIVEKIT_API_SECRET: API_SECRET })).toBeNull();
  });

  it('names the missing key or secret', () => {
    expect(() => livekitFromConfig({ LIVEKIT_URL: 'wss://lk.example.com', LIVEKIT_API_SECRET: API_SECRET })).toThrow(new ConfigError('LIVEKIT_API_KEY is required with LIVEKIT_URL'));
    expect(() => livekitFromConfig({ LIVEKIT_URL: 'wss://lk.example.com', LIVEKIT_API_KEY: API_KEY })).toThrow(new ConfigError('LIVEKIT_API_SECRET is required with LIVEKIT_URL'));
    expect(() => livekitFromConfig({ LIVEKIT_URL: 'lk.example.com', LIVEKIT_API_KEY: API_KEY, LIVEKIT_API_SECRET: API_SECRET })).toThrow(/LIVEKIT_URL must be a ws:\/\//);
    expect(() =>
      livekitFromConfig({ LIVEKIT_URL: 'wss://lk.example.com', LIVEKIT_API_KEY: API_KEY, LIVEKIT_API_SECRET: API_SECRET, LIVEKIT_EGRESS_S3_BUCKET: 'b', LIVEKIT_EGRESS_S3_ACCESS_KEY_ID: 'AKIA' }),
    ).toThrow(/go together/);
  });

  it('offers dial-out only with LIVEKIT_SIP_TRUNK_ID', () => {
    const base = { LIVEKIT_URL: 'wss://lk.example.com', LIVEKIT_API_KEY: API_KEY, LIVEKIT_API_SECRET: API_SECRET };
    expect(livekitFromConfig(base)?.telephony).toBeNull();
    expect(livekitFromConfig({ ...base, LIVEKIT_SIP_TRUNK_ID: 'ST_1' })?.telephony?.kind).toBe('livekit-sip');
    expect(livekitFromConfig(base)?.transport.kind).toBe('livekit');
  });
});
