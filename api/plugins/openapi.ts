import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import swagger from '@fastify/swagger';
import { jsonSchemaTransform, jsonSchemaTransformObject } from '@fastify/type-provider-zod';
import type { OpenAPIV3_1 } from 'openapi-types';
import { z } from 'zod';
import { DELIVERY_HEADERS, WEBHOOK_EVENTS } from '../schemas/webhooks';
import { ChatFrameSchema, SOCKET_UPGRADE_DESCRIPTION } from '../schemas/socket';
import { STORED_BYTES } from '../schemas/common';
import { SERVED_CONTENT_TYPES } from '../stored-bytes';
import type { ModelPolicy } from '../../domain/agents/model-policy';

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
NUL character (U+0000) or a lone UTF-16 surrogate is 400 \`invalid_request\` naming the field (request string schemas carry
the pattern \`^[^\\u0000]*$\` for it; a value of any JSON is \`AnyJsonWithoutNul\`), as is a body nested deeper than 32
levels and a repeated query parameter where one value is expected. Unknown query parameters are ignored.
Ids are opaque: the documented patterns are the form this server issues, and any other id is 404 \`not_found\`.

The console: its people sign in (\`POST /api/console/sign-in\`) and get a session cookie (\`consoleSession\`). The
session calls the /api/v1 operations with the scopes of the user's role (owner and admin: every scope; agent:
conversations:*, customers:*, kb:read, workflows:read; viewer: every :read scope); a session lacking the scope is 403
\`insufficient_scope\`, an expired one 401 \`not_signed_in\`. Its POST, PUT, PATCH and DELETE must come from the
console's own origin and carry \`X-CSRF-Token\` (403 \`csrf_failed\`). The operations under /api/console/ (people,
sign-in, one-time links, the key console, the audit log) take a session only: an API key gets 401 there.`;

/**
 * OpenAPI 3.1 generated from the same zod schemas that validate requests. The
 * document is finished once at startup: each authenticated operation gets bearer
 * security and its scope in `x-required-scope`, taken from the route table.
 */
export const openapiPlugin = fp(async (app: FastifyInstance, opts: { models?: Pick<ModelPolicy, 'allowed' | 'maxTokensCap'> }) => {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Concierge API', version: '1.0.0', description: DESCRIPTION },
      servers: [{ url: '/', description: 'This server' }],
      components: {
        securitySchemes: {
          bearerApiKey: { type: 'http', scheme: 'bearer', description: "API key: 'sk_' followed by 64 hexadecimal characters" },
          consoleSession: {
            type: 'apiKey',
            in: 'cookie',
            name: 'concierge_session',
            description:
              "The console's session (HttpOnly, SameSite=Lax; set by POST /api/console/sign-in and POST /api/console/links/redeem). It authorizes the /api/console/ operations and, without an Authorization header, the /api/v1 operations whose scope the user's role holds (403 insufficient_scope otherwise). Unsafe methods must be same-origin and carry the session's CSRF token (consoleCsrf), else 403 csrf_failed.",
          },
          consoleCsrf: {
            type: 'apiKey',
            in: 'header',
            name: 'X-CSRF-Token',
            description: "The session's csrf_token (GET /api/console/session): required with consoleSession on POST, PUT, PATCH and DELETE",
          },
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
      doc ??= finish(app.swagger() as OpenAPIV3_1.Document, app, opts.models ?? null);
      return doc;
    },
  });
});

function finish(raw: OpenAPIV3_1.Document, app: FastifyInstance, models: Pick<ModelPolicy, 'allowed' | 'maxTokensCap'> | null): OpenAPIV3_1.Document {
  const doc = structuredClone(raw);
  for (const route of app.routeTable) {
    const path = route.url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    const op = (doc.paths?.[path] as Record<string, OpenAPIV3_1.OperationObject> | undefined)?.[route.method.toLowerCase()];
    if (!op) continue;
    const session: OpenAPIV3_1.SecurityRequirementObject = ['GET', 'HEAD'].includes(route.method) ? { consoleSession: [] } : { consoleSession: [], consoleCsrf: [] };
    if (route.scope) {
      // A key, or (the console) a session whose role holds the scope.
      op.security = [{ bearerApiKey: [] }, session];
      (op as Record<string, unknown>)['x-required-scope'] = route.scope;
    } else if (route.console === 'session') {
      op.security = [session];
    } else if (route.site) {
      op.security = [{ widgetSite: [] }];
    } else {
      op.security = [];
    }
  }
  documentCommonResponses(doc);
  documentStoredBytes(doc);
  if (models) documentModelPolicy(doc, models);
  documentNulRefusal(doc);
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

/**
 * A response of stored bytes (a knowledge-base download) carries the type the bytes were
 * stored with, from the served allow-list (api/stored-bytes.ts), never a JSON document:
 * each of those types is listed, without a schema (any bytes).
 */
function documentStoredBytes(doc: OpenAPIV3_1.Document): void {
  for (const item of Object.values(doc.paths ?? {})) {
    for (const op of Object.values(item as Record<string, OpenAPIV3_1.OperationObject>)) {
      for (const response of Object.values(op?.responses ?? {}) as OpenAPIV3_1.ResponseObject[]) {
        const json = response.content?.['application/json']?.schema as Record<string, unknown> | undefined;
        if (!json?.[STORED_BYTES]) continue;
        response.content = Object.fromEntries(SERVED_CONTENT_TYPES.map((type) => [type, {}]));
      }
    }
  }
}

/**
 * This installation's model policy, on the agent spec's `model` as requests send it: without
 * `credential_id` (the operator's key) only the allowed models (LLM_MODEL, LLM_ALLOWED_MODELS)
 * and `max_tokens` up to LLM_MAX_TOKENS_CAP, else 400 invalid_request naming the field; on
 * the workspace's own llm credential, anything. The document is this server's, so it says
 * what this server's operator allows.
 */
function documentModelPolicy(doc: OpenAPIV3_1.Document, models: Pick<ModelPolicy, 'allowed' | 'maxTokensCap'>): void {
  const model = doc.components?.schemas?.AgentModelInput as Record<string, unknown> | undefined;
  if (!model) return;
  const onOperatorKey = {
    properties: { ...(models.allowed.length ? { name: { enum: models.allowed } } : {}), max_tokens: { maximum: models.maxTokensCap } },
    ...(models.allowed.length ? {} : { not: { required: ['name'] } }),
  };
  model.anyOf = [{ required: ['credential_id'] }, onOperatorKey];
  const allowed = models.allowed.length ? models.allowed.join(', ') : 'none (leave name unset)';
  model.description = `${String(model.description ?? '')} Without credential_id (the installation's model key): name one of ${allowed}; max_tokens at most ${models.maxTokensCap}.`.trim();
}

/** A string without the NUL character, which the input checks refuse anywhere (api/plugins/input.ts). */
export const NO_NUL = '^[^\\u0000]*$';

/**
 * Whether a `pattern` can match a string holding NUL. Conservative: only an anchored pattern
 * of literals, positive classes (`\\d`, `[a-z0-9_]`…) and negated classes that name NUL first
 * (`[^\\u0000-\\u001f]`) is known not to; any other negated class, a dot, `\\S`-style escapes or
 * an unanchored pattern might.
 */
function mayMatchNul(pattern: string): boolean {
  if (!/^\^.*\$$/.test(pattern)) return true;
  const rest = pattern.replace(/\[\^\\u0000(?:\\.|[^\]\\])*\]/g, '');
  return /\[\^|(?<!\\)\.|\\[SDW]|\\u0000|\\x00/.test(rest);
}

/** The component of "any JSON value", as a request may carry it: no string or object key in it holds NUL. */
const ANY_JSON = 'AnyJsonWithoutNul';
const anyJsonWithoutNul = (): OpenAPIV3_1.SchemaObject =>
  ({
    description: 'Any JSON value; no string in it, at any depth, and no object key holds the NUL character (U+0000)',
    pattern: NO_NUL,
    propertyNames: { pattern: NO_NUL },
    items: { $ref: `#/components/schemas/${ANY_JSON}` },
    additionalProperties: { $ref: `#/components/schemas/${ANY_JSON}` },
  }) as OpenAPIV3_1.SchemaObject;

/** Keywords that say nothing about which values are valid. */
const ANNOTATIONS = new Set(['description', 'title', 'example', 'examples', 'default', 'deprecated', 'readOnly', 'writeOnly']);

/**
 * The input checks refuse a NUL in every string of a request (a body field or key, a query,
 * path or multipart field) with 400, so the document says so where a generator or a
 * client reads it: every string a request carries gets the NO_NUL pattern (beside any
 * pattern of its own that might admit NUL), every object with free-form keys the same on its
 * `propertyNames`. Strings with a format (date-time, email, uri; binary is file content), an
 * enum or a const hold no NUL already. Responses are left alone: only request schemas (and
 * the components they refer to) are walked.
 */
function documentNulRefusal(doc: OpenAPIV3_1.Document): void {
  doc.components ??= {};
  doc.components.schemas = { ...doc.components.schemas, [ANY_JSON]: anyJsonWithoutNul() };
  const components = doc.components.schemas as Record<string, Record<string, unknown>>;
  const seen = new Set<string>([ANY_JSON]);
  // Walks schemas only (subschema keywords), never the maps that hold them: a property named `description` is no annotation.
  const walk = (node: unknown): void => {
    if (!node || typeof node !== 'object' || Array.isArray(node)) return;
    const schema = node as Record<string, unknown>;
    // A value of any JSON (z.unknown(), a record's values): any JSON but NUL, at every depth.
    if (Object.keys(schema).every((key) => ANNOTATIONS.has(key))) {
      schema.$ref = `#/components/schemas/${ANY_JSON}`;
      return;
    }
    const ref = schema.$ref;
    if (typeof ref === 'string' && ref.startsWith('#/components/schemas/')) {
      const name = ref.slice('#/components/schemas/'.length);
      if (!seen.has(name) && components[name]) {
        seen.add(name);
        walk(components[name]);
      }
    }
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (types.includes('string') && !('format' in schema) && !('enum' in schema) && !('const' in schema)) {
      const own = [schema.pattern, ...((schema.allOf as Array<{ pattern?: unknown }> | undefined) ?? []).map((s) => s.pattern)].filter((x): x is string => typeof x === 'string');
      if (own.length === 0) schema.pattern = NO_NUL;
      else if (own.every(mayMatchNul)) schema.allOf = [...((schema.allOf as unknown[] | undefined) ?? []), { pattern: NO_NUL }];
    }
    if (types.includes('object') && schema.additionalProperties !== false && schema.additionalProperties !== undefined && !('propertyNames' in schema)) {
      schema.propertyNames = { pattern: NO_NUL };
    }
    for (const key of ['items', 'additionalProperties', 'propertyNames', 'contains', 'not', 'if', 'then', 'else']) walk(schema[key]);
    for (const key of ['anyOf', 'oneOf', 'allOf', 'prefixItems']) if (Array.isArray(schema[key])) (schema[key] as unknown[]).forEach(walk);
    for (const key of ['properties', 'patternProperties', 'dependentSchemas']) Object.values((schema[key] as Record<string, unknown> | undefined) ?? {}).forEach(walk);
  };
  for (const item of Object.values(doc.paths ?? {})) {
    for (const op of Object.values(item as Record<string, OpenAPIV3_1.OperationObject>)) {
      if (!op || typeof op !== 'object') continue;
      for (const param of op.parameters ?? []) if ('schema' in param) walk(param.schema);
      const body = op.requestBody as OpenAPIV3_1.RequestBodyObject | undefined;
      for (const media of Object.values(body?.content ?? {})) walk(media.schema);
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

/** The direct voice transport's signalling socket: the frames both ways (docs/voice.md, "Transport direct"). */
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
