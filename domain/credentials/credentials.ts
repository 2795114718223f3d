import { recordAudit, SYSTEM_CONTEXT, type AuditContext } from '../audit/audit-log';
import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import type { SealedSecrets, SecretBox } from '../../lib/crypto/secret-box';
import { Credential, type CredentialProvider, type ICredential } from '../../db/entities';
import { WorkspaceRepository } from '../workspaces/repository';
import { DomainError, notFound } from '../errors';
import { newId } from '../../lib/ids';
import { LlmError, type ModelLister } from '../ports/llm';
import { redactSecret } from '../../lib/crypto/redact';
import { ProviderError, type MsgappProvider } from '../ports/msgapp';
import { pinnedFetch } from '../../lib/net/pinned-fetch';
import { checkProviderUrl, systemResolver, UnsafeUrlError, type AddressPolicy, type Resolver } from '../../lib/net/ssrf';
import { keysetFind } from '../../db/pagination';
import { CredentialRepository } from './repository';
import { nonBlankText, notBlank } from '../../lib/text';

/** The base URL of an llm credential registered without one. */
export const DEFAULT_LLM_BASE_URL = 'https://api.openai.com/v1';

/**
 * Each provider's credential has exactly one secret field (sealed; never read back) and
 * some non-secret settings (returned as `settings`). A voice provider's `api_key` is the
 * public half of a LiveKit-style key pair (it names the key; `api_secret` signs), and a SIP
 * trunk's `username` is no secret either.
 */
export const SECRET_FIELD = {
  msgapp: 'access_token',
  llm: 'api_key',
  voice: 'api_secret',
  telephony: 'password',
  mcp: 'bearer_token',
} as const satisfies Record<CredentialProvider, string>;

const Name = nonBlankText(200).meta({ description: 'Your label for the credential', example: 'Support line token' });
/** A write-only secret; `value` its own rules where it has some (e.g. HeaderSecret). */
const Secret = (description: string, value: z.ZodString = z.string().max(8192)) =>
  notBlank(value, 'must not be empty').meta({ description: `${description}. Write-only: sealed at rest, never returned`, writeOnly: true });
/** A secret sent in an HTTP header (a bearer token): visible ASCII only, as a header value must be (empty is left to the blank check). */
const HeaderSecret = (description: string) =>
  Secret(description, z.string().max(8192).regex(/^[\x21-\x7e]*$/, 'must be visible ASCII without spaces (it is sent in an HTTP header)'));
const HttpUrl = (protocols: RegExp) => z.url({ protocol: protocols }).max(2048);

/** The body of `POST /api/v1/credentials` (and of the admin CLI's `credential create`), one shape per provider. */
export const CredentialInput = z.discriminatedUnion(
  'provider',
  [
    z
      .object({
        name: Name,
        provider: z.literal('msgapp'),
        access_token: HeaderSecret('The Cloud API access token (a system user token)'),
        business_account_id: z
          .string()
          .regex(/^\d{1,30}$/, 'must be a WhatsApp Business Account id (digits)')
          .optional()
          .meta({ description: 'The WhatsApp Business Account (WABA) id; needed to list its phone numbers' }),
      })
      .strict()
      .meta({ id: 'MsgappCredentialInput' }),
    z
      .object({
        name: Name,
        provider: z.literal('llm'),
        api_key: HeaderSecret('The API key, sent as a bearer token'),
        base_url: HttpUrl(/^https?$/)
          .optional()
          .meta({ description: `An OpenAI-compatible server, with or without /v1; default ${DEFAULT_LLM_BASE_URL}. https, or plain http to a host in the operator's CONCIERGE_WEBHOOK_ALLOW_CIDRS` }),
      })
      .strict()
      .meta({ id: 'LlmCredentialInput' }),
    z
      .object({
        name: Name,
        provider: z.literal('voice'),
        url: HttpUrl(/^(wss?|https?)$/).meta({ description: 'The voice server (LiveKit-style), wss:// or https://' }),
        api_key: nonBlankText(200).meta({ description: 'The public key id (not secret: it names the key pair)' }),
        api_secret: Secret('The key secret that signs access tokens'),
      })
      .strict()
      .meta({ id: 'VoiceCredentialInput' }),
    z
      .object({
        name: Name,
        provider: z.literal('telephony'),
        username: nonBlankText(200).meta({ description: 'The SIP trunk username' }),
        password: Secret('The SIP trunk password'),
        sip_uri: z
          .string()
          .max(2048)
          .regex(/^sips?:[^\s]+$/, 'must be a sip: or sips: URI')
          .optional()
          .meta({ description: "The trunk, e.g. sip:trunk.example.com or sip:trunk.example.com:5080;transport=udp (dial-out speaks SIP over UDP). With from_number, the workspace's dial-out calls go through this trunk instead of the installation's" }),
        from_number: z
          .string()
          .regex(/^\+[1-9][0-9]{6,14}$/, 'must be a phone number in E.164 (+14155550100)')
          .optional()
          .meta({ description: "The caller id the trunk's calls present (E.164); with sip_uri, makes this the workspace's trunk" }),
      })
      .strict()
      .meta({ id: 'TelephonyCredentialInput' }),
    z
      .object({
        name: Name,
        provider: z.literal('mcp'),
        bearer_token: HeaderSecret('Sent as `Authorization: Bearer` to an MCP server'),
        origin: HttpUrl(/^https?$/)
          .optional()
          .meta({ description: 'The origin (scheme, host, port) of the MCP server the token is for: it is sent there only. Default: the origin of the first server it is attached to' }),
      })
      .strict()
      .meta({ id: 'McpCredentialInput' }),
  ],
  { error: 'must be one of msgapp, llm, voice, telephony, mcp' },
);
export type CredentialInput = z.infer<typeof CredentialInput>;

export interface CredentialView {
  id: string;
  name: string;
  provider: CredentialProvider;
  settings: Record<string, string>;
  /** Which field of the input is the sealed secret. */
  secret_field: string;
  /** The secret's last four characters; null for secrets under 16 characters (a password), where four would say too much. */
  last4: string | null;
  /** Keyed hash of the secret: equal for the same secret registered twice, useless to recover it. */
  fingerprint: string;
  created_at: string;
}

export type CredentialResource =
  | { type: 'phone_number'; id: string; display_phone_number: string; verified_name: string | null; quality_rating: string | null }
  | { type: 'model'; id: string; owned_by: string | null; created_at: string | null };

export interface CredentialServiceOptions {
  /** The msgapp provider (Graph API or the sandbox); null: msgapp resources answer 503. */
  msgapp?: MsgappProvider | null;
  /** Which addresses an llm credential's base_url may reach (the webhooks' SSRF policy). */
  policy?: AddressPolicy;
  resolve?: Resolver;
  /** Extra CAs trusted for https providers (tests, self-hosted servers); the webhooks' setting. */
  ca?: string | Buffer | Array<string | Buffer>;
  /** Deadline of one provider call listing resources. Default 15 s. */
  providerTimeoutMs?: number;
  /** How an llm credential's models are listed (app/services.ts: an OpenAI-compatible server's); none: listing answers 503. */
  listModels?: ModelLister | null;
}

const LAST4_MIN_LENGTH = 16;

/**
 * Provider credentials, sealed with the service's encryption key and bound to their id.
 * Reads return metadata, a fingerprint and (for long secrets) the last four characters;
 * only the activities that call a provider, and `resources` (which asks the provider what
 * the credential unlocks), open a secret. Provider errors are passed on with the secret
 * redacted.
 */
export class CredentialService {
  /** Provider credentials sealed with the service's key (the key is checked against them at start-up, before any service exists). */
  static async sealedCredentials(em: EntityManager): Promise<SealedSecrets> {
    const count = await em.count(Credential);
    const [row] = count ? await em.find(Credential, {}, { fields: ['id', 'secretSealed'], limit: 1 }) : [];
    return { count, sample: row ? { id: row.id, sealed: row.secretSealed } : null };
  }

  private readonly opts: Required<Omit<CredentialServiceOptions, 'msgapp' | 'ca' | 'listModels'>> & Pick<CredentialServiceOptions, 'ca'> & { msgapp: MsgappProvider | null; listModels: ModelLister | null };

  constructor(
    private readonly em: EntityManager,
    private readonly box: SecretBox,
    opts: CredentialServiceOptions = {},
    /** Default: the one repository of credentials (tests build the service on its own). */
    private readonly rows: Pick<CredentialRepository, 'openMsgappToken'> = new CredentialRepository(),
    /** Default: the one repository of workspaces (tests build the service on its own). */
    private readonly workspaces: Pick<WorkspaceRepository, 'workspaceExists'> = new WorkspaceRepository(),
  ) {
    this.opts = {
      msgapp: opts.msgapp ?? null,
      listModels: opts.listModels ?? null,
      policy: opts.policy ?? { allow: null },
      resolve: opts.resolve ?? systemResolver,
      providerTimeoutMs: opts.providerTimeoutMs ?? 15_000,
      ca: opts.ca,
    };
  }

  /** Registers a credential (the API's POST and the admin CLI): input validated against CredentialInput. */
  async register(workspaceId: string, raw: unknown, ctx: AuditContext = SYSTEM_CONTEXT): Promise<CredentialView> {
    const parsed = CredentialInput.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const field = issue.path.join('.') || (issue.code === 'invalid_union' ? 'provider' : 'body');
      throw new DomainError('invalid_request', `${field}: ${issue.message}`);
    }
    const input = parsed.data;
    const field = SECRET_FIELD[input.provider];
    const secret = (input as Record<string, string>)[field];
    const settings: Record<string, string> = {};
    for (const [k, v] of Object.entries(input)) if (k !== 'name' && k !== 'provider' && k !== field && typeof v === 'string') settings[k] = v;
    // Stored as the bare origin, as it is compared with a server's (domain/mcp/servers.ts).
    if (input.provider === 'mcp' && input.origin) settings.origin = new URL(input.origin).origin;
    if (input.provider === 'llm') {
      settings.base_url ??= DEFAULT_LLM_BASE_URL;
      await this.checkBaseUrl(settings.base_url, { resolveNames: false }).catch((err: unknown) => {
        throw err instanceof UnsafeUrlError ? new DomainError('invalid_url', `base_url: ${err.reason}`) : err;
      });
    }
    // Voice and SIP endpoints get the same address rules before anything connects to them (an IP
    // literal is judged now; a name is checked again by whatever connects, as for llm base_url).
    if (input.provider === 'voice') await this.checkEndpoint('url', httpFormOfWs(input.url));
    if (input.provider === 'telephony' && input.sip_uri) await this.checkEndpoint('sip_uri', httpsFormOfSip(input.sip_uri));
    const em = this.em.fork();
    if (!(await this.workspaces.workspaceExists(em, workspaceId))) throw new DomainError('not_found', `No workspace with id '${workspaceId}'`);
    const id = newId('cred');
    const hint = this.hint(secret);
    await em.transactional(async (tx) => {
      await tx.insert(Credential, { id, workspaceId, provider: input.provider, name: input.name, settings, secretSealed: this.box.seal(secret, id), ...hint });
      await recordAudit(tx, ctx, { workspaceId, action: 'credential.added', target: { type: 'credential', id }, details: { name: input.name, provider: input.provider } });
    });
    return this.get(workspaceId, id);
  }

  /** A msgapp access token (the form tests and benchmarks use; the CLI and the API go through `register`). */
  create(workspaceId: string, _kind: 'msgapp_access_token', name: string, secret: string): Promise<CredentialView> {
    return this.register(workspaceId, { name, provider: 'msgapp', access_token: secret });
  }

  async get(workspaceId: string, id: string): Promise<CredentialView> {
    const em = this.em.fork();
    const row = await em.findOne(Credential, { id, workspaceId });
    if (!row) throw notFound('credential', id);
    return this.view(em, row);
  }

  async list(workspaceId: string, q: { limit: number; cursor?: string; provider?: CredentialProvider }): Promise<{ credentials: CredentialView[]; next_cursor: string | null }> {
    const em = this.em.fork();
    const page = await keysetFind(em, Credential, q.provider ? { workspaceId, provider: q.provider } : { workspaceId }, q);
    const credentials: CredentialView[] = [];
    for (const row of page.rows) credentials.push(await this.view(em, row));
    return { credentials, next_cursor: page.next_cursor };
  }

  /** What the credential unlocks, as its provider says now: a msgapp account's numbers, an LLM server's models. */
  async resources(workspaceId: string, id: string): Promise<{ credential_id: string; provider: CredentialProvider; resources: CredentialResource[] }> {
    const em = this.em.fork();
    const row = await em.findOne(Credential, { id, workspaceId });
    if (!row) throw notFound('credential', id);
    const out = (resources: CredentialResource[]) => ({ credential_id: row.id, provider: row.provider, resources });
    switch (row.provider) {
      case 'msgapp':
        return out(await this.msgappNumbers(row));
      case 'llm':
        return out(await this.llmModels(row));
      case 'voice':
        throw new DomainError('not_implemented', 'Listing what a voice credential unlocks is not built yet: it arrives with the voice channel (rooms and SIP trunks)');
      case 'telephony':
        throw new DomainError('not_implemented', 'Listing what a telephony credential unlocks is not built yet: SIP trunks have no standard listing API; the numbers are configured on the trunk');
      case 'mcp':
        throw new DomainError('not_implemented', 'Listing what an mcp credential unlocks is not built here: an MCP server lists its own tools (GET /api/v1/mcp-servers/{id})');
    }
  }

  /** Whether the workspace has a msgapp credential with this id (nothing is opened). */
  async hasMsgappToken(workspaceId: string, id: string): Promise<boolean> {
    return (await this.em.fork().count(Credential, { id, workspaceId, provider: 'msgapp' })) > 0;
  }

  /** Whether the workspace has an llm credential with this id (nothing is opened). */
  async hasLlmCredential(workspaceId: string, id: string): Promise<boolean> {
    return (await this.em.fork().count(Credential, { id, workspaceId, provider: 'llm' })) > 0;
  }

  /**
   * The endpoint of a workspace's own llm credential, for an agent's turns: its base_url
   * checked against the SSRF policy now and the connection pinned to what was checked (as
   * for listing its models), its key opened. Null when the workspace has no such credential.
   */
  async llmEndpoint(workspaceId: string, id: string): Promise<{ baseUrl: string; apiKey: string; fetch: typeof fetch } | null> {
    const row = await this.em.fork().findOne(Credential, { id, workspaceId, provider: 'llm' });
    if (!row) return null;
    const baseUrl = row.settings.base_url ?? DEFAULT_LLM_BASE_URL;
    const { addresses } = await this.checkBaseUrl(baseUrl);
    return { baseUrl, apiKey: this.box.open(row.secretSealed, row.id), fetch: pinnedFetch(addresses, { ca: this.opts.ca }) };
  }

  /**
   * The workspace's own SIP trunk for dial-out: its newest telephony credential with both sip_uri and
   * from_number; null when it has none (the installation's trunk, SIP_TRUNK_URI, is the default).
   * Nothing is opened or resolved.
   */
  async hasSipTrunk(workspaceId: string): Promise<boolean> {
    return (await this.sipTrunkRow(workspaceId)) !== null;
  }

  /**
   * That trunk, opened for a call: its host resolved now and checked against the address rules
   * (the webhooks' SSRF policy: a private, loopback or link-local address is refused unless the
   * operator allows it, CONCIERGE_WEBHOOK_ALLOW_CIDRS), `address` the one checked, for the call to
   * be sent there (a name resolving elsewhere later changes nothing). 422 stored_url_unsafe when
   * it breaks the rules now. Null when the workspace has no trunk of its own.
   */
  async sipTrunk(workspaceId: string): Promise<{ credentialId: string; sipUri: string; address: string; username: string; password: string; fromNumber: string } | null> {
    const row = await this.sipTrunkRow(workspaceId);
    if (!row) return null;
    const sipUri = row.settings.sip_uri!;
    let addresses: string[];
    try {
      ({ addresses } = await this.checkBaseUrl(httpsFormOfSip(sipUri)));
    } catch (err) {
      if (err instanceof UnsafeUrlError) throw new DomainError('stored_url_unsafe', `sip_uri: not called: ${err.reason}`, { reason: err.reason });
      throw err;
    }
    // One IPv4 address: the trunk's UDP socket is IPv4.
    const address = addresses.find((a) => !a.includes(':')) ?? addresses[0];
    return { credentialId: row.id, sipUri, address, username: row.settings.username ?? '', password: this.box.open(row.secretSealed, row.id), fromNumber: row.settings.from_number! };
  }

  /**
   * The workspace's own voice server (LiveKit-style) for browser sessions: its newest voice
   * credential, the url checked against the address rules now (422 stored_url_unsafe), the
   * secret opened. Null when it has none (LIVEKIT_URL, else the embedded transport, is the default).
   */
  async voiceServer(workspaceId: string): Promise<{ credentialId: string; url: string; apiKey: string; apiSecret: string } | null> {
    const [row] = await this.em.fork().find(Credential, { workspaceId, provider: 'voice' }, { orderBy: { createdAt: 'desc', id: 'desc' }, limit: 1 });
    if (!row) return null;
    const url = row.settings.url;
    try {
      await this.checkBaseUrl(httpFormOfWs(url));
    } catch (err) {
      if (err instanceof UnsafeUrlError) throw new DomainError('stored_url_unsafe', `url: not called: ${err.reason}`, { reason: err.reason });
      throw err;
    }
    return { credentialId: row.id, url, apiKey: row.settings.api_key, apiSecret: this.box.open(row.secretSealed, row.id) };
  }

  private async sipTrunkRow(workspaceId: string): Promise<ICredential | null> {
    const rows = await this.em.fork().find(Credential, { workspaceId, provider: 'telephony' }, { orderBy: { createdAt: 'desc', id: 'desc' } });
    return rows.find((r) => r.settings?.sip_uri && r.settings?.from_number) ?? null;
  }

  /** The opened token of a msgapp credential of this workspace; null when there is none. */
  msgappToken(workspaceId: string, id: string): Promise<string | null> {
    return this.rows.openMsgappToken(this.em.fork(), this.box, workspaceId, id);
  }

  private async msgappNumbers(row: ICredential): Promise<CredentialResource[]> {
    const waba = row.settings.business_account_id;
    if (!waba) {
      throw new DomainError('business_account_required', `Credential ${row.id} has no business_account_id: the phone numbers are listed per WhatsApp Business Account; register the credential again with it`);
    }
    if (!this.opts.msgapp) throw new DomainError('provider_unavailable', 'No msgapp provider is configured on this server (MSGAPP_API_BASE)');
    const token = this.box.open(row.secretSealed, row.id);
    try {
      const numbers = await this.opts.msgapp.listPhoneNumbers(waba, token);
      return numbers.map((n) => ({
        type: 'phone_number' as const,
        id: n.id,
        display_phone_number: n.displayPhoneNumber,
        verified_name: n.verifiedName ?? null,
        quality_rating: n.qualityRating ?? null,
      }));
    } catch (err) {
      if (!(err instanceof ProviderError)) throw err;
      throw providerError('msgapp', err.status, redactSecret(err.message, token));
    }
  }

  private async llmModels(row: ICredential): Promise<CredentialResource[]> {
    const baseUrl = row.settings.base_url ?? DEFAULT_LLM_BASE_URL;
    let addresses: string[];
    try {
      // Checked again at call time, and the connection pinned to what was checked: what
      // the host resolves to may have changed since registration (DNS rebinding).
      ({ addresses } = await this.checkBaseUrl(baseUrl));
    } catch (err) {
      // The stored address breaks the address rules now (checked again at every call): the caller's to fix, as at registration.
      if (err instanceof UnsafeUrlError) throw new DomainError('stored_url_unsafe', `base_url: not called: ${err.reason}`, { reason: err.reason });
      throw err;
    }
    const apiKey = this.box.open(row.secretSealed, row.id);
    try {
      if (!this.opts.listModels) throw new DomainError('provider_unavailable', 'No language-model client is configured on this server');
      const models = await this.opts.listModels({ baseUrl, apiKey, timeoutMs: this.opts.providerTimeoutMs, fetch: pinnedFetch(addresses, { ca: this.opts.ca }) });
      return models.map((m) => ({
        type: 'model' as const,
        id: m.id,
        owned_by: m.ownedBy ?? null,
        created_at: m.created !== undefined ? new Date(m.created * 1000).toISOString() : null,
      }));
    } catch (err) {
      if (!(err instanceof LlmError)) throw err;
      throw providerError('llm', err.status ?? 0, err.message);
    }
  }

  /** 400 invalid_url naming the field when the endpoint breaks the address rules. */
  private async checkEndpoint(field: string, url: string): Promise<void> {
    await this.checkBaseUrl(url, { resolveNames: false }).catch((err: unknown) => {
      throw err instanceof UnsafeUrlError ? new DomainError('invalid_url', `${field}: ${err.reason}`) : err;
    });
  }

  private checkBaseUrl(raw: string, opts: { resolveNames?: boolean } = {}): Promise<{ addresses: string[] }> {
    return checkProviderUrl(raw, this.opts.policy, this.opts.resolve, opts);
  }

  private hint(secret: string): { fingerprint: string; last4: string | null } {
    return {
      // Domain-separated from the box's other MACs.
      fingerprint: `fp_${this.box.mac(`credential-fingerprint:${secret}`).slice(0, 24)}`,
      last4: secret.length >= LAST4_MIN_LENGTH ? secret.slice(-4) : null,
    };
  }

  /** Rows registered before fingerprints existed get theirs on first read (SQL could not open the secret). */
  private async view(em: EntityManager, row: ICredential): Promise<CredentialView> {
    let { fingerprint, last4 } = row;
    if (!fingerprint) {
      ({ fingerprint, last4 } = this.hint(this.box.open(row.secretSealed, row.id)));
      await em.nativeUpdate(Credential, { id: row.id }, { fingerprint, last4 });
    }
    return {
      id: row.id,
      name: row.name,
      provider: row.provider,
      settings: row.settings ?? {},
      secret_field: SECRET_FIELD[row.provider],
      last4: last4 ?? null,
      fingerprint,
      created_at: new Date(row.createdAt).toISOString(),
    };
  }
}

/** A voice server's ws(s):// URL as the http(s):// URL the address rules judge (same host, port and security). */
function httpFormOfWs(raw: string): string {
  return raw.replace(/^ws(s?):/i, 'http$1:');
}

/**
 * A SIP URI's host and port as an https:// URL for the address rules: `sip:user@host:port;params`.
 * https because SIP is not HTTP: only the address matters, and plain http would also demand an allow-listed host.
 */
function httpsFormOfSip(raw: string): string {
  const hostPort = raw.replace(/^sips?:/i, '').replace(/^[^@]*@/, '').split(/[;?]/)[0];
  return `https://${hostPort}/`;
}

/**
 * The provider's reason (secret redacted) and its HTTP status (0: none). A refusal of the
 * credential itself (a 4xx other than 429: a wrong key, an account it does not own) is the
 * caller's to fix, 422 provider_refused; anything else (5xx, 429, no answer) is 502 provider_error.
 */
function providerError(provider: CredentialProvider, status: number, reason: string): DomainError {
  if (status >= 400 && status < 500 && status !== 429) return new DomainError('provider_refused', `The ${provider} provider refused the credential: ${reason}`, { provider_status: status });
  return new DomainError('provider_error', `The ${provider} provider failed: ${reason}`, { provider_status: status });
}
