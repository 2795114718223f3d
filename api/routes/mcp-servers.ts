import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { z } from 'zod';
import { McpServerBody, McpServerPatch } from '../../domain/mcp/servers';
import type { Services } from '../../app/services';
import { authOf } from '../types';
import { authErrors, Cursor, ErrorBody, idParam } from '../schemas/common';

const tags = ['MCP servers'];
const Id = idParam('mcp');

const McpServer = z
  .object({
    id: z.string(),
    name: z.string(),
    url: z.string(),
    credential_id: z.string().nullable(),
    enabled: z.boolean(),
    status: z.enum(['ok', 'error', 'disabled']).meta({ description: 'ok: connected and its tools listed at checked_at; error: see last_error; disabled: not contacted' }),
    tools: z.array(
      z.object({
        name: z.string(),
        description: z.string(),
        input_schema: z.record(z.string(), z.unknown()),
        read_only: z.boolean().optional().meta({ description: "true when the server marks the tool read-only (MCP annotations.readOnlyHint); any other tool may act outside, and the console's Try it records its calls without running them" }),
      }),
    ),
    last_error: z.string().nullable(),
    checked_at: z.string().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'McpServer' });
const McpServerList = z.object({ mcp_servers: z.array(McpServer), next_cursor: z.string().nullable() }).meta({ id: 'McpServerList' });
const ListQuery = z.object({ limit: z.coerce.number().int().min(1).max(100).default(20), cursor: Cursor.optional() });
const badInput = ErrorBody.meta({
  description:
    "invalid_request (a field named; `auth`: a credential bound to another origin: a credential's token goes only to the origin of the first server it was attached to, or the origin it was registered with); invalid_url: the URL breaks the address rules (https, or http to an allow-listed host only)",
});
const forbidden = ErrorBody.meta({
  description:
    "insufficient_scope: the key lacks the route's scope, or sets `auth` (or changes `url` while a credential stays attached) without 'credentials:write'; `required_scope` names the missing scope. Changing `url` to another origin detaches the credential instead (credential_id null)",
});
const credentialNotFound = ErrorBody.meta({ description: 'credential_not_found: `auth` names no mcp credential of this workspace' });

/** Attaching a credential to a server (or keeping it there while the URL changes) needs credentials:write. */
const access = (request: { auth: Parameters<typeof authOf>[0]['auth'] }) => ({ mayUseCredentials: authOf(request).scopes.has('credentials:write') });

/** Remote MCP tool servers (scopes mcp_servers:read / mcp_servers:write). */
export const mcpServerRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'mcp'> }> = async (app, opts) => {
  const mcp = opts.services.mcp;
  app.get('/api/v1/mcp-servers', {
    config: { scope: 'mcp_servers:read' },
    schema: { operationId: 'listMcpServers', summary: 'Registered MCP servers, newest first', tags, querystring: ListQuery, response: { 200: McpServerList, ...authErrors } },
    handler: async (request) => mcp.list(authOf(request).workspaceId, request.query),
  });
  app.get('/api/v1/mcp-servers/:id', {
    config: { scope: 'mcp_servers:read' },
    schema: { operationId: 'getMcpServer', summary: 'An MCP server, its tools and its last check', tags, params: Id, response: { 200: McpServer, ...authErrors, 404: ErrorBody } },
    handler: async (request) => mcp.get(authOf(request).workspaceId, request.params.id),
  });
  app.post('/api/v1/mcp-servers', {
    config: { scope: 'mcp_servers:write' },
    schema: {
      operationId: 'createMcpServer',
      summary: 'Register an MCP server: connects, lists its tools and stores them (201 even when the check fails: status error, last_error)',
      tags,
      body: McpServerBody,
      response: { 201: McpServer, ...authErrors, 400: badInput, 403: forbidden, 404: credentialNotFound },
    },
    handler: async (request, reply) => reply.code(201).send(await mcp.create(authOf(request).workspaceId, request.body, access(request))),
  });
  app.patch('/api/v1/mcp-servers/:id', {
    config: { scope: 'mcp_servers:write' },
    schema: { operationId: 'updateMcpServer', summary: 'Change an MCP server; it is checked again (tools listed anew)', tags, params: Id, body: McpServerPatch, response: { 200: McpServer, ...authErrors, 400: badInput, 403: forbidden, 404: ErrorBody.meta({ description: 'not_found: no such MCP server; credential_not_found: `auth` names no mcp credential of this workspace' }) } },
    handler: async (request) => mcp.update(authOf(request).workspaceId, request.params.id, request.body, access(request)),
  });
};
