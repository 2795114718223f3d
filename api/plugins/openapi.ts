import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import swagger from '@fastify/swagger';
import { jsonSchemaTransform, jsonSchemaTransformObject } from '@fastify/type-provider-zod';
import type { OpenAPIV3_1 } from 'openapi-types';
import { z } from 'zod';
import { DELIVERY_HEADERS, WEBHOOK_EVENTS } from '../schemas/webhooks';
import { ChatFrameSchema, SOCKET_UPGRADE_DESCRIPTION } from '../schemas/socket';

const DESCRIPTION = `Concierge server API. Authenticate with \`Authorization: Bearer sk_...\`; each operation names the
scope it needs in \`x-required-scope\`. Errors are \`{error, message}\` plus documented extra fields.

Rate limits: per API key and per workspace over a one-minute window. Every authenticated response carries
\`X-RateLimit-Limit\`, \`X-RateLimit-Remaining\` and \`X-RateLimit-Reset\` (Unix time, seconds, at which the window
ends); a 429 \`rate_limited\` adds \`Retry-After\` (seconds).

Idempotency: every JSON POST accepts an \`Idempotency-Key\` header (1 to 255 printable ASCII characters). The same key and
the same request replay the stored response with \`Idempotent-Replayed: true\`; the same key with another request is
409 \`idempotency_conflict\`. Keys live 24 hours. Requests that fail validation and 5xx responses are not stored.

Other client errors: malformed JSON is 400 \`invalid_request\`; a body over the limit is 413 \`payload_too_large\`;
a Content-Type other than \`application/json\` on a JSON endpoint is 415 \`unsupported_media_type\`; unknown routes are
404 \`not_found\`; a known path asked for with a method it does not serve is 405 \`method_not_allowed\` with an
\`Allow\` header; headers over the server's limit are 431 \`request_header_fields_too_large\`. 5xx bodies are generic and
carry the request id (also in the \`X-Request-Id\` header).

Input: a string anywhere in a body, query or path parameter (or in \`X-Concierge-Site\`, \`Idempotency-Key\`) holding the
NUL character (U+0000) or a lone UTF-16 surrogate is 400 \`invalid_request\` naming the field, as is a body nested deeper
than 32 levels and a repeated query parameter where one value is expected. Unknown query parameters are ignored.
Ids are opaque: the documented patterns are the form this server issues, and any other id is 404 \`not_found\`.`;

/**
 * OpenAPI 3.1 generated from the same zod schemas that validate requests. The
 * document is finished once at startup: each authenticated operation gets bearer
 * security and its scope in `x-required-scope`, taken from the route table.
 */
export const openapiPlugin = fp(async (app: FastifyInstance) => {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Concierge API', version: '1.0.0', description: DESCRIPTION },
      servers: [{ url: '/', description: 'This server' }],
      components: {
        securitySchemes: {
          bearerApiKey: { type: 'http', scheme: 'bearer', description: "API key: 'sk_' followed by 64 hexadecimal characters" },
          widgetSite: {
            type: 'apiKey',
            in: 'header',
            name: 'X-Concierge-Site',
            description: "The public site id; the browser's Origin must be on the site's allowed list (case-insensitive exact match)",
          },
        },
      },
    },
    transform: jsonSchemaTransform,
    transformObject: jsonSchemaTransformObject,
  });

  let doc: OpenAPIV3_1.Document | null = null;
  app.get('/api/v1/openapi.json', {
    config: { public: true },
    schema: { hide: true },
    handler: async () => {
      doc ??= finish(app.swagger() as OpenAPIV3_1.Document, app);
      return doc;
    },
  });
});

function finish(raw: OpenAPIV3_1.Document, app: FastifyInstance): OpenAPIV3_1.Document {
  const doc = structuredClone(raw);
  for (const route of app.routeTable) {
    const path = route.url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    const op = (doc.paths?.[path] as Record<string, OpenAPIV3_1.OperationObject> | undefined)?.[route.method.toLowerCase()];
    if (!op) continue;
    if (route.scope) {
      op.security = [{ bearerApiKey: [] }];
      (op as Record<string, unknown>)['x-required-scope'] = route.scope;
    } else if (route.site) {
      op.security = [{ widgetSite: [] }];
    } else {
      op.security = [];
    }
  }
  documentCommonResponses(doc);
  documentSocket(doc);
  documentVoiceSocket(doc);
  doc.webhooks = webhookPayloads();
  return doc;
}

const errorResponse = (description: string): OpenAPIV3_1.ResponseObject => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});

/**
 * The statuses any operation can answer whatever its route declares, so generated
 * clients and fuzzers see every status: 400 (input checks run on every route), 404 on
 * paths with parameters, 413/415 where there is a body, 429 where a rate limit applies,
 * 500 everywhere.
 */
function documentCommonResponses(doc: OpenAPIV3_1.Document): void {
  for (const item of Object.values(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(item as Record<string, OpenAPIV3_1.OperationObject>)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const responses = (op.responses ??= {});
      const add = (status: string, description: string) => {
        responses[status] ??= errorResponse(description);
      };
      add('400', 'invalid_request: a parameter, header or the body failed validation (the message names it)');
      if ((op.parameters ?? []).some((p) => 'in' in p && p.in === 'path')) add('404', 'not_found: no such id in this workspace');
      if (op.requestBody) {
        add('413', 'payload_too_large: the body is larger than this endpoint accepts');
        add('415', 'unsupported_media_type: a Content-Type this endpoint does not accept');
      }
      if ((op.security ?? []).length > 0) add('429', 'rate_limited; see Retry-After and X-RateLimit-* headers');
      add('500', 'internal_error: generic, with the request id to quote');
    }
  }
}

/** The reply socket: its upgrade (101) and the frames it carries, as a component. */
function documentSocket(doc: OpenAPIV3_1.Document): void {
  const op = (doc.paths?.['/api/chat/connect'] as OpenAPIV3_1.PathItemObject | undefined)?.get;
  if (!op) return;
  const frame = z.toJSONSchema(ChatFrameSchema, { target: 'draft-2020-12', io: 'output' }) as Record<string, unknown>;
  delete frame.$schema;
  doc.components ??= {};
  doc.components.schemas = { ...doc.components.schemas, ChatFrame: frame as OpenAPIV3_1.SchemaObject };
  op.responses = {
    '101': { description: SOCKET_UPGRADE_DESCRIPTION, content: { 'application/json': { schema: { $ref: '#/components/schemas/ChatFrame' } } } },
    ...op.responses,
  };
}

/** The direct voice transport's signalling socket: the frames both ways (README, "Voice"). */
const VoiceSignalFrame = z
  .union([
    z.object({ type: z.literal('join'), token: z.string().meta({ description: 'browser → server, first: the rtc_token of /voice/start' }) }),
    z.object({ type: z.literal('joined'), room: z.string(), ice_servers: z.array(z.object({ urls: z.string() })) }),
    z.object({ type: z.literal('offer'), sdp: z.string().meta({ description: 'browser → server: every ICE candidate gathered (no trickle); PCMU audio and a data channel labelled `transcript`' }) }),
    z.object({ type: z.literal('answer'), sdp: z.string().meta({ description: "server → browser: the agent's peer" }) }),
    z.object({ type: z.literal('ended'), reason: z.string() }),
    z.object({ type: z.literal('bye') }),
    z.object({ type: z.literal('error'), error: z.string(), message: z.string() }),
  ])
  .meta({ description: 'JSON text frames of the voice signalling socket; transcript frames travel on the WebRTC data channel `transcript`, never here' });

function documentVoiceSocket(doc: OpenAPIV3_1.Document): void {
  const op = (doc.paths?.['/api/voice/rtc'] as OpenAPIV3_1.PathItemObject | undefined)?.get;
  if (!op) return;
  const frame = z.toJSONSchema(VoiceSignalFrame, { target: 'draft-2020-12', io: 'output' }) as Record<string, unknown>;
  delete frame.$schema;
  doc.components ??= {};
  doc.components.schemas = { ...doc.components.schemas, VoiceSignalFrame: frame as OpenAPIV3_1.SchemaObject };
  op.responses = {
    '101': { description: 'Switching Protocols: the signalling socket (join → joined, offer → answer)', content: { 'application/json': { schema: { $ref: '#/components/schemas/VoiceSignalFrame' } } } },
    ...op.responses,
  };
}

/** What subscribers receive: OpenAPI 3.1's top-level `webhooks`, one entry per event type. */
function webhookPayloads(): Record<string, OpenAPIV3_1.PathItemObject> {
  const out: Record<string, OpenAPIV3_1.PathItemObject> = {};
  for (const [event, schema] of Object.entries(WEBHOOK_EVENTS)) {
    const json = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'output' }) as Record<string, unknown>;
    delete json.$schema;
    out[event] = {
      post: {
        operationId: `webhook_${event.replace('.', '_')}`,
        summary: `Event ${event}`,
        description: String(json.description ?? ''),
        tags: ['Webhooks'],
        parameters: Object.entries(DELIVERY_HEADERS).map(([name, description]) => ({ name, in: 'header' as const, required: true, description, schema: { type: 'string' } })),
        requestBody: { required: true, content: { 'application/json': { schema: json as never } } },
        responses: { '200': { description: 'Any 2xx acknowledges the delivery; anything else, a transport error or a 10 s time-out is a failed attempt (6 attempts: now, then after 1, 2, 4, 8 and 16 s)' } },
      },
    };
  }
  return out;
}
