import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { z } from 'zod';
import type { Services } from '../../../app/services';
import { DEFAULT_SCOPES, SCOPES, type Scope } from '../../../domain/keys/scopes';
import { auditOf, userOf } from '../../types';
import { ErrorBody } from '../../schemas/common';
import { ConsoleKeyList, ConsoleKeyWithValue, CreateKeyBody, KeyId, KeyScopes, KeyValue, sessionErrors } from '../../schemas/console';

const tags = ['Console: API keys'];
const notFound = ErrorBody.meta({ description: 'not_found: no such key in this workspace' });
const forbidden = ErrorBody.meta({ description: "forbidden: only an owner or admin manages keys; csrf_failed: without the session's X-CSRF-Token or from another origin" });
const revoked = ErrorBody.meta({ description: 'key_revoked: the key is deleted' });

/** The key console (shared/spec/DECISIONS.md): list, create (value once), copy (sealed value, audited), rotate, delete. */
export const consoleKeyRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'apiKeys'> }> = async (app, opts) => {
  const { apiKeys } = opts.services;

  app.get('/api/console/key-scopes', {
    config: { console: 'session', permission: 'manageKeys' },
    schema: { operationId: 'consoleListKeyScopes', summary: 'Every scope a key may hold, with its label; `default` marks those a new key starts with', tags, response: { 200: KeyScopes, ...sessionErrors, 403: forbidden } },
    handler: async () => ({ scopes: (Object.keys(SCOPES) as Scope[]).map((scope) => ({ scope, label: SCOPES[scope], default: DEFAULT_SCOPES.includes(scope) })) }),
  });

  app.get('/api/console/keys', {
    config: { console: 'session', permission: 'manageKeys' },
    schema: { operationId: 'consoleListKeys', summary: "The workspace's API keys: name, prefix, scopes, created, last used; never a value", tags, response: { 200: ConsoleKeyList, ...sessionErrors, 403: forbidden } },
    handler: async (request) => ({ keys: await apiKeys.list(userOf(request).workspaceId) }),
  });

  app.post('/api/console/keys', {
    config: { console: 'session', permission: 'manageKeys' },
    schema: { operationId: 'consoleCreateKey', summary: 'Create a key: its full value is in this answer, once (and kept sealed for copy)', tags, body: CreateKeyBody, response: { 201: ConsoleKeyWithValue, ...sessionErrors, 403: forbidden } },
    handler: async (request, reply) => {
      const scopes = (request.body.scopes ?? DEFAULT_SCOPES) as Scope[];
      return reply.code(201).send(await apiKeys.create(userOf(request).workspaceId, request.body.name, [...new Set(scopes)], auditOf(request)));
    },
  });

  app.post('/api/console/keys/:id/copy', {
    config: { console: 'session', permission: 'manageKeys' },
    schema: {
      operationId: 'consoleCopyKey',
      summary: "The key's full value, for the clipboard (audited as key.copied)",
      tags,
      params: KeyId,
      response: { 200: KeyValue, ...sessionErrors, 403: forbidden, 404: notFound, 409: ErrorBody.meta({ description: 'key_not_copyable: made before values were kept for copying (rotate it); key_revoked: deleted' }) },
    },
    handler: async (request) => apiKeys.copy(userOf(request).workspaceId, request.params.id, auditOf(request)),
  });

  app.post('/api/console/keys/:id/rotate', {
    config: { console: 'session', permission: 'manageKeys' },
    schema: { operationId: 'consoleRotateKey', summary: 'A new value for the key, shown once; the old value answers 401 revoked_api_key at once', tags, params: KeyId, response: { 200: ConsoleKeyWithValue, ...sessionErrors, 403: forbidden, 404: notFound, 409: revoked } },
    handler: async (request) => apiKeys.rotate(request.params.id, { workspaceId: userOf(request).workspaceId, ctx: auditOf(request) }),
  });

  app.delete('/api/console/keys/:id', {
    config: { console: 'session', permission: 'manageKeys' },
    schema: { operationId: 'consoleDeleteKey', summary: 'Delete (revoke) the key: requests with it answer 401 revoked_api_key at once', tags, params: KeyId, response: { 204: z.null().meta({ description: 'Deleted' }), ...sessionErrors, 403: forbidden, 404: notFound } },
    handler: async (request, reply) => {
      await apiKeys.delete(request.params.id, { workspaceId: userOf(request).workspaceId, ctx: auditOf(request) });
      return reply.code(204).send(null);
    },
  });
};

