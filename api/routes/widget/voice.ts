import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { z } from 'zod';
import type { DialOutLimits } from '../../../lib/ratelimit';
import type { Services } from '../../../app/services';
import { ErrorBody } from '../../schemas/common';
import { conversationErrors, tags, UserContext, widgetErrors } from './common';

const VoiceSessionId = z.string().regex(/^vs_[0-9a-f]{24}$/, { error: 'must be a voice_session_id (vs_ and 24 hex characters)' });

const StartBody = z
  .object({
    conversation_id: z.string().min(1).max(100).optional().meta({ description: "The visitor's conversation (from /init); absent: the one /init would resume or start" }),
    user_context: UserContext.optional(),
  })
  .strict();

const Recording = z
  .object({
    id: z.string(),
    kind: z.enum(['caller', 'agent', 'combined']),
    mime_type: z.string(),
    channels: z.number().int(),
    duration_ms: z.number().int(),
    bytes: z.number().int(),
    voice_session_id: z.string().nullable(),
    call_id: z.string().nullable(),
    created_at: z.string(),
  })
  .meta({ id: 'Recording' });

const VoiceSession = z
  .object({
    rtc_url: z.string().meta({ description: 'direct: our signalling WebSocket (see docs/voice.md); livekit: the LiveKit server' }),
    rtc_token: z.string().meta({ description: 'Short-lived: direct, a signed room token sent as the first socket frame; livekit, a LiveKit access token' }),
    room_name: z.string(),
    voice_session_id: z.string(),
    voice_mode: z.enum(['hands_free']),
    voice_animation_style: z.enum(['orb']),
    transport: z.enum(['direct', 'livekit']),
    conversation_id: z.string(),
  })
  .meta({ id: 'VoiceSession' });

/**
 * Browser voice sessions (`/voice/start`, `/voice/inject_text`, `/voice/stop`): the
 * agent's toggle (403), what this installation lacks (503), the workspace's concurrent
 * sessions (429) and its credits (402, the first minute paid at start) are checked in
 * that order; then the room and the `voice:vs_…` workflow. Every call names the
 * session's conversation's identity like /send does. `/call` (dial-out) checks the same
 * way, with the number (400) after the toggle, and starts a `call:call_…` workflow.
 * Each handler is one call into WidgetVoice (domain/widget/voice.ts).
 */
export const voiceRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'widgetVoice'>; dialOut: DialOutLimits }> = async (app, opts) => {
  const voice = opts.services.widgetVoice;

  app.post('/api/public/widget/voice/start', {
    config: { site: true },
    schema: {
      operationId: 'widgetVoiceStart',
      summary: 'Open a browser voice session with the agent',
      tags,
      security: [{ widgetSite: [] }],
      body: StartBody.optional(),
      response: {
        200: VoiceSession,
        ...widgetErrors,
        ...conversationErrors,
        402: ErrorBody.meta({ description: 'out_of_credits: the workspace cannot pay the first minute' }),
        403: ErrorBody.meta({ description: "voice_chat_not_enabled (the agent's web_chat.voice_chat is off), and the identity refusals of /send" }),
        409: ErrorBody.meta({ description: 'conversation_closed' }),
        429: ErrorBody.meta({
          description:
            'concurrent_voice_limit_reached (connected sessions and calls per workspace: VOICE_MAX_CONCURRENT, 5 by default, of which VOICE_SLOTS_RESERVED_FOR_API, 1, only API calls take); rate_limited with Retry-After (sessions joining or live per visitor, VOICE_MAX_SESSIONS_PER_VISITOR, 2, or per client address, VOICE_MAX_SESSIONS_PER_ADDRESS, 4; a session joins within VOICE_JOIN_TIMEOUT_SECONDS)',
        }),
        503: ErrorBody.meta({ description: 'voice_chat_prereq_failed (with the reason: no speech-to-text or text-to-speech here), no_workflow_configured, workflow_unavailable' }),
      },
    },
    handler: async (request) => voice.start(request.site!, request.body ?? {}, request.ip),
  });

  app.post('/api/public/widget/call', {
    config: { site: true },
    schema: {
      operationId: 'widgetCall',
      summary: 'Phone the visitor: the agent calls the number with the same persona and tools',
      description:
        "Calls only the visitor's own verified phone: user_context {phone, user_hash} with user_hash = HMAC-SHA256(site secret, `<site_id>.phone:<E.164>`), and phone_number that same number. Checks, in order: a named conversation's identity rules (as /send), the agent's web_chat.dial_out toggle (403), the visitor's verified phone (403 identity_verification_required without one, identity_verification_failed when the hash does not sign it), the number and the workspace's destination policy (400 invalid_phone_number with the reason: not a number; premium-rate, shared-cost, unknown type, non-geographic global network such as +870 Inmarsat; a type or country the workspace does not allow), phone_number being that verified phone (403 identity_verification_required), what this installation lacks (503: no voice provider with an outbound number, no speech), the dial-out caps per client address, per visitor and per number (429 rate_limited with Retry-After; DIAL_OUT_*), the conversation (absent: the one /init would resume or start; 409 when closed), the workspace's concurrent voice sessions and calls (429) and its credits (402: the first minute is paid now, at the price of the number's class: fixed, mobile or other). The call then runs in its own workflow: GET /api/v1/calls/{call_id} follows it (calling → ringing → in_progress → completed | failed | no_answer | busy).",
      tags,
      security: [{ widgetSite: [] }],
      body: z
        .object({
          phone_number: z.string().min(1).max(40).meta({ description: "The number to call, international format (E.164, e.g. +14155550123): the visitor's own, as user_context.phone and signed by user_hash" }),
          user_context: UserContext.optional(),
          conversation_id: z.string().min(1).max(100).optional().meta({ description: "The visitor's conversation (from /init); absent: the one /init would resume or start" }),
        })
        .strict(),
      response: {
        200: z.object({ call_id: z.string(), status: z.literal('calling'), phone: z.string().meta({ description: 'The number called, E.164' }) }).meta({ id: 'DialOutCall' }),
        ...widgetErrors,
        ...conversationErrors,
        400: ErrorBody.meta({ description: 'invalid_phone_number (the message says why: not a number, premium-rate, shared-cost, unknown type, non-geographic/satellite, a type or country the workspace does not allow), invalid_request' }),
        402: ErrorBody.meta({ description: 'out_of_credits: the workspace cannot pay the first minute' }),
        403: ErrorBody.meta({ description: "dial_out_not_enabled (the agent's web_chat.dial_out is off); identity_verification_required (no verified phone in user_context, or phone_number is not it); identity_verification_failed (user_hash does not sign <site_id>.phone:<E.164>); and the identity refusals of /send" }),
        409: ErrorBody.meta({ description: 'conversation_closed' }),
        429: ErrorBody.meta({ description: 'concurrent_voice_limit_reached (VOICE_MAX_CONCURRENT sessions and calls per workspace); rate_limited with Retry-After (requests per site and address, and the dial-out caps per client address, visitor and number)' }),
        503: ErrorBody.meta({ description: 'dial_out_prereq_failed (with the reason), no_workflow_configured, workflow_unavailable' }),
      },
    },
    handler: async (request) => voice.call(request.site!, request.body, request.ip, opts.dialOut),
  });

  app.post('/api/public/widget/voice/inject_text', {
    config: { site: true },
    schema: {
      operationId: 'widgetVoiceInjectText',
      summary: 'Push a text turn into a live voice session (the agent answers it aloud)',
      tags,
      security: [{ widgetSite: [] }],
      body: z.object({ voice_session_id: VoiceSessionId, text: z.string().min(1).max(4000), user_context: UserContext.optional() }).strict(),
      response: {
        200: z.object({ ok: z.literal(true) }).meta({ id: 'VoiceInjected' }),
        ...widgetErrors,
        ...conversationErrors,
        404: ErrorBody.meta({ description: 'not_found: no such voice session on this site' }),
        409: ErrorBody.meta({ description: 'voice_session_not_live: the session is still joining or has ended' }),
      },
    },
    handler: async (request) => voice.injectText(request.site!, request.body),
  });

  app.post('/api/public/widget/voice/stop', {
    config: { site: true },
    schema: {
      operationId: 'widgetVoiceStop',
      summary: 'End a voice session; answers once its recordings (caller, agent, stereo) are saved',
      tags,
      security: [{ widgetSite: [] }],
      body: z.object({ voice_session_id: VoiceSessionId, user_context: UserContext.optional() }).strict(),
      response: {
        200: z.object({ ended: z.literal(true), recordings: z.array(Recording) }).meta({ id: 'VoiceStopped' }),
        ...widgetErrors,
        ...conversationErrors,
        404: ErrorBody.meta({ description: 'not_found: no such voice session on this site' }),
        503: ErrorBody.meta({ description: 'workflow_unavailable' }),
      },
    },
    handler: async (request) => voice.stop(request.site!, request.body),
  });
};
