import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { McpServer, type IMcpServer } from '../../db/entities';
import type { SecretBox } from '../../lib/crypto/secret-box';
import { DomainError } from '../errors';
import { newId } from '../../lib/ids';
import { keysetFind } from '../../db/pagination';
import { CredentialRepository } from '../credentials/repository';
import { redactSecret } from '../../lib/crypto/redact';
import { pinnedFetch } from '../../lib/net/pinned-fetch';
import { nonBlankText } from '../../lib/text';
import { checkProviderUrl, systemResolver, UnsafeUrlError, type AddressPolicy, type Resolver } from '../../lib/net/ssrf';

/**
 * Remote MCP tool servers. A workspace registers one (`{name, url, auth?: credential_id,
 * enabled}`); its URL is checked with the webhooks' address rules (https, or plain http
 * only to hosts the operator's allow list names), and every connection goes to the
 * addresses checked then (the SDK transport's `fetch` is pinned). On create and on every
 * change the service connects with the official SDK client (Streamable HTTP, then the
 * older SSE transport), lists the tools and stores them with the outcome (`status`,
 * `last_error`, `checked_at`). Agents enable them with the action `{type: "mcp",
 * server_id, tools?}`; a turn calls a tool through `call` (a deadline, the result capped).
 */
export interface McpToolView {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
  /** The server marks the tool read-only (MCP's `annotations.readOnlyHint`); otherwise it may act outside (a console test stubs it). */
  read_only?: boolean;
}

export interface McpServerView {
  id: string;
  name: string;
  url: string;
  credential_id: string | null;
  enabled: boolean;
  status: 'ok' | 'error' | 'disabled';
  tools: McpToolView[];
  last_error: string | null;
  checked_at: string | null;
  created_at: string;
  updated_at: string;
}

const McpServerFields = {
  name: nonBlankText(100),
  // An absolute URI (the document says so); the address rules are the server's (400 invalid_url), as for webhooks.
  url: z
    .string()
    .min(1)
    .max(2000)
    .meta({ format: 'uri', description: 'The MCP server (streamable HTTP): https, or plain http to a host in the operator\'s CONCIERGE_WEBHOOK_ALLOW_CIDRS' }),
  auth: z.string().regex(/^cred_[0-9a-f]{24}$/).nullable().meta({ description: 'A credential of provider `mcp`: its bearer token is sent as Authorization' }),
  enabled: z.boolean(),
};
export const McpServerBody = z.object({ ...McpServerFields, auth: McpServerFields.auth.optional(), enabled: McpServerFields.enabled.default(true) }).strict();
/** A change: only the fields sent (no defaults: a PATCH of the name never re-enables a disabled server). */
export const McpServerPatch = z.object(McpServerFields).partial().strict();

/**
 * What a server's tool list may weigh. The list is stored, listed by the API and sent to the
 * model on every turn, so a server may not make it as large as it likes: a listing over any
 * of these limits is refused whole (status error, last_error says which limit), never cut.
 */
export const MAX_TOOLS = 100;
/** Bytes of one tool's input_schema, as JSON. */
export const MAX_TOOL_SCHEMA_BYTES = 16 * 1024;
/** Bytes of the whole list (names, descriptions and schemas), as JSON. */
export const MAX_TOOLS_BYTES = 256 * 1024;
/** Bytes of any one answer of the server (the SDK's HTTP calls): a listing or a tool's result. */
export const MAX_MCP_RESPONSE_BYTES = 2 * 1024 * 1024;
/** Characters of a tool's result handed to the model. */
export const MAX_RESULT_CHARS = 8_000;

/** What a key may do with credentials while it changes servers: attaching (or keeping) one needs credentials:write. */
export interface McpWriteAccess {
  mayUseCredentials: boolean;
}

/** The origin a credential is bound to: scheme, host and port of the server URL. */
export const originOf = (url: string): string => new URL(url).origin;

const view = (r: IMcpServer): McpServerView => ({
  id: r.id,
  name: r.name,
  url: r.url,
  credential_id: r.credentialId ?? null,
  enabled: r.enabled,
  status: r.status,
  tools: r.tools,
  last_error: r.lastError ?? null,
  checked_at: r.checkedAt ? new Date(r.checkedAt).toISOString() : null,
  created_at: new Date(r.createdAt).toISOString(),
  updated_at: new Date(r.updatedAt).toISOString(),
});

export class McpService {
  constructor(
    private readonly em: EntityManager,
    private readonly box: SecretBox,
    private readonly opts: { policy: AddressPolicy; resolve?: Resolver; timeoutMs?: number },
    /** Default: the one repository of credentials (benches build the service on its own). */
    private readonly credentialRows: Pick<CredentialRepository, 'bindMcpCredentialOrigin' | 'findMcpCredential'> = new CredentialRepository(),
  ) {}

  async create(workspaceId: string, body: z.infer<typeof McpServerBody>, access: McpWriteAccess): Promise<McpServerView> {
    if (body.auth && !access.mayUseCredentials) throw credentialScope(`auth: attaching credential ${body.auth}`);
    await this.checkInput(workspaceId, body.url, body.auth ?? null);
    const em = this.em.fork();
    const row = em.create(McpServer, {
      id: newId('mcp'),
      workspaceId,
      name: body.name,
      url: body.url,
      credentialId: body.auth ?? null,
      enabled: body.enabled,
      status: body.enabled ? 'error' : 'disabled',
      tools: [],
      lastError: body.enabled ? 'not checked yet' : null,
      checkedAt: null,
      createdAt: new Date(),
      updatedAt: new Date(),
    });
    await em.flush();
    return this.refresh(workspaceId, row.id);
  }

  async update(workspaceId: string, id: string, patch: z.infer<typeof McpServerPatch>, access: McpWriteAccess): Promise<McpServerView> {
    const em = this.em.fork();
    const row = await em.findOne(McpServer, { id, workspaceId });
    if (!row) throw notFound(id);
    const url = patch.url ?? row.url;
    let auth = patch.auth === undefined ? (row.credentialId ?? null) : patch.auth;
    // A new origin is another party: the credential stays with the origin it was bound to.
    if (patch.auth === undefined && auth && patch.url !== undefined && sameOrigin(url, row.url) === false) auth = null;
    // Pointing a credential somewhere (attaching it, or keeping it while the URL changes) is a use of the credential.
    if (auth && (patch.auth !== undefined || (patch.url !== undefined && patch.url !== row.url)) && !access.mayUseCredentials) {
      throw credentialScope(patch.auth !== undefined ? `auth: attaching credential ${auth}` : `url: keeping credential ${auth} attached while the URL changes`);
    }
    await this.checkInput(workspaceId, url, auth);
    Object.assign(row, { name: patch.name ?? row.name, url, credentialId: auth, enabled: patch.enabled ?? row.enabled, updatedAt: new Date() });
    await em.flush();
    return this.refresh(workspaceId, id);
  }

  async get(workspaceId: string, id: string): Promise<McpServerView> {
    const row = await this.em.fork().findOne(McpServer, { id, workspaceId });
    if (!row) throw notFound(id);
    return view(row);
  }

  async list(workspaceId: string, q: { limit: number; cursor?: string }): Promise<{ mcp_servers: McpServerView[]; next_cursor: string | null }> {
    const page = await keysetFind(this.em.fork(), McpServer, { workspaceId }, q);
    return { mcp_servers: page.rows.map(view), next_cursor: page.next_cursor };
  }

  /** Connects, lists the tools and stores the outcome (a disabled server is not contacted). */
  async refresh(workspaceId: string, id: string): Promise<McpServerView> {
    const em = this.em.fork();
    const row = await em.findOneOrFail(McpServer, { id, workspaceId });
    if (!row.enabled) {
      Object.assign(row, { status: 'disabled', lastError: null, updatedAt: new Date() });
    } else {
      const token = await this.tokenOf(row).catch(() => null);
      try {
        const listed = await this.withClient(row, token, async (client) => (await client.listTools()).tools);
        const tools = listed.map((t) => ({
          name: t.name,
          description: (t.description ?? '').slice(0, 1000),
          input_schema: (t.inputSchema ?? { type: 'object' }) as Record<string, unknown>,
          ...(t.annotations?.readOnlyHint === true ? { read_only: true } : {}),
        }));
        checkToolList(tools);
        Object.assign(row, { status: 'ok', lastError: null, tools });
      } catch (err) {
        Object.assign(row, { status: 'error', lastError: reason(err, token) });
      }
      row.checkedAt = new Date();
      row.updatedAt = new Date();
    }
    await em.flush();
    return view(row);
  }

  /** The enabled servers' tools an agent's actions name, for a turn. */
  async toolsFor(workspaceId: string, actions: Array<{ server_id: string; tools?: string[] }>): Promise<Array<{ serverId: string; tool: McpToolView }>> {
    if (!actions.length) return [];
    const rows = await this.em.fork().find(McpServer, { workspaceId, id: { $in: actions.map((a) => a.server_id) }, enabled: true });
    const out: Array<{ serverId: string; tool: McpToolView }> = [];
    for (const a of actions) {
      const row = rows.find((r) => r.id === a.server_id);
      // A list stored before the limits existed may hold a schema over them: it is not sent to the model on every turn.
      for (const tool of row?.tools ?? []) if ((!a.tools || a.tools.includes(tool.name)) && schemaBytes(tool) <= MAX_TOOL_SCHEMA_BYTES) out.push({ serverId: a.server_id, tool });
    }
    return out;
  }

  /** Calls one tool: the text of its result (capped), or why it failed; never throws for the tool's own failure. */
  async call(workspaceId: string, serverId: string, name: string, args: Record<string, unknown>): Promise<{ ok: boolean; output: string }> {
    const row = await this.em.fork().findOne(McpServer, { id: serverId, workspaceId, enabled: true });
    if (!row) return { ok: false, output: `MCP server ${serverId} is not available` };
    const token = await this.tokenOf(row).catch(() => null);
    try {
      const result = await this.withClient(row, token, (client) => client.callTool({ name, arguments: args }, undefined, { timeout: this.opts.timeoutMs ?? 20_000 }));
      const parts = ((result as { content?: Array<{ type: string; text?: string }> }).content ?? []).map((c) => (c.type === 'text' ? (c.text ?? '') : `[${c.type}]`));
      // A server echoing the token must not hand it to the model (nor to the conversation's timeline).
      const text = redactSecret(parts.join('\n'), token, { maxLength: MAX_RESULT_CHARS });
      return { ok: !(result as { isError?: boolean }).isError, output: text };
    } catch (err) {
      return { ok: false, output: `the tool call failed: ${reason(err, token)}` };
    }
  }

  private async checkInput(workspaceId: string, url: string, auth: string | null): Promise<void> {
    try {
      await checkProviderUrl(url, this.opts.policy, this.opts.resolve ?? systemResolver, { resolveNames: false });
    } catch (err) {
      if (err instanceof UnsafeUrlError) throw new DomainError('invalid_url', `url: ${err.message}`);
      throw err;
    }
    if (!auth) return;
    const em = this.em.fork();
    const cred = await this.credentialRows.findMcpCredential(em, workspaceId, auth);
    // As an agent naming a missing llm credential: the named resource is not there.
    if (!cred) throw new DomainError('credential_not_found', `auth: no mcp credential '${auth}' in this workspace`);
    // Bound to the origin of the first server it is attached to (unless registered with one), atomically:
    // two servers attaching it at once cannot both bind it.
    const origin = originOf(url);
    const bound = await this.credentialRows.bindMcpCredentialOrigin(em, cred.id, origin);
    if (bound !== origin) {
      throw new DomainError('invalid_request', `auth: credential ${cred.id} is bound to ${bound ?? 'another origin'}, not ${origin}: its token is sent to that origin only (register another credential for this server)`);
    }
  }

  /** The bearer token of the server's credential, opened only for the origin it is bound to; null without one. */
  private async tokenOf(row: IMcpServer): Promise<string | null> {
    if (!row.credentialId) return null;
    const cred = await this.credentialRows.findMcpCredential(this.em.fork(), row.workspaceId, row.credentialId);
    if (!cred) throw new Error(`credential ${row.credentialId} is gone`);
    if (cred.origin !== originOf(row.url)) throw new Error(`credential ${cred.id} is bound to ${cred.origin ?? 'no origin'}, not this server's; it was not sent`);
    return this.box.open(cred.secretSealed, cred.id);
  }

  /** A connected client (Streamable HTTP, then SSE), pinned to the addresses checked now, closed after `fn`. */
  private async withClient<T>(row: IMcpServer, token: string | null, fn: (client: Client) => Promise<T>): Promise<T> {
    const { Client, SSEClientTransport, StreamableHTTPClientTransport } = await loadMcpClient();
    const { addresses } = await checkProviderUrl(row.url, this.opts.policy, this.opts.resolve ?? systemResolver);
    const pinned = pinnedFetch(addresses, { maxBytes: MAX_MCP_RESPONSE_BYTES });
    // Every request of one connection attempt ends with it: a transport that gives up on a response
    // without reading it (the SSE transport, on a body that is not an event stream) leaves no socket open.
    let lifetime = new AbortController();
    const fetch: typeof globalThis.fetch = (input, init = {}) => pinned(input, { ...init, signal: init.signal ? AbortSignal.any([init.signal, lifetime.signal]) : lifetime.signal });
    const headers: Record<string, string> = {};
    // The row names a credential that could not be opened for this origin: say why, never call without it silently.
    if (row.credentialId && !token) await this.tokenOf(row);
    if (token) headers.authorization = `Bearer ${token}`;
    const url = new URL(row.url);
    const timeout = this.opts.timeoutMs ?? 20_000;
    let failure: unknown = null;
    for (const make of [
      () => new StreamableHTTPClientTransport(url, { fetch, requestInit: { headers } }),
      () => new SSEClientTransport(url, { fetch, requestInit: { headers } }),
    ]) {
      const client = new Client({ name: 'concierge', version: '1.0.0' });
      lifetime = new AbortController();
      try {
        await client.connect(make(), { timeout });
      } catch (err) {
        failure ??= err;
        await client.close().catch(() => undefined);
        lifetime.abort();
        continue;
      }
      try {
        return await fn(client);
      } finally {
        await client.close().catch(() => undefined);
        lifetime.abort();
      }
    }
    throw new Error(`could not connect (Streamable HTTP, then SSE): ${reason(failure)}`);
  }
}

const notFound = (id: string) => new DomainError('not_found', `No MCP server with id '${id}' in this workspace`);
/** Why a call failed, for last_error and the model: the server's token (and its encodings) redacted before the cut. */
const reason = (err: unknown, token: string | null = null) => redactSecret(err instanceof Error ? err.message : String(err), token, { maxLength: 2000 }).replace(/\s+/g, ' ').slice(0, 500);
/** True/false when both parse; null when one does not (the URL check refuses it then). */
const sameOrigin = (a: string, b: string): boolean | null => {
  try {
    return originOf(a) === originOf(b);
  } catch {
    return null;
  }
};
const credentialScope = (what: string) =>
  new DomainError('insufficient_scope', `${what} needs the 'credentials:write' scope as well as 'mcp_servers:write'`, { required_scope: 'credentials:write' });

const schemaBytes = (t: McpToolView) => Buffer.byteLength(JSON.stringify(t.input_schema ?? {}));

/** A tool list within the limits, or an Error naming the tool and the limit (it becomes last_error). */
function checkToolList(tools: McpToolView[]): void {
  if (tools.length > MAX_TOOLS) throw new Error(`tools: the server lists ${tools.length} tools; at most ${MAX_TOOLS} are accepted`);
  let total = 2;
  for (const [i, t] of tools.entries()) {
    const schema = schemaBytes(t);
    if (schema > MAX_TOOL_SCHEMA_BYTES) throw new Error(`tools[${i}] (${t.name.slice(0, 64)}).input_schema: ${schema} bytes; at most ${MAX_TOOL_SCHEMA_BYTES} are accepted`);
    total += Buffer.byteLength(JSON.stringify(t)) + 1;
  }
  if (total > MAX_TOOLS_BYTES) throw new Error(`tools: the list is ${total} bytes; at most ${MAX_TOOLS_BYTES} are accepted`);
}

/**
 * The MCP client library, loaded at the first connection rather than with this module: a large module graph that a
 * process which never calls a tool server (the API, most tests) need not load.
 */
function importMcpClient() {
  return Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/sse.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
  ]).then(([index, sse, streamable]) => ({
    Client: index.Client,
    SSEClientTransport: sse.SSEClientTransport,
    StreamableHTTPClientTransport: streamable.StreamableHTTPClientTransport,
  }));
}
let mcpClient: ReturnType<typeof importMcpClient> | undefined;
const loadMcpClient = () => (mcpClient ??= importMcpClient());
type Client = InstanceType<Awaited<ReturnType<typeof importMcpClient>>['Client']>;
