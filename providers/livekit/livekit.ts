import type * as LiveKitSdk from 'livekit-server-sdk';
import type { EgressClient, RoomServiceClient, SipClient, VideoGrant } from 'livekit-server-sdk';
import { ConfigError } from '../../lib/config-error';
import { OperationalError } from '../../lib/failures';
import { type LiveKitAgentLeg, connectAgent } from './livekit-agent';
import { DialFailed, dialStatus } from '../../domain/ports/voice';
import type { CreateRoomInput, DialOutInput, MediaLeg, Telephony, VoiceRoom, VoiceTransport } from '../../domain/ports/voice';

/**
 * livekit-server-sdk (and its protobuf runtime, some 150 modules) loads with the first LiveKit client, not with every
 * process: most installations run the embedded transport.
 */
let loaded: typeof LiveKitSdk | undefined;
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a synchronous lazy load: the clients are made in constructors
const sdk = (): typeof LiveKitSdk => (loaded ??= require('livekit-server-sdk') as typeof LiveKitSdk);

/**
 * LiveKit, the production voice transport: the contract's rtc_url / rtc_token /
 * room_name are LiveKit's. Rooms, recordings and dial-out go through LiveKit's Twirp
 * API (livekit-server-sdk's RoomServiceClient, EgressClient, SipClient); the agent joins
 * the room as a participant with @livekit/rtc-node (livekit-agent.ts, loaded lazily so
 * this module loads without the native FFI library).
 */

export interface LiveKitEgressSettings {
  /**
   * Where the egress worker writes the recording, with egress's placeholders
   * ({room_name}, {time}, …). A path on the egress worker's disk, or the object key
   * when `s3` is set.
   */
  filepath: string;
  /** Upload to an S3-compatible bucket (credentials go to LiveKit's egress, not to us). */
  s3?: { bucket: string; region?: string; endpoint?: string; accessKey?: string; secret?: string; forcePathStyle?: boolean };
}

export interface LiveKitSettings {
  /** The server, ws(s):// (what browsers connect to) or http(s):// (the same host). */
  url: string;
  apiKey: string;
  apiSecret: string;
  /** Seconds an empty room stays open before LiveKit closes it (the visitor's join window). */
  emptyTimeoutSeconds?: number;
  /** Seconds one Twirp call may take (the SDK's default is 10). */
  requestTimeoutSeconds?: number;
  egress?: LiveKitEgressSettings;
}

/** Participants of a room: the visitor (or the phone), the agent, and the egress recorder. */
export const MAX_PARTICIPANTS = 3;
/** The agent's identity in every room. */
export const AGENT_IDENTITY = 'agent';
/** The SIP participant's identity in a dial-out room. */
export const PHONE_IDENTITY = 'phone';
const DEFAULT_EMPTY_TIMEOUT_SECONDS = 300;
/** One Ogg/Opus file per room and start time; egress fills the placeholders. */
export const DEFAULT_EGRESS_FILEPATH = 'recordings/{room_name}-{time}.ogg';
/** The agent joins at once: its token only needs to outlive the connect. */
const AGENT_TOKEN_TTL_SECONDS = 300;

/** Failure codes this module reports (OperationalError.code). */
export const LIVEKIT_UNAVAILABLE = 'LiveKitUnavailable';
export const LIVEKIT_REJECTED = 'LiveKitRejected';

/**
 * A Twirp error or a transport failure as an OperationalError: unreachable, 5xx and 429
 * may succeed later; any other 4xx (bad credentials, a missing grant, a bad argument)
 * will not. Messages carry LiveKit's code and message, never a token.
 */
export function liveKitFailure(operation: string, err: unknown): OperationalError {
  if (err instanceof sdk().TwirpError) {
    const retryable = err.status >= 500 || err.status === 429;
    return new OperationalError(
      retryable ? LIVEKIT_UNAVAILABLE : LIVEKIT_REJECTED,
      `LiveKit ${operation} failed: ${err.code ?? err.status} ${err.message}`,
      retryable,
      { detail: `HTTP ${err.status}` },
    );
  }
  const message = err instanceof Error ? err.message : String(err);
  return new OperationalError(LIVEKIT_UNAVAILABLE, `LiveKit ${operation} failed: the server could not be reached`, true, { detail: message });
}

const isNotFound = (err: unknown) => err instanceof sdk().TwirpError && (err.code === 'not_found' || err.status === 404);

/** The browser's URL: LiveKit's signalling is a WebSocket on the same host. */
export function rtcUrl(url: string): string {
  return url.replace(/^http(s?):\/\//i, 'ws$1://');
}

function validate(settings: LiveKitSettings): void {
  if (!/^(wss?|https?):\/\/[^/\s]+/i.test(settings.url)) {
    throw new ConfigError(`LIVEKIT_URL must be a ws://, wss://, http:// or https:// URL (got '${settings.url}')`);
  }
  if (!settings.apiKey) throw new ConfigError('LIVEKIT_API_KEY is required with LIVEKIT_URL');
  if (!settings.apiSecret) throw new ConfigError('LIVEKIT_API_SECRET is required with LIVEKIT_URL');
}

export class LiveKitTransport implements VoiceTransport {
  readonly kind = 'livekit' as const;
  readonly rooms: RoomServiceClient;
  readonly egress: EgressClient;

  constructor(readonly settings: LiveKitSettings) {
    validate(settings);
    const opts = { requestTimeout: settings.requestTimeoutSeconds };
    this.rooms = new (sdk().RoomServiceClient)(settings.url, settings.apiKey, settings.apiSecret, opts);
    this.egress = new (sdk().EgressClient)(settings.url, settings.apiKey, settings.apiSecret, opts);
  }

  async createRoom(input: CreateRoomInput): Promise<VoiceRoom> {
    const room_name = input.voiceSessionId;
    await this.ensureRoom(room_name);
    // The visitor may publish their microphone only (no camera, no screen), and join this room only.
    const rtc_token = await this.token(input.identity, input.ttlSeconds, {
      room: room_name,
      roomJoin: true,
      canPublish: true,
      canPublishSources: [sdk().TrackSource.MICROPHONE],
      canSubscribe: true,
      canPublishData: true,
    });
    return { transport: 'livekit', room_name, rtc_url: rtcUrl(this.settings.url), rtc_token };
  }

  /** Creates the room (LiveKit answers the existing room when it is already open). */
  async ensureRoom(name: string): Promise<void> {
    try {
      await this.rooms.createRoom({
        name,
        emptyTimeout: this.settings.emptyTimeoutSeconds ?? DEFAULT_EMPTY_TIMEOUT_SECONDS,
        maxParticipants: MAX_PARTICIPANTS,
      });
    } catch (err) {
      throw liveKitFailure('CreateRoom', err);
    }
  }

  async deleteRoom(room: string): Promise<void> {
    try {
      await this.rooms.deleteRoom(room);
    } catch (err) {
      if (isNotFound(err)) return;
      throw liveKitFailure('DeleteRoom', err);
    }
  }

  joinAsAgent(room: string, signal: AbortSignal): Promise<MediaLeg> {
    return this.agentLeg(room, signal);
  }

  /** Joins as the agent and resolves once `remoteIdentity` (or, without it, anyone) is in the room. */
  async agentLeg(room: string, signal: AbortSignal, remoteIdentity?: string): Promise<LiveKitAgentLeg> {
    const token = await this.token(AGENT_IDENTITY, AGENT_TOKEN_TTL_SECONDS, {
      room,
      roomJoin: true,
      canPublish: true,
      canSubscribe: true,
      canPublishData: true,
      hidden: false,
    });
    try {
      return await connectAgent({ url: rtcUrl(this.settings.url), token, remoteIdentity, signal });
    } catch (err) {
      if (signal.aborted) throw err;
      // rtc-node reports signalling and ICE failures as plain Errors ("engine: signal failure: …").
      throw new OperationalError(LIVEKIT_UNAVAILABLE, `the agent could not join LiveKit room ${room}`, true, { detail: err instanceof Error ? err.message : String(err) });
    }
  }

  /**
   * Records the room's mixed audio (room-composite egress, audio only, one Ogg file) to
   * the configured path or bucket. Returns the egress id for stopRecording.
   */
  async startRecording(room: string): Promise<string> {
    const egress = this.settings.egress;
    if (!egress) throw new OperationalError(LIVEKIT_REJECTED, 'LiveKit recording is not configured (LIVEKIT_EGRESS_FILEPATH)', false);
    const file = new (sdk().EncodedFileOutput)({ fileType: sdk().EncodedFileType.OGG, filepath: egress.filepath });
    if (egress.s3) {
      const s3 = egress.s3;
      file.output = {
        case: 's3',
        value: new (sdk().S3Upload)({
          bucket: s3.bucket,
          region: s3.region ?? '',
          endpoint: s3.endpoint ?? '',
          accessKey: s3.accessKey ?? '',
          secret: s3.secret ?? '',
          forcePathStyle: s3.forcePathStyle ?? false,
        }),
      };
    }
    try {
      const info = await this.egress.startRoomCompositeEgress(room, { file }, { audioOnly: true });
      return info.egressId;
    } catch (err) {
      throw liveKitFailure('StartRoomCompositeEgress', err);
    }
  }

  /** Stops a recording; one that is unknown (already ended and gone) is not an error. */
  async stopRecording(egressId: string): Promise<void> {
    try {
      await this.egress.stopEgress(egressId);
    } catch (err) {
      if (isNotFound(err)) return;
      throw liveKitFailure('StopEgress', err);
    }
  }

  private token(identity: string, ttlSeconds: number, grant: VideoGrant): Promise<string> {
    const at = new (sdk().AccessToken)(this.settings.apiKey, this.settings.apiSecret, { identity, ttl: ttlSeconds });
    at.addGrant(grant);
    return at.toJwt();
  }
}

export { DialFailed, dialStatus };

export interface LiveKitSipSettings {
  /** The outbound trunk (LIVEKIT_SIP_TRUNK_ID, `ST_…`). */
  trunkId: string;
  /** Seconds the phone may ring before LiveKit gives up (a no_answer). */
  ringingTimeoutSeconds?: number;
  /** Longest call, seconds; LiveKit hangs up after it. */
  maxCallDurationSeconds?: number;
}

/**
 * Dial-out through LiveKit SIP: the call gets its own room, LiveKit dials the number on
 * the outbound trunk and (waitUntilAnswered) answers the request once the phone picks
 * up; then the agent joins the room and the phone participant is the MediaLeg's remote.
 * The agent joins after the answer, so the callee's first few hundred milliseconds of
 * audio may be missed (the agent greets first anyway).
 */
export class LiveKitSipTelephony implements Telephony {
  readonly kind = 'livekit-sip' as const;
  readonly sip: SipClient;

  constructor(
    private readonly transport: LiveKitTransport,
    private readonly settings: LiveKitSipSettings,
  ) {
    if (!settings.trunkId) throw new ConfigError('LIVEKIT_SIP_TRUNK_ID is required for LiveKit dial-out');
    const s = transport.settings;
    // No failover: a replayed CreateSIPParticipant is a second phone call.
    this.sip = new (sdk().SipClient)(s.url, s.apiKey, s.apiSecret, { requestTimeout: s.requestTimeoutSeconds, failover: false });
  }

  async dial(input: DialOutInput, progress: (status: 'ringing' | 'in_progress') => void, signal: AbortSignal): Promise<MediaLeg> {
    signal.throwIfAborted();
    await this.transport.ensureRoom(input.room_name);
    try {
      signal.throwIfAborted();
      progress('ringing');
      // The SDK's request takes no signal: an abort stops waiting, and deleting the room below hangs up.
      await abortable(this.placeCall(input), signal);
      progress('in_progress');
      const leg = await this.transport.agentLeg(input.room_name, signal, PHONE_IDENTITY).catch((err: unknown) => {
        if (signal.aborted) throw err;
        throw new DialFailed('failed', `the call was answered but the agent could not join: ${err instanceof Error ? err.message : String(err)}`);
      });
      // The phone stays in the room when only the agent leaves: our hang-up deletes the room.
      const leave = leg.close.bind(leg);
      leg.close = async () => {
        await leave();
        await this.transport.deleteRoom(input.room_name).catch(() => undefined);
      };
      return leg;
    } catch (err) {
      // Deleting the room hangs up the phone participant if LiveKit still has one.
      await this.transport.deleteRoom(input.room_name).catch(() => undefined);
      throw err;
    }
  }

  private async placeCall(input: DialOutInput): Promise<void> {
    try {
      await this.sip.createSipParticipant(this.settings.trunkId, input.to, input.room_name, {
        participantIdentity: PHONE_IDENTITY,
        participantName: input.to,
        participantAttributes: { call_id: input.callId, workspace_id: input.workspaceId },
        playDialtone: false,
        waitUntilAnswered: true,
        ringingTimeout: this.settings.ringingTimeoutSeconds,
        maxCallDuration: this.settings.maxCallDurationSeconds,
      });
    } catch (err) {
      if (err instanceof sdk().SipCallError) {
        throw new DialFailed(dialStatus(err.sipStatusCode), err.message, err.sipStatusCode);
      }
      // The request outlived the ringing timeout without a SIP answer.
      if ((err instanceof Error && err.name === 'TimeoutError') || (err instanceof sdk().TwirpError && err.code === 'deadline_exceeded')) {
        throw new DialFailed('no_answer', 'the call was not answered in time');
      }
      const failure = liveKitFailure('CreateSIPParticipant', err);
      throw new DialFailed('failed', failure.message);
    }
  }
}

function abortable<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  work.catch(() => undefined);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason ?? new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** The settings livekitFromConfig reads (the LIVEKIT_* keys of app/config.ts). */
export interface LiveKitConfig {
  LIVEKIT_URL?: string;
  LIVEKIT_API_KEY?: string;
  LIVEKIT_API_SECRET?: string;
  LIVEKIT_SIP_TRUNK_ID?: string;
  LIVEKIT_ROOM_EMPTY_TIMEOUT_SECONDS?: number;
  LIVEKIT_SIP_RINGING_TIMEOUT_SECONDS?: number;
  LIVEKIT_EGRESS_FILEPATH?: string;
  LIVEKIT_EGRESS_S3_BUCKET?: string;
  LIVEKIT_EGRESS_S3_REGION?: string;
  LIVEKIT_EGRESS_S3_ENDPOINT?: string;
  LIVEKIT_EGRESS_S3_ACCESS_KEY_ID?: string;
  LIVEKIT_EGRESS_S3_SECRET_ACCESS_KEY?: string;
}

export interface LiveKitParts {
  transport: LiveKitTransport;
  /** Null without LIVEKIT_SIP_TRUNK_ID. */
  telephony: LiveKitSipTelephony | null;
}

/**
 * The LiveKit parts from settings: null when LIVEKIT_URL is unset (voice then uses the
 * direct transport); a ConfigError naming the missing key when it is half configured.
 */
export function livekitFromConfig(config: LiveKitConfig): LiveKitParts | null {
  if (!config.LIVEKIT_URL) return null;
  if (!!config.LIVEKIT_EGRESS_S3_ACCESS_KEY_ID !== !!config.LIVEKIT_EGRESS_S3_SECRET_ACCESS_KEY) {
    throw new ConfigError('LIVEKIT_EGRESS_S3_ACCESS_KEY_ID and LIVEKIT_EGRESS_S3_SECRET_ACCESS_KEY go together');
  }
  const transport = new LiveKitTransport({
    url: config.LIVEKIT_URL,
    apiKey: config.LIVEKIT_API_KEY ?? '',
    apiSecret: config.LIVEKIT_API_SECRET ?? '',
    emptyTimeoutSeconds: config.LIVEKIT_ROOM_EMPTY_TIMEOUT_SECONDS,
    egress: {
      filepath: config.LIVEKIT_EGRESS_FILEPATH || DEFAULT_EGRESS_FILEPATH,
      s3: config.LIVEKIT_EGRESS_S3_BUCKET
        ? {
            bucket: config.LIVEKIT_EGRESS_S3_BUCKET,
            region: config.LIVEKIT_EGRESS_S3_REGION,
            endpoint: config.LIVEKIT_EGRESS_S3_ENDPOINT,
            accessKey: config.LIVEKIT_EGRESS_S3_ACCESS_KEY_ID,
            secret: config.LIVEKIT_EGRESS_S3_SECRET_ACCESS_KEY,
            // Custom endpoints (MinIO, R2, …) mostly want path-style, as S3_FORCE_PATH_STYLE defaults.
            forcePathStyle: !!config.LIVEKIT_EGRESS_S3_ENDPOINT,
          }
        : undefined,
    },
  });
  const telephony = config.LIVEKIT_SIP_TRUNK_ID
    ? new LiveKitSipTelephony(transport, { trunkId: config.LIVEKIT_SIP_TRUNK_ID, ringingTimeoutSeconds: config.LIVEKIT_SIP_RINGING_TIMEOUT_SECONDS })
    : null;
  return { transport, telephony };
}
