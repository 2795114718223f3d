import fs from 'node:fs';
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { whisperModelPath } from '../../app/config';
import { LocalWhisperTranscriber } from '../../providers/speech/whisper';
import { MoonshineTranscriber } from '../../providers/speech/moonshine';
import { voiceRecognizerFromConfig } from '../../app/voice';
import { transcriberFromConfig } from '../../app/extractor';
import { LiveKitSipTelephony, LiveKitTransport } from '../../providers/livekit/livekit';
import { userHash } from '../../domain/widget/sites';
import { DialOutPolicyRepository } from '../../domain/voice/destinations';
import { VoiceWorkflows } from '../../app/temporal-clients/voice';
import { callWorkflowId, type CallResult } from '../../workflows/call';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, MODELS_DIR, publishedWebAgent, startTestApp, testConfig, type TestApp } from '../support/app';
import { startFakeLiveKit, type FakeLiveKit } from '../support/fake-livekit';
import { lastUserText, startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { maybeRecordHistory, startTestWorker, type TestWorker } from '../support/temporal';
import { concat, spokenPcm, TestPhone, type Handset } from '../support/test-phone';

/** Workspaces' dial-out policies, read and set as the admin CLI does. */
const dialOutPolicies = new DialOutPolicyRepository();

/**
 * Dial-out and the calls API, end to end: the real app, the real Temporal worker
 * running `call:call_…`, the real voice agent (the default embedded speech-to-text, Moonshine,
 * espeak-ng for speech, the fake OpenAI-compatible model for the turn) on a phone
 * line made of a real WebRTC/RTP pair on loopback (test/support/test-phone.ts: the
 * callee's handset speaks espeak-ng audio as PCMU). Busy and no-answer come from the
 * LiveKit SIP client against the fake LiveKit speaking LiveKit's Twirp protocol.
 */

const ORIGIN = 'https://shop.example';
const LK_KEY = 'APIfakeKey1234';
const LK_SECRET = 'fake-livekit-secret-0123456789abcdef';
const QUESTION = 'What time do you open on Saturday?';
const ANSWER = 'We open in the morning on Saturdays.';
/** Numbers the fake LiveKit's SIP trunk answers with a final response. */
const BUSY = '+14155550486';
const NO_ANSWER = '+14155550480';

const config = { ...testConfig(), CONCIERGE_MODELS_DIR: MODELS_DIR, TRANSCRIBE_LANGUAGE: 'en' as const, TRANSCRIBE_MAX_SECONDS: 60 };

type Site = { site_id: string; site_secret: string };

let db: TestDatabase;
let t: TestApp;
/** The same installation without any telephony: dial-out's prerequisite is missing. */
let bare: TestApp;
let tw: TestWorker;
let llm: FakeLlm;
let livekit: FakeLiveKit;
let phone: TestPhone;
const transcriber = transcriberFromConfig(config);
/** The worker's speech-to-text with the shipped settings (Moonshine for English callers). */
const stt = voiceRecognizerFromConfig(config, transcriber);
/** What each number's handset does once it answers (default: asks the question, hangs up after the answer). */
const scripts = new Map<string, (h: Handset) => Promise<void>>();

let wsA: string;
let authA: Record<string, string>;
let agentOn: string;
let agentOff: string;
let siteOn: Site;
let siteOff: Site;
let wsB: string;
let authB: Record<string, string>;
let agentB: string;
let wsPoor: { auth: Record<string, string>; agent: string; site: Site };
let wsFull: { auth: Record<string, string>; agent: string; site: Site };

async function askAndHangUp(h: Handset): Promise<void> {
  await new Promise((r) => setTimeout(r, 400));
  await h.say(spokenPcm(QUESTION));
  await h.agentAnswer({ quietMs: 1500, timeoutMs: 90_000 });
  h.hangUp();
}

beforeAll(async () => {
  if (!fs.existsSync(whisperModelPath(config))) throw new Error(`${whisperModelPath(config)} is missing: run npm run models:fetch`);
  db = await createTestDatabase();
  llm = await startFakeLlm({
    reply: (body) => (/open/i.test(lastUserText(body)) ? { text: ANSWER } : { text: `Echo: ${lastUserText(body)}` }),
  });
  livekit = await startFakeLiveKit({
    apiKey: LK_KEY,
    apiSecret: LK_SECRET,
    trunks: ['ST_outbound1'],
    dial: (body) =>
      body.sipCallTo === BUSY
        ? { sipStatusCode: 486, sipStatus: 'Busy Here' }
        : body.sipCallTo === NO_ANSWER
          ? { sipStatusCode: 480, sipStatus: 'Temporarily Unavailable', delayMs: 200 }
          : { sipStatusCode: 503, sipStatus: 'Service Unavailable' },
  });
  const sip = new LiveKitSipTelephony(new LiveKitTransport({ url: livekit.url, apiKey: LK_KEY, apiSecret: LK_SECRET }), { trunkId: 'ST_outbound1' });
  phone = new TestPhone({
    forward: (to) => (to.startsWith('+1415555') ? sip : null),
    script: (h) => (scripts.get(h.to) ?? askAndHangUp)(h),
  });
  const voice = { telephony: phone, stt };
  tw = await startTestWorker(db, { llm: { baseUrl: llm.url, model: 'fake-model' }, transcriber, voice });
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal: { client: tw.client, taskQueue: tw.taskQueue }, serviceOptions: { transcriber, voice } });
  bare = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal: { client: tw.client, taskQueue: tw.taskQueue }, serviceOptions: { transcriber, voice: { ...voice, telephony: null } } });

  const agentScopes = ['workflows:write', 'workflows:publish', 'conversations:read', 'conversations:write'] as const;
  const dialOut = { triggers: { web_chat: { allowed_origins: [ORIGIN], dial_out: true } } };
  wsA = await createWorkspace(db.orm);
  authA = bearer((await createKey(t.services, wsA, [...agentScopes])).key);
  agentOn = await publishedWebAgent(t.app, authA, ORIGIN, dialOut);
  agentOff = await publishedWebAgent(t.app, authA, ORIGIN);
  siteOn = await t.services.sites.create(wsA, agentOn, [ORIGIN]);
  siteOff = await t.services.sites.create(wsA, agentOff, [ORIGIN]);
  await t.services.credits.grant(wsA, 100);

  wsB = await createWorkspace(db.orm);
  authB = bearer((await createKey(t.services, wsB, [...agentScopes])).key);
  agentB = await publishedWebAgent(t.app, authB, ORIGIN, dialOut);
  await t.services.credits.grant(wsB, 100);

  const workspace = async () => {
    const ws = await createWorkspace(db.orm);
    const auth = bearer((await createKey(t.services, ws, [...agentScopes])).key);
    const agent = await publishedWebAgent(t.app, auth, ORIGIN, dialOut);
    return { ws, auth, agent, site: await t.services.sites.create(ws, agent, [ORIGIN]) };
  };
  const poor = await workspace();
  wsPoor = poor;
  const full = await workspace();
  wsFull = full;
  await t.services.credits.grant(full.ws, 100);
  const conv = (await init(full.site)).json().conversation_id as string;
  // Five calls already running: the workspace's limit (VOICE_MAX_CONCURRENT's default).
  for (let i = 0; i < 5; i++) await t.services.voice.reserveCall({ workspaceId: full.ws, siteId: null, conversationId: conv, agentId: full.agent, phone: '+12025550100', provider: 'sip' });
}, 120_000);

afterAll(async () => {
  await bare?.close();
  await t?.close();
  await tw?.close();
  await llm?.close();
  await livekit?.close();
  await db?.drop();
  LocalWhisperTranscriber.unloadAll();
  MoonshineTranscriber.unloadAll();
});

const widget = (site: { site_id: string }, path: string, payload: object, app: TestApp = t) =>
  app.app.inject({ method: 'POST', url: `/api/public/widget/${path}`, headers: { 'x-concierge-site': site.site_id, origin: ORIGIN }, payload });
const callWidget = (site: { site_id: string }, payload: object, app: TestApp = t) => widget(site, 'call', payload, app);
/** What the site's backend gives a visitor whose phone it knows: user_hash signing `<site_id>.phone:<E.164>`. */
const verifiedPhone = (site: Site, phone: string) => {
  const normalised = parsePhoneNumberFromString(phone)?.format('E.164') ?? phone;
  return { phone: normalised, user_hash: userHash(site.site_secret, site.site_id, `phone:${normalised}`) };
};
/** POST /call by the visitor verified as holding `phone`, asking to be called on it. */
const callMe = (site: Site, phone: string, payload: object = {}, app: TestApp = t) => callWidget(site, { phone_number: phone, user_context: verifiedPhone(site, phone), ...payload }, app);
const init = (site: { site_id: string }, app: TestApp = t) => widget(site, 'init', {}, app);
const outbound = (auth: Record<string, string>, payload: object, app: TestApp = t) => app.app.inject({ method: 'POST', url: '/api/v1/outbound', headers: auth, payload: { channel: 'voice', ...payload } });
const get = (auth: Record<string, string>, url: string) => t.app.inject({ method: 'GET', url, headers: auth });
const result = (callId: string) => tw.client.workflow.getHandle(callWorkflowId(callId)).result() as Promise<CallResult>;
const error = (res: { statusCode: number; json(): { error: string } }) => [res.statusCode, res.json().error];

describe('POST /widget/call and POST /api/v1/outbound (voice): every refusal', () => {
  test('/call: 403 toggle off, 400 bad number, 503 no telephony (with the reason), 402 out of credits, 429 at the limit', async () => {
    expect(error(await callMe(siteOff, '+12025550143'))).toEqual([403, 'dial_out_not_enabled']);
    expect(error(await callMe(siteOn, 'call me maybe'))).toEqual([400, 'invalid_phone_number']);
    expect(error(await callMe(siteOn, '+15550000000'))).toEqual([400, 'invalid_phone_number']);
    const prereq = await callMe(siteOn, '+12025550143', {}, bare);
    expect(error(prereq)).toEqual([503, 'dial_out_prereq_failed']);
    expect(prereq.json().message).toContain('no voice provider with an outbound number');
    expect(prereq.json().message).toContain('SIP_TRUNK_URI');
    expect(error(await callMe(wsPoor.site, '+12025550143'))).toEqual([402, 'out_of_credits']);
    expect(error(await callMe(wsFull.site, '+12025550143'))).toEqual([429, 'concurrent_voice_limit_reached']);
    // init tells the visitor why dial-out is off here.
    const opened = (await init(siteOn, bare)).json();
    expect(opened.capabilities.dial_out).toBe(false);
    expect(opened.capability_warnings).toEqual(expect.arrayContaining([expect.stringContaining('dial_out is enabled but no voice provider')]));
  });

  test('/outbound voice: 404 agent or conversation of another workspace, 403, 400, 503, 402, 429', async () => {
    expect(error(await outbound(authA, { to: '+12025550143', agent_id: agentB }))).toEqual([404, 'not_found']);
    expect(error(await outbound(authA, { to: '+12025550143', agent_id: agentOff }))).toEqual([403, 'dial_out_not_enabled']);
    expect(error(await outbound(authA, { to: '12345', agent_id: agentOn }))).toEqual([400, 'invalid_phone_number']);
    expect(error(await outbound(authA, { to: '+12025550143', agent_id: agentOn }, bare))).toEqual([503, 'dial_out_prereq_failed']);
    expect(error(await outbound(wsPoor.auth, { to: '+12025550143', agent_id: wsPoor.agent }))).toEqual([402, 'out_of_credits']);
    expect(error(await outbound(wsFull.auth, { to: '+12025550143', agent_id: wsFull.agent }))).toEqual([429, 'concurrent_voice_limit_reached']);
    const convA = (await init(siteOn)).json().conversation_id;
    expect(error(await outbound(authB, { to: '+12025550143', agent_id: agentB, conversation_id: convA }))).toEqual([404, 'not_found']);
    expect(error(await outbound(authA, { to: '+12025550143', agent_id: agentOn, text: 'hello' }))).toEqual([400, 'invalid_request']);
    // Nothing was placed by any refusal.
    expect((await get(authA, '/api/v1/calls')).json().calls).toEqual([]);
  });
});

describe('a workspace with a SIP trunk of its own (a telephony credential)', () => {
  test('is offered dial-out on an installation without telephony, and its /call passes the prerequisites; a trunk without a caller id is not one', async () => {
    const id = await createWorkspace(db.orm);
    const auth = bearer((await createKey(t.services, id, ['workflows:write', 'workflows:publish', 'credentials:write'])).key);
    const agent = await publishedWebAgent(t.app, auth, ORIGIN, { triggers: { web_chat: { allowed_origins: [ORIGIN], dial_out: true } } });
    const site = await t.services.sites.create(id, agent, [ORIGIN]);
    const register = (payload: object) => t.app.inject({ method: 'POST', url: '/api/v1/credentials', headers: auth, payload: { name: 'trunk', provider: 'telephony', username: 'u', password: 'a-long-trunk-password', ...payload } });
    // No caller id: not a trunk to dial through; the installation (none here) decides.
    expect((await register({ sip_uri: 'sip:127.0.0.1:5060' })).statusCode).toBe(201);
    expect((await init(site, bare)).json().capabilities.dial_out).toBe(false);
    const badNumber = await register({ sip_uri: 'sip:127.0.0.1:5060', from_number: '4155550100' });
    expect([badNumber.statusCode, badNumber.json().error]).toEqual([400, 'invalid_request']);
    expect(badNumber.json().message).toMatch(/from_number: must be a phone number in E\.164/);
    expect((await register({ sip_uri: 'sip:127.0.0.1:5060', from_number: '+14155550100' })).statusCode).toBe(201);
    const opened = (await init(site, bare)).json();
    expect(opened.capabilities.dial_out).toBe(true);
    expect(opened.capability_warnings ?? []).toEqual([]);
    // Past the prerequisites, the next refusal is the workspace's credits (none granted): nothing is dialled.
    expect(error(await callMe(site, '+12025550199', {}, bare))).toEqual([402, 'out_of_credits']);
  });
});

describe('toll fraud: the destination policy, the verified phone, the caps, the price per class', () => {
  const PREMIUM_US = '+19002550123';
  const INMARSAT = '+870773111111';
  const PREMIUM_FR = '+33899123456';
  let ws: { ws: string; auth: Record<string, string>; agent: string; site: Site };
  /** The same installation with small dial-out caps (1 per visitor, 2 per address, 2 per number, an hour). */
  let capped: TestApp;
  const callRows = async (workspaceId: string) => (await t.services.voice.calls(workspaceId, { limit: 100 })).length;
  const nothingDialled = (...numbers: string[]) => {
    for (const n of numbers) {
      expect(phone.dialled).not.toContain(n);
      expect(livekit.calls.filter((c) => c.body.sipCallTo === n)).toEqual([]);
    }
  };

  beforeAll(async () => {
    const id = await createWorkspace(db.orm);
    const auth = bearer((await createKey(t.services, id, ['workflows:write', 'workflows:publish', 'conversations:read', 'conversations:write'])).key);
    const agent = await publishedWebAgent(t.app, auth, ORIGIN, { triggers: { web_chat: { allowed_origins: [ORIGIN], dial_out: true } } });
    ws = { ws: id, auth, agent, site: await t.services.sites.create(id, agent, [ORIGIN]) };
    await t.services.credits.grant(id, 100);
    capped = await startTestApp({
      orm: db.orm,
      databaseUrl: db.url,
      temporal: { client: tw.client, taskQueue: tw.taskQueue },
      serviceOptions: { transcriber, voice: { telephony: phone, stt } },
      config: { DIAL_OUT_CALLS_PER_VISITOR: 1, DIAL_OUT_CALLS_PER_ADDRESS: 2, DIAL_OUT_CALLS_PER_DESTINATION: 2, DIAL_OUT_WINDOW_SECONDS: 3600 },
    });
  }, 60_000);

  afterAll(async () => {
    await capped?.close();
  });

  test('premium-rate (+1 900, +33 899) and satellite (+870 Inmarsat) numbers are 400 invalid_phone_number with the reason, from the widget and /outbound, and nothing is placed or dialled', async () => {
    for (const [n, why] of [
      [PREMIUM_US, /premium-rate/],
      [INMARSAT, /non-geographic global network \(satellite/],
      [PREMIUM_FR, /premium-rate/],
    ] as const) {
      // Even a visitor whose backend signed that very number (a customer who registered it) is not called on it.
      const fromWidget = await callMe(ws.site, n);
      expect(error(fromWidget)).toEqual([400, 'invalid_phone_number']);
      expect(fromWidget.json().message).toMatch(why);
      const fromApi = await outbound(ws.auth, { to: n, agent_id: ws.agent });
      expect(error(fromApi)).toEqual([400, 'invalid_phone_number']);
      expect(fromApi.json().message).toMatch(why);
    }
    expect(await callRows(ws.ws)).toBe(0);
    expect((await get(ws.auth, '/api/v1/conversations?limit=100')).json().conversations.filter((c: { channel: string }) => c.channel === 'voice')).toEqual([]);
    nothingDialled(PREMIUM_US, INMARSAT, PREMIUM_FR);
    const started = await tw.client.workflow.count(`WorkflowType = 'callWorkflow' AND ConciergeWorkspaceId = '${ws.ws}'`);
    expect(started.count).toBe(0);
    expect((await t.services.credits.balance(ws.ws)).balance).toBe(100);
  });

  test('a country the workspace has not allowed is 400 invalid_phone_number naming it; a type it has not allowed too; the defaults come back', async () => {
    await dialOutPolicies.setDialOutPolicy(db.orm.em, ws.ws, { countries: ['gb', 'US'] });
    const fr = await outbound(ws.auth, { to: '+33612345678', agent_id: ws.agent });
    expect(error(fr)).toEqual([400, 'invalid_phone_number']);
    expect(fr.json().message).toContain('is in FR, a country this workspace does not allow for dial-out (allowed: GB, US)');
    const fromWidget = await callMe(ws.site, '+33612345678');
    expect(error(fromWidget)).toEqual([400, 'invalid_phone_number']);
    await dialOutPolicies.setDialOutPolicy(db.orm.em, ws.ws, { countries: null, types: ['fixed_line'] });
    const mobile = await outbound(ws.auth, { to: '+33612345678', agent_id: ws.agent });
    expect(error(mobile)).toEqual([400, 'invalid_phone_number']);
    expect(mobile.json().message).toContain('a mobile number, a type this workspace does not allow');
    // A UK personal number (070…) forwards anywhere at the caller's cost: not among the default types.
    await dialOutPolicies.setDialOutPolicy(db.orm.em, ws.ws, { types: null });
    const personal = await outbound(ws.auth, { to: '+447012345678', agent_id: ws.agent });
    expect(error(personal)).toEqual([400, 'invalid_phone_number']);
    expect(personal.json().message).toContain('personal-number');
    expect(await dialOutPolicies.dialOutPolicy(db.orm.em, ws.ws)).toEqual({ countries: null, types: ['fixed_line', 'mobile', 'toll_free', 'voip', 'uan'] });
    await expect(dialOutPolicies.setDialOutPolicy(db.orm.em, ws.ws, { types: ['premium_rate'] })).rejects.toMatchObject({ code: 'invalid_request' });
    expect(await callRows(ws.ws)).toBe(0);
    nothingDialled('+33612345678', '+447012345678');
  });

  test('the widget dials only a verified phone, the visitor’s own: anonymous, unsigned, beside an external_id, another number → 403', async () => {
    const own = '+12025550177';
    const anonymous = await callWidget(ws.site, { phone_number: own });
    expect(error(anonymous)).toEqual([403, 'identity_verification_required']);
    expect(anonymous.json().message).toContain('user_context');
    expect(error(await callWidget(ws.site, { phone_number: own, user_context: { phone: own } }))).toEqual([403, 'identity_verification_required']);
    // A verified external id with an unsigned phone beside it: the phone is only a label.
    const ext = { external_id: 'cust-1', user_hash: userHash(ws.site.site_secret, ws.site.site_id, 'cust-1'), phone: own };
    expect(error(await callWidget(ws.site, { phone_number: own, user_context: ext }))).toEqual([403, 'identity_verification_required']);
    // A hash for another identity kind, or another phone, does not sign this one.
    expect(error(await callWidget(ws.site, { phone_number: own, user_context: { phone: own, user_hash: userHash(ws.site.site_secret, ws.site.site_id, own) } }))).toEqual([403, 'identity_verification_failed']);
    expect(error(await callWidget(ws.site, { phone_number: own, user_context: { phone: own, user_hash: verifiedPhone(ws.site, '+12025550178').user_hash } }))).toEqual([403, 'identity_verification_failed']);
    // Verified for one number, asking to call another.
    const other = await callWidget(ws.site, { phone_number: '+12025550178', user_context: verifiedPhone(ws.site, own) });
    expect(error(other)).toEqual([403, 'identity_verification_required']);
    expect(other.json().message).toContain('phone_number');
    expect(await callRows(ws.ws)).toBe(0);
    nothingDialled(own, '+12025550178');
  });

  test('caps: a second call for the same visitor, a third from one address, a third to one number are 429 rate_limited with Retry-After; nothing dialled past them', async () => {
    const from = (ip: string) => ({ remoteAddress: ip });
    const callFrom = (ip: string, n: string) =>
      capped.app.inject({ method: 'POST', url: '/api/public/widget/call', headers: { 'x-concierge-site': ws.site.site_id, origin: ORIGIN }, payload: { phone_number: n, user_context: verifiedPhone(ws.site, n) }, ...from(ip) });
    const expect429 = (res: Awaited<ReturnType<typeof callFrom>>, what: RegExp) => {
      expect(error(res)).toEqual([429, 'rate_limited']);
      expect(res.json().message).toMatch(what);
      const retry = Number(res.headers['retry-after']);
      expect(retry).toBeGreaterThan(0);
      expect(retry).toBeLessThanOrEqual(3600);
    };
    // Numbers the fake LiveKit's trunk refuses (503): each call fails at once, so the caps are what this measures.
    const [A, B, C] = ['+14155550482', '+14155550483', '+14155550484'];
    const first = await callFrom('10.1.0.1', A);
    expect(first.statusCode).toBe(200);
    // The same visitor (site and phone) from another address: the visitor's cap.
    expect429(await callFrom('10.1.0.2', A), /calls per visitor/);
    const second = await callFrom('10.1.0.1', B);
    expect(second.statusCode).toBe(200);
    // A third visitor from the first address: the address's cap, before any lookup of the number's visitor.
    expect429(await callFrom('10.1.0.1', C), /calls per client address/);
    // The number: A was called once; /outbound may call it once more, then not again (every workspace counts).
    const viaApi = await capped.app.inject({ method: 'POST', url: '/api/v1/outbound', headers: ws.auth, payload: { channel: 'voice', to: A, agent_id: ws.agent } });
    expect(viaApi.statusCode).toBe(201);
    const third = await capped.app.inject({ method: 'POST', url: '/api/v1/outbound', headers: authA, payload: { channel: 'voice', to: A, agent_id: agentOn } });
    expect429(third, /calls to one number/);
    for (const id of [first.json().call_id, second.json().call_id, viaApi.json().id]) await result(id);
    expect(phone.dialled.filter((n) => n === A)).toHaveLength(2);
    expect(phone.dialled.filter((n) => n === B)).toHaveLength(1);
    expect(phone.dialled).not.toContain(C);
  }, 60_000);

  test('a minute is priced by the number’s class: a fixed line 1, a mobile 2 (BILLING_CREDITS_PER_CALL_MINUTE_*), fixed on the call for every minute', async () => {
    const fixed = '+442079460111';
    const mobile = '+33612345699';
    for (const n of [fixed, mobile]) scripts.set(n, () => new Promise(() => undefined));
    const a = await outbound(ws.auth, { to: fixed, agent_id: ws.agent });
    expect(a.statusCode).toBe(201);
    const b = await outbound(ws.auth, { to: mobile, agent_id: ws.agent });
    expect(b.statusCode).toBe(201);
    expect(await t.services.voice.call(ws.ws, a.json().id)).toMatchObject({ destinationClass: 'fixed', creditsPerMinute: 1 });
    expect(await t.services.voice.call(ws.ws, b.json().id)).toMatchObject({ destinationClass: 'mobile', creditsPerMinute: 2 });
    // The second minute (the workflow's billing pays it the same way) costs the class's price again.
    await t.services.voice.payMinute(ws.ws, b.json().id, 2);
    // What the ledger spent for each minute (read from the ledger: a call the loaded machine fails to connect is refunded after).
    const spends = (await db.orm.em.fork().execute(`select reference, amount from credit_ledger where workspace_id = ? and kind = 'spend' and reference like 'call_%'`, [ws.ws])) as Array<{ reference: string; amount: string }>;
    const spent = Object.fromEntries(spends.map((r) => [r.reference, Number(r.amount)]));
    expect(spent[`${a.json().id}:minute:1`]).toBe(1);
    expect(spent[`${b.json().id}:minute:1`]).toBe(2);
    expect(spent[`${b.json().id}:minute:2`]).toBe(2);
    const voiceWorkflows = new VoiceWorkflows(tw.client, tw.taskQueue);
    for (const id of [a.json().id, b.json().id]) {
      for (let i = 0; i < 100 && (await get(ws.auth, `/api/v1/calls/${id}`)).json().status === 'calling'; i++) await new Promise((r) => setTimeout(r, 100));
      await voiceWorkflows.hangUp(id);
      // The pricing is this test's subject (hanging up is sip-calls.test's). Twice in CI a hang-up here did not end its
      // call before the test's time ran out (docs/voice.md, "Open question"): then the call's workflow is terminated, and
      // the test says so, rather than leaving a call running into the next tests.
      if (!(await voiceWorkflows.ended(id, 60_000))) {
        console.warn(`call ${id}: still running 60 s after its hang-up (status ${(await get(ws.auth, `/api/v1/calls/${id}`)).json().status}); terminated`);
        await tw.client.workflow.getHandle(callWorkflowId(id)).terminate('the test ends it: hang-up did not');
      }
    }
  }, 240_000);
});

describe('a call that connects', () => {
  let callId: string;
  let conversationId: string;
  let outcome: CallResult;

  beforeAll(async () => {
    conversationId = (await init(siteOn)).json().conversation_id;
    const res = await callWidget(siteOn, { phone_number: '+1 202 555 0143', conversation_id: conversationId, user_context: verifiedPhone(siteOn, '+12025550143') });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ call_id: expect.stringMatching(/^call_/), status: 'calling', phone: '+12025550143' });
    callId = res.json().call_id;
    outcome = await result(callId);
    expect(outcome.outcome).toBe('succeeded');
    await maybeRecordHistory(tw.client, callWorkflowId(callId), 'call-completed-outcome');
  }, 180_000);

  test('goes calling → ringing → in_progress → completed when the phone hangs up, with its duration', async () => {
    expect(phone.scriptErrors).toEqual([]);
    expect(outcome).toMatchObject({ status: 'completed', reason: 'remote_hung_up' });
    const handset = phone.handsets.find((h) => h.to === '+12025550143')!;
    await expect(handset.hungUp).resolves.toBe('phone');
    const call = (await get(authA, `/api/v1/calls/${callId}`)).json();
    expect(call).toMatchObject({ id: callId, conversation_id: conversationId, agent_id: agentOn, phone: '+12025550143', direction: 'outbound', status: 'completed', error: null });
    expect(call.status_history.map((s: { status: string }) => s.status)).toEqual(['calling', 'ringing', 'in_progress', 'completed']);
    const at = call.status_history.map((s: { at: string }) => Date.parse(s.at));
    expect([...at].sort((a, b) => a - b)).toEqual(at);
    expect(call.answered_at).toBe(call.status_history[2].at);
    expect(call.ended_at).toBe(call.status_history[3].at);
    expect(call.duration_ms).toBe(Date.parse(call.ended_at) - Date.parse(call.answered_at));
    // The question (~2 s), the turn and the spoken answer (~2 s), then 1.5 s of quiet.
    expect(call.duration_ms).toBeGreaterThan(4000);
    // Operators find it by workspace, labelled.
    const byId = await tw.client.workflow.getHandle(callWorkflowId(callId)).describe();
    expect(await byId.staticSummary()).toBe('dial-out call');
    expect(byId.searchAttributes.ConciergeWorkspaceId).toHaveLength(1);
  });

  test('the agent heard the question and answered it aloud on the line', async () => {
    const asked = llm.requests.map((r) => r.body.messages.filter((m: { role: string }) => m.role === 'user').at(-1)?.content ?? '');
    // (Matched as a list, so a failure shows what the agent heard.)
    expect(asked).toEqual(expect.arrayContaining([expect.stringMatching(/open.*saturday/i)]));
    const history = (await t.app.inject({ method: 'GET', url: `/api/public/widget/history?conversation_id=${conversationId}`, headers: { 'x-concierge-site': siteOn.site_id, origin: ORIGIN } })).json();
    expect(history.messages.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant']);
    expect(history.messages[1].text).toBe(ANSWER);
    // What the handset received is the answer, spoken: the speech-to-text reads it back (the quiet around it cut).
    const handset = phone.handsets.find((h) => h.to === '+12025550143')!;
    const loud = handset.heard.filter((f) => f.some((s) => Math.abs(s) > 1000));
    expect(loud.length * 20).toBeGreaterThan(1000);
    const heard = (await stt!.transcribe(concat(handset.heard))).toLowerCase();
    expect(heard).toContain('open');
    expect(heard).toContain('morning');
  });

  test('leaves three recordings, listed on the call and the conversation, with working signed links', async () => {
    expect(outcome.recordings.map((r) => r.kind).sort()).toEqual(['agent', 'caller', 'combined']);
    const call = (await get(authA, `/api/v1/calls/${callId}`)).json();
    expect(call.recordings.map((r: { kind: string }) => r.kind).sort()).toEqual(['agent', 'caller', 'combined']);
    const listed = (await get(authA, `/api/v1/conversations/${conversationId}/recordings`)).json().recordings;
    expect(listed.map((r: { id: string }) => r.id).sort()).toEqual(call.recordings.map((r: { id: string }) => r.id).sort());
    const combined = listed.find((r: { kind: string }) => r.kind === 'combined');
    expect(combined).toMatchObject({ call_id: callId, voice_session_id: null, channels: 2, mime_type: 'audio/ogg', url: expect.stringMatching(/\/api\/media\//) });
    expect(combined.duration_ms).toBeGreaterThan(3000);
    // The link works without a key, served as a download that is never rendered.
    const file = await t.app.inject({ method: 'GET', url: new URL(combined.url).pathname });
    expect(file.statusCode).toBe(200);
    expect(file.headers['content-type']).toBe('audio/ogg');
    expect(file.headers['content-disposition']).toBe(`attachment; filename="${callId}-combined.ogg"; filename*=UTF-8''${callId}-combined.ogg`);
    expect(file.headers['x-content-type-options']).toBe('nosniff');
    expect(file.headers['content-security-policy']).toBe('sandbox');
    expect(file.rawPayload.subarray(0, 4).toString('latin1')).toBe('OggS');
    expect(file.rawPayload.length).toBe(combined.bytes);
    // A tampered link is refused.
    const tampered = new URL(combined.url).pathname.replace(/.$/, (c) => (c === 'a' ? 'b' : 'a'));
    expect((await t.app.inject({ method: 'GET', url: tampered })).statusCode).toBe(403);
  });

  test('is invisible to another workspace', async () => {
    expect(error(await get(authB, `/api/v1/calls/${callId}`))).toEqual([404, 'not_found']);
    expect(error(await get(authB, `/api/v1/conversations/${conversationId}/recordings`))).toEqual([404, 'not_found']);
    expect((await get(authB, '/api/v1/calls')).json().calls.map((c: { id: string }) => c.id)).not.toContain(callId);
  });
});

describe('POST /api/v1/outbound voice', () => {
  test('calls a number in a new voice conversation (201 with the call); the agent hanging up (workflow cancelled) ends it completed', async () => {
    const to = '+442079460958';
    // This callee says nothing and never hangs up.
    scripts.set(to, () => new Promise(() => undefined));
    const res = await outbound(authA, { to, agent_id: agentOn });
    expect(res.statusCode).toBe(201);
    const placed = res.json();
    expect(placed).toMatchObject({ id: expect.stringMatching(/^call_/), phone: to, status: 'calling', agent_id: agentOn, recordings: [], duration_ms: null });
    const conv = (await get(authA, `/api/v1/conversations/${placed.conversation_id}`)).json();
    expect(conv).toMatchObject({ channel: 'voice', agent_id: agentOn, status: 'open' });
    // Wait for the answer, then hang up from our side.
    // (Up to a minute: on a busy machine the answer took more than the ten seconds this once allowed, and a hang-up
    // while still dialling ends the call failed, not completed.)
    const answerBy = Date.now() + 60_000;
    while ((await get(authA, `/api/v1/calls/${placed.id}`)).json().status !== 'in_progress' && Date.now() < answerBy) await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 1000));
    const hungUpAt = Date.now();
    await new VoiceWorkflows(tw.client, tw.taskQueue).hangUp(placed.id);
    const done = await result(placed.id);
    expect(done).toMatchObject({ status: 'completed', reason: 'cancelled' });
    await maybeRecordHistory(tw.client, callWorkflowId(placed.id), 'call-hung-up');
    await expect(phone.handsets.find((h) => h.to === to)!.hungUp).resolves.toBe('agent');
    const call = (await get(authA, `/api/v1/calls/${placed.id}`)).json();
    expect(call.status_history.map((s: { status: string }) => s.status)).toEqual(['calling', 'ringing', 'in_progress', 'completed']);
    expect(call.duration_ms).toBeGreaterThanOrEqual(1000);
    // The hang-up reached the call within seconds (the activity's cancellation rides its next heartbeat, throttled to 2 s).
    expect(Date.parse(call.ended_at) - hungUpAt).toBeLessThan(6000);
    expect(call.recordings).toHaveLength(3);
  }, 120_000);

  test('the agent of a voice conversation is told it speaks on a phone call; the conversation may be named again for a second call', async () => {
    const to = '+33612345678';
    const first = (await outbound(authA, { to, agent_id: agentOn })).json();
    expect((await result(first.id)).status).toBe('completed');
    const system = llm.requests.at(-1)!.body.messages[0];
    expect(system).toMatchObject({ role: 'system', content: expect.stringContaining('You are speaking on a phone call') });
    scripts.set(to, async (h) => {
      await new Promise((r) => setTimeout(r, 500));
      h.hangUp();
    });
    const second = await outbound(authA, { to, agent_id: agentOn, conversation_id: first.conversation_id });
    expect(second.statusCode).toBe(201);
    expect(second.json().conversation_id).toBe(first.conversation_id);
    expect((await result(second.json().id)).status).toBe('completed');
  }, 120_000);
});

describe('calls the phone network refuses (LiveKit SIP against the fake LiveKit)', () => {
  test.each([
    [BUSY, 'busy', /486/],
    [NO_ANSWER, 'no_answer', /480/],
  ])('%s ends %s, with the SIP reason and no recordings; its first minute, paid at the start, is refunded', async (number, status, reason) => {
    const before = (await t.services.credits.balance(wsA)).balance;
    const res = await outbound(authA, { to: number, agent_id: agentOn });
    expect(res.statusCode).toBe(201);
    // A North American number does not say whether it is a mobile: priced as one (BILLING_CREDITS_PER_CALL_MINUTE_MOBILE, 2).
    expect((await t.services.credits.balance(wsA)).balance).toBe(before - 2);
    const done = await result(res.json().id);
    expect(done).toEqual({ outcome: 'unanswered', status, reason: status, recordings: [] });
    expect((await t.services.credits.balance(wsA)).balance).toBe(before);
    expect(await t.services.voice.call(wsA, res.json().id)).toMatchObject({ creditsSpent: 0 });
    await maybeRecordHistory(tw.client, callWorkflowId(res.json().id), `call-${status.replace('_', '-')}`);
    const call = (await get(authA, `/api/v1/calls/${res.json().id}`)).json();
    expect(call.status_history.map((s: { status: string }) => s.status)).toEqual(['calling', 'ringing', status]);
    expect(call).toMatchObject({ status, duration_ms: 0, answered_at: null, recordings: [] });
    expect(call.error).toMatch(reason);
    const dialled = livekit.calls.filter((c) => c.method === 'CreateSIPParticipant' && c.body.sipCallTo === number);
    expect(dialled).toHaveLength(1);
    expect(dialled[0].body).toMatchObject({ sipTrunkId: 'ST_outbound1', roomName: res.json().id, waitUntilAnswered: true });
  }, 60_000);
});

describe('GET /api/v1/calls', () => {
  test('pages newest first with next_cursor, only this workspace', async () => {
    const all = (await get(authA, '/api/v1/calls?limit=200')).json().calls as Array<{ id: string; created_at: string }>;
    expect(all.length).toBeGreaterThanOrEqual(5);
    const created = all.map((c) => Date.parse(c.created_at));
    expect([...created].sort((a, b) => b - a)).toEqual(created);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { calls: Array<{ id: string }>; next_cursor: string | null } = (await get(authA, `/api/v1/calls?limit=2${cursor ? `&cursor=${cursor}` : ''}`)).json();
      expect(page.calls.length).toBeLessThanOrEqual(2);
      seen.push(...page.calls.map((c: { id: string }) => c.id));
      cursor = page.next_cursor;
    } while (cursor);
    expect(seen).toEqual(all.map((c) => c.id));
    expect((await get(authB, '/api/v1/calls')).json()).toEqual({ calls: [], next_cursor: null });
  });
});
