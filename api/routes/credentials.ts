import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { Services } from '../../app/services';
import { auditOf, authOf } from '../types';
import { authErrors, ErrorBody, idParam } from '../schemas/common';
import { CreateCredentialBody, Credential, CredentialList, CredentialResources, ListCredentialsQuery } from '../schemas/credentials';

const CredId = idParam('cred');
const tags = ['Credentials'];
const notFound = ErrorBody.meta({ description: 'not_found' });

export const credentialRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'credentials'> }> = async (app, opts) => {
  const credentials = opts.services.credentials;

  app.post('/api/v1/credentials', {
    config: { scope: 'credentials:write' },
    schema: {
      operationId: 'createCredential',
      summary: 'Register a provider credential (the secret is sealed and never returned)',
      tags,
      body: CreateCredentialBody,
      response: {
        201: Credential,
        ...authErrors,
        400: ErrorBody.meta({ description: 'invalid_request (the message names the field), or invalid_url: an llm base_url, a voice url or a telephony sip_uri that breaks the address rules (not https, or a private, loopback or link-local address); the message names the field' }),
      },
    },
    handler: async (request, reply) => reply.code(201).send(await credentials.register(authOf(request).workspaceId, request.body, auditOf(request))),
  });

  app.get('/api/v1/credentials', {
    config: { scope: 'credentials:read' },
    schema: { operationId: 'listCredentials', summary: 'List credentials, newest first (metadata only)', tags, querystring: ListCredentialsQuery, response: { 200: CredentialList, ...authErrors } },
    handler: async (request) => credentials.list(authOf(request).workspaceId, request.query),
  });

  app.get('/api/v1/credentials/:id', {
    config: { scope: 'credentials:read' },
    schema: { operationId: 'getCredential', summary: 'Get a credential (metadata, fingerprint and last 4; never the secret)', tags, params: CredId, response: { 200: Credential, ...authErrors, 404: notFound } },
    handler: async (request) => credentials.get(authOf(request).workspaceId, request.params.id),
  });

  app.get('/api/v1/credentials/:id/resources', {
    config: { scope: 'credentials:read' },
    schema: {
      operationId: 'listCredentialResources',
      summary: 'Ask the provider what the credential unlocks (msgapp: phone numbers; llm: models)',
      tags,
      params: CredId,
      response: {
        200: CredentialResources,
        ...authErrors,
        404: notFound,
        422: ErrorBody.meta({ description: "business_account_required: a msgapp credential registered without business_account_id; provider_refused: the provider refused the credential (a 4xx other than 429: a wrong key, an account it does not own), `provider_status` its HTTP status; invalid_url: the llm base_url breaks the address rules when called (a name resolving to a private address, or to nothing)" }),
        501: ErrorBody.meta({ description: 'not_implemented: voice, telephony and mcp credentials' }),
        502: ErrorBody.meta({ description: "provider_error: the provider failed (5xx, 429) or could not be reached; `message` carries its reason, `provider_status` its HTTP status (0: no answer)" }),
        503: ErrorBody.meta({ description: 'provider_unavailable: no msgapp provider is configured on this server' }),
      },
    },
    handler: async (request) => credentials.resources(authOf(request).workspaceId, request.params.id),
  });
};
