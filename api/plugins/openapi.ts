import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import swagger from '@fastify/swagger';
import { jsonSchemaTransform, jsonSchemaTransformObject } from '@fastify/type-provider-zod';
import type { OpenAPIV3_1 } from 'openapi-types';
import { z } from 'zod';
import { DELIVERY_HEADERS, WEBHOOK_EVENTS } from '../schemas/webhooks';

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
404 \`not_found\`. 5xx bodies are generic and carry the request id (also in the \`X-Request-Id\` header).`;

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
  doc.webhooks = webhookPayloads();
  return doc;
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
