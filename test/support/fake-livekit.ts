import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { TokenVerifier, type ClaimGrants } from 'livekit-server-sdk';

/**
 * A fake LiveKit server on loopback speaking LiveKit's Twirp JSON protocol, as
 * livekit-server-sdk sends it: `POST /twirp/livekit.<Service>/<Method>`, a
 * `Content-Type: application/json` body in protobuf's JSON mapping (camelCase field
 * names, enums by name, int64 and Duration as strings), `Authorization: Bearer <JWT>`
 * signed with the API secret. The JWT is checked with the SDK's own TokenVerifier and
 * must carry the grant LiveKit requires for the method (roomCreate, roomList,
 * roomRecord, sip.call). Errors are Twirp's `{code, msg, meta?}` with the HTTP status
 * of the code; a failed dial carries LiveKit's `sip_status_code` / `sip_status` meta and
 * the Twirp code LiveKit derives from the SIP status (livekit/protocol sip.go).
 *
 * The signalling endpoint (`GET /rtc…`, a WebSocket upgrade carrying the participant's
 * JWT as a bearer token) is only recorded: a bad token gets 401 like LiveKit answers,
 * a good one 501, since this fake speaks neither LiveKit's signalling protocol nor
 * WebRTC. Nothing here can be joined.
 */

export interface FakeLiveKitCall {
  service: string;
  method: string;
  body: any;
  claims: ClaimGrants;
  headers: http.IncomingHttpHeaders;
}

export interface TwirpFailure {
  code: string;
  msg: string;
  meta?: Record<string, string>;
}

/** How a dial ends: answered, or a SIP final response. */
export type FakeDialOutcome = { answer: true; delayMs?: number } | { sipStatusCode: number; sipStatus: string; delayMs?: number };

export interface FakeLiveKitOptions {
  apiKey: string;
  apiSecret: string;
  /** Outbound trunks that exist; a dial on another is not_found. */
  trunks?: string[];
  /** Decides each dial; default: answered. */
  dial?: (body: any) => FakeDialOutcome;
  /** Answers a Twirp error instead of handling the call (after auth), when it returns one. */
  fail?: (call: FakeLiveKitCall) => TwirpFailure | undefined;
}

export interface FakeLiveKit {
  /** The server URL as LIVEKIT_URL would be set (ws://). */
  url: string;
  calls: FakeLiveKitCall[];
  rooms: Map<string, { sid: string; name: string; emptyTimeout: number; maxParticipants: number; participants: string[] }>;
  egresses: Map<string, { egressId: string; roomName: string; status: string }>;
  /** Attempts to join a room through the signalling endpoint, with the token's claims (null: it did not verify). */
  joins: Array<{ path: string; claims: ClaimGrants | null }>;
  close(): Promise<void>;
}

/** Twirp's error codes and their HTTP statuses (twirp spec v7). */
const TWIRP_STATUS: Record<string, number> = {
  canceled: 408,
  invalid_argument: 400,
  malformed: 400,
  deadline_exceeded: 408,
  not_found: 404,
  bad_route: 404,
  already_exists: 409,
  permission_denied: 403,
  unauthenticated: 401,
  resource_exhausted: 429,
  failed_precondition: 412,
  aborted: 409,
  out_of_range: 400,
  unimplemented: 501,
  internal: 500,
  unavailable: 503,
  dataloss: 500,
  unknown: 500,
};

/** The Twirp code LiveKit answers a SIP final response with (livekit/protocol sipCodeToGRPCCode). */
export function twirpCodeForSip(sip: number): string {
  const table: Record<number, string> = {
    403: 'permission_denied',
    404: 'not_found',
    408: 'deadline_exceeded',
    480: 'resource_exhausted',
    486: 'resource_exhausted',
    487: 'aborted',
    503: 'failed_precondition',
    600: 'resource_exhausted',
    603: 'permission_denied',
  };
  return table[sip] ?? (sip < 500 ? 'invalid_argument' : sip < 600 ? 'failed_precondition' : 'invalid_argument');
}

type Handler = (call: FakeLiveKitCall) => Promise<unknown> | unknown;

class Twirp extends Error {
  constructor(readonly failure: TwirpFailure) {
    super(failure.msg);
  }
}
const twirp = (code: string, msg: string, meta?: Record<string, string>) => new Twirp({ code, msg, ...(meta ? { meta } : {}) });

let ids = 0;
const id = (prefix: string) => `${prefix}_fake${(++ids).toString(36).padStart(6, '0')}`;

export async function startFakeLiveKit(opts: FakeLiveKitOptions): Promise<FakeLiveKit> {
  const verifier = new TokenVerifier(opts.apiKey, opts.apiSecret);
  const calls: FakeLiveKitCall[] = [];
  const rooms: FakeLiveKit['rooms'] = new Map();
  const egresses: FakeLiveKit['egresses'] = new Map();
  const joins: FakeLiveKit['joins'] = [];
  const closing = new AbortController();

  const roomJson = (r: { sid: string; name: string; emptyTimeout: number; maxParticipants: number; participants: string[] }) => ({
    sid: r.sid,
    name: r.name,
    emptyTimeout: r.emptyTimeout,
    maxParticipants: r.maxParticipants,
    creationTime: String(Math.floor(Date.now() / 1000)),
    numParticipants: r.participants.length,
  });

  // Each method: the grant LiveKit's server checks, then the handler.
  const methods: Record<string, { allowed: (c: ClaimGrants) => boolean; handle: Handler }> = {
    'RoomService/CreateRoom': {
      allowed: (c) => !!c.video?.roomCreate,
      handle: ({ body }) => {
        if (!body.name) throw twirp('invalid_argument', 'room name is required');
        let room = rooms.get(body.name);
        // LiveKit answers the existing room when it is already open.
        if (!room) {
          room = { sid: id('RM'), name: body.name, emptyTimeout: body.emptyTimeout ?? 0, maxParticipants: body.maxParticipants ?? 0, participants: [] };
          rooms.set(body.name, room);
        }
        return roomJson(room);
      },
    },
    'RoomService/DeleteRoom': {
      allowed: (c) => !!c.video?.roomCreate,
      handle: ({ body }) => {
        if (!rooms.delete(body.room)) throw twirp('not_found', 'requested room does not exist');
        return {};
      },
    },
    'RoomService/ListRooms': {
      allowed: (c) => !!c.video?.roomList,
      handle: ({ body }) => {
        const names: string[] = body.names ?? [];
        return { rooms: [...rooms.values()].filter((r) => names.length === 0 || names.includes(r.name)).map(roomJson) };
      },
    },
    'Egress/StartRoomCompositeEgress': {
      allowed: (c) => !!c.video?.roomRecord,
      handle: ({ body }) => {
        if (!body.roomName) throw twirp('invalid_argument', 'room name is required');
        const egress = { egressId: id('EG'), roomName: body.roomName, status: 'EGRESS_STARTING' };
        egresses.set(egress.egressId, egress);
        return { ...egress, startedAt: String(Date.now() * 1e6) };
      },
    },
    'Egress/StopEgress': {
      allowed: (c) => !!c.video?.roomRecord,
      handle: ({ body }) => {
        const egress = egresses.get(body.egressId);
        if (!egress) throw twirp('not_found', 'egress does not exist');
        egress.status = 'EGRESS_ENDING';
        return { ...egress };
      },
    },
    'SIP/CreateSIPParticipant': {
      allowed: (c) => !!c.sip?.call,
      handle: async ({ body }) => {
        if (!body.sipTrunkId || (opts.trunks && !opts.trunks.includes(body.sipTrunkId))) throw twirp('not_found', 'requested sip trunk does not exist');
        if (!body.sipCallTo) throw twirp('invalid_argument', 'call-to number must be set');
        if (!body.roomName) throw twirp('invalid_argument', 'room name must be set');
        const outcome = opts.dial?.(body) ?? { answer: true };
        if (outcome.delayMs) await sleep(outcome.delayMs, undefined, { signal: closing.signal });
        if (!('answer' in outcome)) {
          const { sipStatusCode, sipStatus } = outcome;
          throw twirp(twirpCodeForSip(sipStatusCode), `sip status ${sipStatusCode}: ${sipStatus}`, { sip_status_code: String(sipStatusCode), sip_status: sipStatus });
        }
        const identity = body.participantIdentity || 'sip-participant';
        rooms.get(body.roomName)?.participants.push(identity);
        return { participantId: id('PA'), participantIdentity: identity, roomName: body.roomName, sipCallId: id('SCL') };
      },
    },
  };

  const server = http.createServer((req, res) => {
    void handle(req, res).catch((err: unknown) => {
      if (res.headersSent) return void res.destroy();
      if (err instanceof Twirp) return sendTwirp(res, err.failure);
      sendTwirp(res, { code: 'internal', msg: `fake LiveKit failed: ${(err as Error).message}` });
    });
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const path = req.url?.split('?')[0] ?? '';
    if (req.method === 'GET' && /^\/rtc(\/|$)/.test(path)) return signalling(req, res, path);
    const match = /^\/twirp\/livekit\.(\w+)\/(\w+)$/.exec(req.url?.split('?')[0] ?? '');
    const key = match ? `${match[1]}/${match[2]}` : '';
    const method = methods[key];
    if (req.method !== 'POST' || !method) throw twirp('bad_route', `no handler for path ${req.url}`);
    if (!String(req.headers['content-type'] ?? '').startsWith('application/json')) throw twirp('malformed', 'unexpected Content-Type');
    const bearer = /^Bearer (.+)$/.exec(String(req.headers.authorization ?? ''))?.[1];
    if (!bearer) throw twirp('unauthenticated', 'authorization header required');
    let claims: ClaimGrants;
    try {
      claims = (await verifier.verify(bearer)) as ClaimGrants;
    } catch {
      throw twirp('unauthenticated', 'invalid token');
    }
    if (!method.allowed(claims)) throw twirp('permission_denied', 'permissions denied');
    let body: any;
    try {
      body = JSON.parse(raw || '{}');
    } catch {
      throw twirp('malformed', 'the json request could not be decoded');
    }
    const call: FakeLiveKitCall = { service: match![1], method: match![2], body, claims, headers: { ...req.headers } };
    calls.push(call);
    const failure = opts.fail?.(call);
    if (failure) throw new Twirp(failure);
    const out = await method.handle(call);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(out));
  }

  async function signalling(req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<void> {
    const bearer = /^Bearer (.+)$/.exec(String(req.headers.authorization ?? ''))?.[1] ?? new URL(req.url ?? '/', 'http://x').searchParams.get('access_token');
    const claims = bearer ? ((await verifier.verify(bearer).catch(() => null)) as ClaimGrants | null) : null;
    joins.push({ path, claims });
    res.writeHead(claims ? 501 : 401, { 'content-type': 'text/plain' });
    res.end(claims ? 'this fake LiveKit does not speak the signalling protocol' : 'invalid token');
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}`,
    calls,
    rooms,
    egresses,
    joins,
    close: async () => {
      closing.abort();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function sendTwirp(res: http.ServerResponse, failure: TwirpFailure): void {
  // The SDK parses the error body only when Content-Type is exactly application/json.
  res.writeHead(TWIRP_STATUS[failure.code] ?? 500, { 'content-type': 'application/json' });
  res.end(JSON.stringify(failure));
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
