import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import fs from 'node:fs';
import { modelsDir, moonshineModelDir, whisperTinyEnModelPath, type Config } from './config';
import type { SecretBox } from '../lib/crypto/secret-box';
import type { PgNotifications } from '../db/notifications';
import { type Transcriber } from '../lib/extract';
import { LocalWhisperTranscriber } from '../providers/speech/whisper';
import { MoonshineTranscriber, moonshineFilesPresent } from '../providers/speech/moonshine';
import { policyFromCidrs } from '../lib/net/ssrf';
import { DirectTransport } from '../providers/webrtc/direct';
import { LiveKitTransport, livekitFromConfig, type LiveKitParts } from '../providers/livekit/livekit';
import { SipTrunkTelephony, sipTrunkFromConfig, type SipTrunkSettings } from '../providers/telephony/sip-trunk';
import type { CredentialService } from '../domain/credentials/credentials';
import { DomainError } from '../domain/errors';
import { DialFailed, type CreateRoomInput, type DialOutInput, type MediaLeg, type VoiceRoom } from '../domain/ports/voice';
import type { VoiceSessionService } from '../domain/voice/sessions';
import { speechRecognizerFor, type EmbeddedSpeechModel, type SpeechRecognizer } from '../providers/speech/stt';
import { EspeakSynthesizer, OpenAiSpeechSynthesizer, type SpeechSynthesizer } from '../providers/speech/tts';
import { piperOrEspeak, piperVoicePath } from '../providers/speech/piper';
import type { Telephony, VoiceTransport } from '../domain/ports/voice';
import { type VoicePrereqs } from '../domain/ports/voice';
export { type VoicePrereqs } from '../domain/ports/voice';

/** The voice pieces of one process: speech both ways, the transport and the telephony (when any). */
export interface VoiceParts {
  stt: SpeechRecognizer | null;
  tts: SpeechSynthesizer | null;
  transport: VoiceTransport;
  telephony: Telephony | null;
  prereqs: VoicePrereqs;
}

/** What tests replace: a synthesizer, a recognizer, the telephony. */
export interface VoiceOverrides {
  stt?: SpeechRecognizer | null;
  tts?: SpeechSynthesizer | null;
  telephony?: Telephony | null;
}

let espeakFound: boolean | null = null;
function espeakInstalled(): boolean {
  espeakFound ??= spawnSync('espeak-ng', ['--version'], { stdio: 'ignore', timeout: 5000 }).status === 0;
  return espeakFound;
}

/**
 * The embedded models the voice agent uses (VOICE_STT_MODEL for finals, VOICE_PARTIAL_MODEL
 * for partials) when `transcriber` is the embedded whisper. The English-only ones (Moonshine,
 * Whisper tiny.en) only when the callers speak English (VOICE_LANGUAGE=en) and their files
 * are there (npm run models:fetch): Moonshine missing falls back to tiny.en for partials and
 * to the transcriber's own model for finals (null for both: no embedded whisper).
 */
export function voiceSpeechModels(config: Config, transcriber: Transcriber | null): { final: EmbeddedSpeechModel | null; partial: EmbeddedSpeechModel | null } {
  if (!(transcriber instanceof LocalWhisperTranscriber)) return { final: null, partial: null };
  const english = config.VOICE_LANGUAGE === 'en';
  const asked = [config.VOICE_STT_MODEL, config.VOICE_PARTIAL_MODEL];
  const dir = moonshineModelDir(config);
  const moonshine =
    english && asked.includes('moonshine') && moonshineFilesPresent(dir) ? new MoonshineTranscriber({ modelDir: dir, maxSeconds: config.TRANSCRIBE_MAX_SECONDS }) : null;
  const file = whisperTinyEnModelPath(config);
  const tiny =
    english && (asked.includes('tiny.en') || (config.VOICE_PARTIAL_MODEL === 'moonshine' && !moonshine)) && fs.existsSync(file)
      ? new LocalWhisperTranscriber({ modelPath: file, maxSeconds: config.TRANSCRIBE_MAX_SECONDS, threads: config.TRANSCRIBE_THREADS, language: 'en' })
      : null;
  return {
    final: { moonshine: moonshine ?? transcriber, 'tiny.en': tiny ?? transcriber, base: transcriber }[config.VOICE_STT_MODEL],
    partial: { moonshine: moonshine ?? tiny ?? transcriber, 'tiny.en': tiny ?? transcriber, base: transcriber }[config.VOICE_PARTIAL_MODEL],
  };
}

/** The voice agent's speech-to-text from the settings: the transcriber for calls, with the models voiceSpeechModels picks. */
export function voiceRecognizerFromConfig(config: Config, transcriber: Transcriber | null): SpeechRecognizer | null {
  return speechRecognizerFor(transcriber, config.VOICE_LANGUAGE, voiceSpeechModels(config, transcriber));
}

/**
 * The synthesizer the settings name: TTS_BASE_URL, else the embedded engine when espeak-ng is installed (it gives
 * Piper its phonemes too): TTS_ENGINE=piper's voice (loading from now on, shared by every call of the process;
 * espeak-ng when its files are missing), else espeak-ng; else none.
 */
export function synthesizerFromConfig(config: Config): SpeechSynthesizer | null {
  if (config.TTS_BASE_URL) return new OpenAiSpeechSynthesizer({ baseUrl: config.TTS_BASE_URL, apiKey: config.TTS_API_KEY, model: config.TTS_MODEL, voice: config.TTS_VOICE });
  if (!espeakInstalled()) return null;
  if (config.TTS_ENGINE === 'piper') return piperOrEspeak({ model: piperVoicePath(modelsDir(config), config.TTS_PIPER_VOICE), espeakVoice: config.TTS_ESPEAK_VOICE });
  return new EspeakSynthesizer({ voice: config.TTS_ESPEAK_VOICE });
}

/** The signalling socket's URL on this installation's public origin (http → ws). */
export function signalUrl(publicBaseUrl: string): string {
  return `${publicBaseUrl.replace(/^http/, 'ws').replace(/\/$/, '')}/api/voice/rtc`;
}

/** Dial-out from the settings: LiveKit's SIP when it has a trunk (it wins), else the direct SIP trunk, else none. */
export function telephonyFromConfig(config: Config, livekit: LiveKitParts | null): Telephony | null {
  return livekit?.telephony ?? sipTrunkFromConfig(config);
}

/** Where a workspace's own SIP trunk is found (its telephony credential with sip_uri and from_number). */
export type WorkspaceTrunks = Pick<CredentialService, 'sipTrunk'>;

/**
 * Dial-out per workspace: a workspace with a SIP trunk of its own (a telephony credential with sip_uri
 * and from_number) dials through it, directly over SIP with its username, password and caller id, to
 * the address its host resolved to and was checked at (the address rules of provider URLs); any other
 * workspace through the installation's telephony (LiveKit SIP or SIP_TRUNK_URI), when there is one.
 * The local side (SIP_LOCAL_IP, SIP_RTP_PORTS, SIP_RINGING_TIMEOUT_SECONDS) is the installation's.
 */
export class WorkspaceTelephony implements Telephony {
  readonly kind: Telephony['kind'];

  constructor(
    private readonly fallback: Telephony | null,
    private readonly trunks: WorkspaceTrunks,
    private readonly local: Pick<SipTrunkSettings, 'ringingTimeoutSeconds' | 'localIp' | 'rtpPorts' | 't1Ms'> = {},
  ) {
    this.kind = fallback?.kind ?? 'sip';
  }

  async dial(input: DialOutInput, progress: (status: 'ringing' | 'in_progress') => void, signal: AbortSignal): Promise<MediaLeg> {
    let own: Awaited<ReturnType<WorkspaceTrunks['sipTrunk']>>;
    try {
      own = await this.trunks.sipTrunk(input.workspaceId);
    } catch (err) {
      // The trunk's host breaks the address rules now: nothing is sent, the call fails saying why.
      if (err instanceof DomainError) throw new DialFailed('failed', `the workspace's SIP trunk was not called: ${err.message}`);
      throw err;
    }
    if (!own) {
      if (!this.fallback) throw new DialFailed('failed', 'no voice provider with an outbound number: the installation has none and the workspace has no telephony credential with sip_uri and from_number');
      return this.fallback.dial(input, progress, signal);
    }
    let trunk: SipTrunkTelephony;
    try {
      trunk = new SipTrunkTelephony({ ...this.local, uri: own.sipUri, username: own.username || undefined, password: own.username ? own.password : undefined, fromNumber: own.fromNumber, address: own.address });
    } catch (err) {
      throw new DialFailed('failed', `the workspace's SIP trunk (credential ${own.credentialId}) cannot be dialled: ${(err as Error).message}`);
    }
    return trunk.dial(input, progress, signal);
  }
}

/** Where a workspace's own voice server is found (its newest voice credential). */
export type WorkspaceVoiceServers = Pick<CredentialService, 'voiceServer'>;

/**
 * Browser voice per workspace: a workspace with a voice credential (a LiveKit-style server: url,
 * api_key, api_secret) has its rooms made, its visitors' tokens signed and its agent joined on that
 * server (the url checked against the address rules of provider URLs at each use); any other workspace
 * on the installation's transport (LIVEKIT_URL, else the embedded direct WebRTC). The agent's join finds
 * the workspace by the session (the room is named after it). The installation's egress settings are not
 * used on a workspace's server: its sessions are recorded by the agent's own recorder.
 */
export class WorkspaceTransport implements VoiceTransport {
  readonly kind: VoiceTransport['kind'];

  constructor(
    private readonly fallback: VoiceTransport,
    private readonly servers: WorkspaceVoiceServers,
    private readonly sessions: Pick<VoiceSessionService, 'sessionById'>,
    private readonly livekit: { emptyTimeoutSeconds?: number } = {},
  ) {
    this.kind = fallback.kind;
  }

  private async transportOf(workspaceId: string | null | undefined): Promise<VoiceTransport> {
    if (!workspaceId) return this.fallback;
    const own = await this.servers.voiceServer(workspaceId);
    if (!own) return this.fallback;
    return new LiveKitTransport({ url: own.url, apiKey: own.apiKey, apiSecret: own.apiSecret, emptyTimeoutSeconds: this.livekit.emptyTimeoutSeconds });
  }

  private async transportOfSession(id: string): Promise<VoiceTransport> {
    return this.transportOf((await this.sessions.sessionById(id))?.workspaceId);
  }

  async createRoom(input: CreateRoomInput): Promise<VoiceRoom> {
    let transport: VoiceTransport;
    try {
      transport = await this.transportOf(input.workspaceId);
    } catch (err) {
      // The server's address breaks the rules now (stored_url_unsafe): the visitor is told voice cannot run, the reason kept.
      if (err instanceof DomainError) throw new DomainError('voice_chat_prereq_failed', `Voice chat cannot run here: the workspace's voice server was not called (${err.message})`);
      throw err;
    }
    return transport.createRoom(input);
  }

  async joinAsAgent(room: string, signal: AbortSignal): Promise<MediaLeg> {
    return (await this.transportOfSession(room)).joinAsAgent(room, signal);
  }

  async deleteRoom(room: string): Promise<void> {
    return (await this.transportOfSession(room)).deleteRoom(room);
  }
}

/**
 * Voice from the settings: LiveKit when LIVEKIT_URL is set (dial-out with
 * LIVEKIT_SIP_TRUNK_ID), else the embedded direct WebRTC transport; dial-out through
 * LiveKit when it has a trunk, else directly over the SIP trunk SIP_TRUNK_URI names
 * (LiveKit wins when both are set); speech-to-text is the process's transcriber,
 * speech the TTS settings'.
 */
export function voiceFromConfig(
  config: Config,
  deps: { box: SecretBox; sessions: VoiceSessionService; notifications: PgNotifications | null; transcriber: Transcriber | null; publicBaseUrl: string; trunks?: WorkspaceTrunks; servers?: WorkspaceVoiceServers },
  overrides: VoiceOverrides = {},
): VoiceParts {
  const stt = 'stt' in overrides ? (overrides.stt ?? null) : voiceRecognizerFromConfig(config, deps.transcriber);
  const tts = 'tts' in overrides ? (overrides.tts ?? null) : synthesizerFromConfig(config);
  const livekit = livekitFromConfig(config);
  const ports = config.VOICE_RTP_PORTS?.split('-').map(Number) as [number, number] | undefined;
  const installationTransport: VoiceTransport =
    livekit?.transport ??
    new DirectTransport({
      box: deps.box,
      sessions: deps.sessions,
      notifications: deps.notifications,
      signalUrl: signalUrl(deps.publicBaseUrl),
      peer: {
        iceServers: config.VOICE_ICE_SERVERS?.split(',').map((u) => ({ urls: u.trim() })).filter((s) => s.urls),
        ...(ports ? { portRange: ports } : {}),
        ...(config.VOICE_PUBLIC_IP ? { announce: [config.VOICE_PUBLIC_IP] } : {}),
        candidatePolicy: policyFromCidrs(config.VOICE_ICE_ALLOW_CIDRS),
      },
    });
  // Each workspace's own voice server first (its credentials), the installation's transport as the default.
  const transport = deps.servers ? new WorkspaceTransport(installationTransport, deps.servers, deps.sessions, { emptyTimeoutSeconds: config.LIVEKIT_ROOM_EMPTY_TIMEOUT_SECONDS }) : installationTransport;
  const installation = 'telephony' in overrides ? (overrides.telephony ?? null) : telephonyFromConfig(config, livekit);
  // Each workspace's own trunk first (its credentials), the installation's as the default.
  const rtpPorts = config.SIP_RTP_PORTS?.split('-').map(Number) as [number, number] | undefined;
  const telephony = deps.trunks
    ? new WorkspaceTelephony(installation, deps.trunks, { ringingTimeoutSeconds: config.SIP_RINGING_TIMEOUT_SECONDS, localIp: config.SIP_LOCAL_IP, rtpPorts })
    : installation;
  const speech = !stt
    ? 'no speech-to-text (TRANSCRIBE_BASE_URL, or the embedded model: npm run models:fetch)'
    : !tts
      ? 'no text-to-speech (TTS_BASE_URL, or Debian espeak-ng installed)'
      : null;
  return {
    stt,
    tts,
    transport,
    telephony,
    prereqs: {
      voice: speech,
      // The installation's: a workspace with its own trunk needs only the speech (CallService.assertDialOutPrereqs).
      dialOut: !installation ? 'no voice provider with an outbound number (LIVEKIT_URL with LIVEKIT_SIP_TRUNK_ID, or SIP_TRUNK_URI with SIP_FROM_NUMBER)' : speech,
    },
  };
}

/**
 * A worker process that runs voice (speech both ways) reports its capacity (VOICE_WORKER_CAPACITY) now and
 * every 10 s into voice_workers, so the API admits as many sessions and calls as the live workers carry
 * (VoiceSessionService.installationCapacity); `onClose` removes its row when the process stops. A worker that
 * dies stops counting VOICE_WORKER_STALE_MS after its last report.
 */
export async function reportVoiceCapacity(
  sessions: Pick<VoiceSessionService, 'workerHeartbeat' | 'workerGone'>,
  capacity: number,
  onClose: (run: () => Promise<void>, name: string) => void,
  log: { warn(obj: object, msg: string): void },
): Promise<void> {
  const id = `${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const beat = () => sessions.workerHeartbeat(id, capacity).catch((err: unknown) => log.warn({ err }, 'voice capacity not reported'));
  await beat();
  const timer = setInterval(() => void beat(), 10_000);
  timer.unref();
  onClose(async () => {
    clearInterval(timer);
    await sessions.workerGone(id).catch(() => undefined);
  }, 'voice capacity report');
}
