import { z } from 'zod';

const E164 = z.string().regex(/^\+[1-9]\d{6,14}$/, 'must be an E.164 number such as +15551234567');
const HttpsOrigin = z
  .string()
  .regex(/^https?:\/\/[^/\s?#]+$/i, 'must be an origin such as https://shop.example (scheme and host, no path)')
  // overwrite, not transform: the same schema also serialises responses.
  .overwrite((s) => s.toLowerCase());

/** The messaging trigger: the business number the agent answers and sends on. */
export const MsgappTrigger = z
  .object({
    number: E164.meta({ description: 'The business number, E.164; what POST /api/v1/messages `from` matches exactly' }),
    phone_number_id: z.string().min(1).max(64).meta({ description: "The provider's phone-number id (Cloud API)" }),
    credential_id: z.string().min(1).max(100).optional().meta({ description: 'Reference to the stored (encrypted) access token for this number' }),
  })
  .strict();

/** The web-chat trigger: the site the widget runs on. */
export const WebChatTrigger = z
  .object({
    allowed_origins: z.array(HttpsOrigin).min(1).max(20),
    file_upload: z.boolean().default(false),
    voice_chat: z.boolean().default(false),
    dial_out: z.boolean().default(false),
    response_delivery: z.enum(['stream', 'complete']).default('stream'),
    require_identity_verification: z.boolean().default(false),
    greeting: z
      .string()
      .trim()
      .min(1)
      .max(500)
      .optional()
      .meta({ description: "The widget's first message to a visitor (plain text); unset: a short hello. A site's data-greeting attribute overrides it" }),
    starters: z
      .array(z.string().trim().min(1).max(120))
      .max(5)
      .optional()
      .meta({ description: 'Up to 5 starter questions the widget offers before the first message (a site\'s data-starters overrides them)' }),
  })
  .strict();

export const AgentAction = z.discriminatedUnion('type', [
  z.object({ type: z.literal('sender'), description: z.string().max(500).optional() }).strict().meta({ description: 'May send messages through POST /api/v1/messages' }),
  z.object({ type: z.literal('kb_search'), top_k: z.number().int().min(1).max(20).default(5) }).strict(),
  z
    .object({ type: z.literal('handoff'), message: z.string().max(1000).optional().meta({ description: 'What the customer is told when a human takes over' }) })
    .strict(),
  z
    .object({
      type: z.literal('mcp'),
      server_id: z.string().regex(/^mcp_[0-9a-f]{24}$/).meta({ description: 'A registered MCP server of the workspace' }),
      tools: z.array(z.string().min(1).max(128)).min(1).max(50).optional().meta({ description: 'The tools the agent may call (default: all the server lists)' }),
      cross_server_chaining: z
        .boolean()
        .optional()
        .meta({
          description:
            "Whether this server's tools may be called in a turn after another MCP server's tool returned (default false: a result from one server, which may carry injected instructions, never leads to a call to another)",
        }),
    })
    .strict(),
  z
    .object({
      type: z.literal('reply_elements'),
      kinds: z
        .array(z.enum(['suggested_actions', 'cards', 'charts', 'attachments']))
        .min(1)
        .max(4)
        .meta({
          description:
            'Which elements the model may add to its replies (tools suggest_replies, show_card, show_chart, attach_file: a file of its knowledge base); each is validated before it is sent',
        }),
    })
    .strict(),
]);

export const MessageTemplate = z
  .object({
    name: z.string().regex(/^[a-z0-9_]{1,512}$/, 'lowercase letters, digits and underscores'),
    language: z.string().min(2).max(10).default('en'),
    body: z.string().min(1).max(1024).meta({ description: 'Text with {{1}}, {{2}}… placeholders' }),
    status: z.enum(['approved', 'pending', 'rejected']).meta({ description: 'Only approved templates can be sent' }),
  })
  .strict();

export const AgentSpec = z
  .object({
    name: z.string().min(1).max(200),
    instructions: z.string().max(20_000).default(''),
    model: z
      .object({
        name: z.string().min(1).max(100).optional().meta({ description: 'Model id at the LLM provider; unset: LLM_MODEL' }),
        temperature: z.number().min(0).max(2).default(0.3),
        max_tokens: z.number().int().min(1).max(32_000).default(800),
        credential_id: z
          .string()
          .min(1)
          .max(100)
          .optional()
          .meta({
            // The form this server issues (as every id in the document); any other value names no credential: 404.
            pattern: '^cred_[0-9a-f]{24}$',
            description:
              "An llm credential of the workspace (POST /api/v1/credentials; 404 credential_not_found when it names none): turns run on its base_url and key, with any model and max_tokens. Unset: the installation's key, where only the operator's allowed models run (400 invalid_request naming model.name otherwise) and max_tokens is at most LLM_MAX_TOKENS_CAP",
          }),
      })
      .strict()
      // A component of its own: the OpenAPI document adds the installation's model policy to it (api/plugins/openapi.ts).
      .meta({ id: 'AgentModel' })
      .default({ temperature: 0.3, max_tokens: 800 }),
    knowledge_base: z
      .object({
        folder_ids: z.array(z.string().min(1).max(100)).max(100).default([]),
        file_ids: z.array(z.string().min(1).max(100)).max(500).default([]),
      })
      .strict()
      .default({ folder_ids: [], file_ids: [] }),
    triggers: z
      .object({ msgapp: MsgappTrigger.optional(), web_chat: WebChatTrigger.optional() })
      .strict()
      .default({}),
    actions: z.array(AgentAction).max(50).default([]),
    templates: z.array(MessageTemplate).max(200).default([]),
    phone: z
      .object({
        transfer_targets: z
          .array(
            z
              .object({
                name: z.string().regex(/^[a-z0-9_]{1,64}$/, 'lowercase letters, digits and underscores').meta({ description: 'What the agent calls it (transfer_call names it)' }),
                to: z
                  .string()
                  .regex(/^(\+[1-9][0-9]{6,14}|[0-9*#]{1,6})$/, 'a number in E.164 (+14155550123) or an extension of 1-6 digits, * and #')
                  .meta({ description: "A number in E.164, which must pass the workspace's dial-out destination policy when the call is transferred, or an extension of the trunk's PBX" }),
                description: z.string().max(300).optional().meta({ description: 'When to transfer there (shown to the model)' }),
              })
              .strict(),
          )
          .max(20)
          .default([])
          .meta({ description: 'Where the agent may transfer a phone call (SIP REFER): the only targets it can name' }),
        answering_machine: z
          .enum(['off', 'hang_up', 'leave_message'])
          .default('off')
          .meta({ description: 'On an outbound call answered by a machine (detected in the first seconds): off: talk as to a person; hang_up; leave_message: voicemail_message after the beep, then hang up' }),
        voicemail_message: z.string().trim().min(1).max(1000).optional().meta({ description: 'What the agent says to an answering machine (answering_machine leave_message)' }),
      })
      .strict()
      .refine((p) => p.answering_machine !== 'leave_message' || !!p.voicemail_message, { message: 'answering_machine leave_message needs a voicemail_message', path: ['voicemail_message'] })
      // Optional, not defaulted: agents stored before the setting existed read back unchanged.
      .optional()
      .meta({ description: 'Phone calls: transfer targets and what to do when a machine answers' }),
    privacy: z
      .object({
        mask_personal_details: z.boolean().default(false).meta({
          description:
            "Mask card numbers (Luhn-valid), IBANs, e-mail addresses and international phone numbers in the agent's final reply and in the stored transcript; streamed deltas may still show what the final reply replaces",
        }),
      })
      .strict()
      // Optional, not defaulted: agents stored before the setting existed read back unchanged.
      .optional(),
  })
  .strict()
  .meta({ id: 'AgentSpec', description: 'Everything an agent is: instructions, model settings, knowledge, triggers, canvas actions, templates' });

export type AgentSpec = z.infer<typeof AgentSpec>;

/** A full example, shown in the OpenAPI description and docs/agents.md. */
export const EXAMPLE_SPEC: z.input<typeof AgentSpec> = {
  name: 'Acme support',
  instructions: 'You answer questions about Acme orders politely and briefly. Cite the knowledge base.',
  model: { temperature: 0.2, max_tokens: 600 },
  knowledge_base: { folder_ids: ['fld_3f2a9c0d1e4b5a6978c0d1e2'], file_ids: [] },
  triggers: {
    msgapp: { number: '+15551234567', phone_number_id: '109876543210', credential_id: 'cred_0a1b2c3d4e5f60718293a4b5' },
    web_chat: { allowed_origins: ['https://shop.acme.example'], file_upload: true, voice_chat: false, dial_out: false, response_delivery: 'stream', require_identity_verification: false },
  },
  actions: [{ type: 'sender' }, { type: 'kb_search', top_k: 5 }, { type: 'handoff', message: 'A colleague will take it from here.' }],
  templates: [{ name: 'order_update', language: 'en', body: 'Your order {{1}} is on its way.', status: 'approved' }],
};
