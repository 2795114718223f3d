// The console's actions from the command line. JSON on stdout; a clear message on
// stderr and a non-zero exit on error. Uses the same database as `npm start`.
import fs from 'node:fs';
import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import { parseScopes } from '../domain/keys/api-keys';
import { ALL_SCOPES } from '../domain/keys/scopes';
import { dataDir, loadConfig, type Config } from '../app/config';
import { SECRET_FIELD } from '../domain/credentials/credentials';
import { SecretBox } from '../lib/crypto/secret-box';
import { TICKET_STATUSES, type TicketStatus } from '../db/entities';
import { DomainError } from '../domain/errors';
import { compose, type Composition } from '../app/compose';
import { parseHoursSpec, type OpeningInterval } from '../domain/team/availability';
import { resolveDatabaseUrl } from '../dev/embedded/postgres';
import { CLI_CONTEXT } from '../domain/audit/audit-log';
import { CONSOLE_ROLES, isRole } from '../domain/people/roles';

const USAGE = `usage: npm run -s admin -- <command>
  workspace create --name NAME
  workspace list
  workspace set-dial-out WS_ID [--countries US,CA|all] [--types fixed_line,mobile,...|default]
                    (dial-out destinations: allowed ISO countries, default all; allowed number types, default
                    fixed_line,mobile,toll_free,voip,uan; premium-rate, shared-cost, unknown and satellite/global
                    network numbers are never dialled)
  key create --workspace WS_ID --name NAME --scopes SCOPE[,SCOPE...]
                    (the value is printed once, and kept sealed with the encryption key for the console's copy)
  key list --workspace WS_ID
  key rotate KEY_ID
  key delete KEY_ID
  user create --workspace WS_ID --email EMAIL --role owner|admin|agent|viewer [--name NAME]
                    (a console user, with a one-time sign_in_url valid 24 h: open it to choose a password and sign in)
  user list --workspace WS_ID
  user link --workspace WS_ID USER_ID   (a new one-time link: sign-in while the user has no password, else a
                    password reset valid 1 h)
  user set-role --workspace WS_ID USER_ID --role ROLE   (the last owner cannot be demoted)
  user remove --workspace WS_ID USER_ID   (the last owner cannot be removed)
  credential create --workspace WS_ID --name NAME [--provider msgapp|llm|voice|telephony|mcp]
                    [--setting KEY=VALUE ...] [--token-file PATH]
                    (the provider's secret — msgapp access_token, llm api_key, voice api_secret, telephony
                    password, mcp bearer_token — stored encrypted; read from PATH, or from stdin without
                    --token-file: never from the command line, where every user of the machine can see it.
                    Settings are the non-secret fields: business_account_id=…, base_url=…, url=… api_key=…,
                    username=… sip_uri=…; the same fields and checks as POST /api/v1/credentials)
  site create --workspace WS_ID --agent AGENT_ID --origins https://a.example,https://b.example
  site rotate-secret SITE_ID [--grace-hours 24]
  site set-origins SITE_ID --origins https://a.example,https://b.example   (replaces the list; sockets from a removed origin close)
  site set-commands SITE_ID --commands navigate,open_url   (page commands the agent may send; --commands '' turns them off)
  site set-appearance SITE_ID [--brand-color '#243b6b'] [--position right|left] [--launcher-label TEXT]
                    [--theme light|dark|auto] [--language auto|en|es|fr|de|pt|ar]
                    (the widget's look and language; options left out keep their value; --launcher-label ''
                    removes the label; a colour is #rgb or #rrggbb; a label is plain text, at most 40 characters)
  site show SITE_ID   (origins, page commands, status and appearance; never the secret)
  site suspend SITE_ID | site resume SITE_ID
  team availability WS_ID   (business hours, away switch, reply time; whether someone is available now, the next opening)
  team away WS_ID --on|--off [--message TEXT]   (the away switch: the widget tells visitors nobody is there;
                    --message '' removes the message; left out, it is kept)
  team set-hours WS_ID [--timezone Europe/Paris] [--hours 'mon-fri 09:00-17:30' ...] [--always-open]
                    [--reply-time MINUTES|none]
                    (--hours replaces the week's hours: DAYS TIME-TIME[,TIME-TIME], groups joined with ';' or
                    --hours repeated; DAYS is mon, mon-fri, mon,wed,fri-sat, daily, weekdays or weekends; TIME is
                    HH:MM, 24-hour, in the time zone (default UTC); a close of 24:00 is midnight, a close before the
                    open runs past midnight: 'fri 22:00-02:00'. --always-open removes the hours. Options left out
                    keep their value. Example: --hours 'mon-fri 09:00-12:00,13:00-17:30; sat 10:00-14:00')
  support list [--status open|waiting_on_customer|closed] [--workspace WS_ID] [--limit N] [--cursor C]
                    (every workspace's tickets, newest first)
  support show TICKET_ID
  support reply TICKET_ID (--body TEXT | --body-file PATH|-)   (the ticket then waits on the customer)
  support close TICKET_ID
  credits grant --workspace WS --amount N [--reason TEXT]   (credits: only voice minutes spend them)
scopes: ${ALL_SCOPES.join(', ')}`;

class UsageError extends Error {}

function need(value: string | undefined, flag: string): string {
  if (!value) throw new UsageError(`missing --${flag}`);
  return value;
}

/** The commands that seal a secret. The others never read, nor generate, the encryption key. */
const SEALING = new Set(['credential create', 'site create', 'site rotate-secret', 'key create', 'key rotate']);

/** The box of commands that seal nothing: a use would be a bug here, never a silent second key. */
class NoKeyBox extends SecretBox {
  constructor() {
    super(Buffer.alloc(32));
  }
  private refuse(): never {
    throw new Error('internal: this command does not use the encryption key');
  }
  override seal(): string {
    return this.refuse();
  }
  override open(): string {
    return this.refuse();
  }
  override mac(): string {
    return this.refuse();
  }
}

/** Where a run of the CLI reads and writes: the process's own streams and environment, or a caller's (tests). */
export interface AdminIo {
  env: NodeJS.ProcessEnv;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

const processIo = (): AdminIo => ({ env: process.env, stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });

async function readAll(input: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of input) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * A provider token, from `--token-file PATH` (`-` is stdin) or stdin: never from an
 * argument, which every local user sees in the process list (and shell history keeps).
 * On a terminal it is read without echo.
 */
async function readToken(io: AdminIo, file: string | undefined, what = 'access token'): Promise<string> {
  if (file !== undefined && file !== '-') return fs.readFileSync(file, 'utf8').trim();
  if (!io.stdin.isTTY) return (await readAll(io.stdin)).trim();
  io.stderr.write(`${what} (input hidden): `);
  const silent = new Writable({ write: (_chunk, _enc, done) => done() });
  const rl = createInterface({ input: io.stdin, output: silent, terminal: true });
  try {
    return (await new Promise<string>((resolve) => rl.question('', resolve))).trim();
  } finally {
    rl.close();
    io.stderr.write('\n');
  }
}

/** A reply's text from a file, or stdin for `-` (trailing whitespace dropped). */
async function readBody(io: AdminIo, file: string): Promise<string> {
  if (file !== '-') return fs.readFileSync(file, 'utf8').trimEnd();
  return (await readAll(io.stdin)).trimEnd();
}

/** The workspace's id, or 404 not_found (a read of the defaults would hide a mistyped id). */
async function existingWorkspace(c: Composition, id: string): Promise<string> {
  if (!(await c.services.repos.workspaces.workspaceExists(c.orm.em.fork(), id))) throw new DomainError('not_found', `No workspace with id '${id}'`);
  return id;
}

async function run(config: Config, io: AdminIo, argv: string[], opened: (c: Composition) => void): Promise<unknown> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      name: { type: 'string' },
      workspace: { type: 'string' },
      scopes: { type: 'string' },
      // Declared only to refuse it with a reason: see readToken.
      token: { type: 'string' },
      'token-file': { type: 'string' },
      provider: { type: 'string' },
      setting: { type: 'string', multiple: true },
      agent: { type: 'string' },
      origins: { type: 'string' },
      commands: { type: 'string' },
      'grace-hours': { type: 'string' },
      status: { type: 'string' },
      limit: { type: 'string' },
      cursor: { type: 'string' },
      body: { type: 'string' },
      'body-file': { type: 'string' },
      amount: { type: 'string' },
      email: { type: 'string' },
      role: { type: 'string' },
      countries: { type: 'string' },
      types: { type: 'string' },
      reason: { type: 'string' },
      'brand-color': { type: 'string' },
      position: { type: 'string' },
      'launcher-label': { type: 'string' },
      theme: { type: 'string' },
      language: { type: 'string' },
      timezone: { type: 'string' },
      hours: { type: 'string', multiple: true },
      'always-open': { type: 'boolean' },
      'reply-time': { type: 'string' },
      on: { type: 'boolean' },
      off: { type: 'boolean' },
      message: { type: 'string' },
    },
  });
  const [area, action, target] = positionals;
  if (values.token !== undefined) {
    throw new UsageError('--token is not accepted: a token on the command line is visible to every user in the process list; use --token-file PATH or pipe it on stdin');
  }
  const command = `${area ?? ''} ${action ?? ''}`;
  const c = await compose(config, {
    role: 'cli',
    databaseUrl: await resolveDatabaseUrl(config.DATABASE_URL, dataDir(config)),
    embedded: true,
    overrides: SEALING.has(command) ? {} : { box: new NoKeyBox() },
  });
  opened(c);
  const { orm, services } = c;
  switch (command) {
    case 'workspace create': {
      const name = need(values.name, 'name');
      return services.repos.workspaces.createWorkspace(orm.em.fork(), name);
    }
    case 'workspace list': {
      return { workspaces: await services.repos.workspaces.listWorkspaces(orm.em.fork()) };
    }
    case 'key create': {
      const created = await services.apiKeys.create(need(values.workspace, 'workspace'), need(values.name, 'name'), parseScopes(need(values.scopes, 'scopes')), CLI_CONTEXT);
      return { id: created.id, key: created.key, prefix: created.prefix, scopes: created.scopes };
    }
    case 'user create': {
      const role = need(values.role, 'role');
      if (!isRole(role)) throw new UsageError(`--role must be one of ${CONSOLE_ROLES.join(', ')}`);
      const ws = need(values.workspace, 'workspace');
      const made = await services.people.create({ cli: true }, ws, { email: need(values.email, 'email'), name: values.name, role }, CLI_CONTEXT, 'sign_in');
      return { ...made.user, workspace_id: ws, sign_in_url: made.link.url, sign_in_url_expires_at: made.link.expires_at };
    }
    case 'user list':
      return services.people.list(await existingWorkspace(c, need(values.workspace, 'workspace')));
    case 'user link': {
      const issued = await services.people.issueLink({ cli: true }, need(values.workspace, 'workspace'), need(target, 'USER_ID (positional)'), CLI_CONTEXT);
      return { ...issued.link, user_id: target };
    }
    case 'user set-role': {
      const role = need(values.role, 'role');
      if (!isRole(role)) throw new UsageError(`--role must be one of ${CONSOLE_ROLES.join(', ')}`);
      return services.people.changeRole({ cli: true }, need(values.workspace, 'workspace'), need(target, 'USER_ID (positional)'), role, CLI_CONTEXT);
    }
    case 'user remove':
      await services.people.remove({ cli: true }, need(values.workspace, 'workspace'), need(target, 'USER_ID (positional)'), CLI_CONTEXT);
      return { id: target, removed: true };
    case 'key list':
      return { keys: await services.apiKeys.list(need(values.workspace, 'workspace')) };
    case 'key rotate': {
      const rotated = await services.apiKeys.rotate(need(target, 'KEY_ID (positional)'), { ctx: CLI_CONTEXT });
      return { id: rotated.id, key: rotated.key };
    }
    case 'credential create': {
      const provider = values.provider ?? 'msgapp';
      const secretField = (SECRET_FIELD as Record<string, string>)[provider];
      if (!secretField) throw new UsageError(`--provider must be one of ${Object.keys(SECRET_FIELD).join(', ')}`);
      const settings: Record<string, string> = {};
      for (const s of values.setting ?? []) {
        const eq = s.indexOf('=');
        if (eq <= 0) throw new UsageError(`--setting ${s}: expected KEY=VALUE`);
        const key = s.slice(0, eq);
        if (key === secretField) throw new UsageError(`--setting ${key}: the secret is read from --token-file or stdin, never from the command line`);
        settings[key] = s.slice(eq + 1);
      }
      const workspace = need(values.workspace, 'workspace');
      const name = need(values.name, 'name');
      const secret = await readToken(io, values['token-file'], secretField.replace('_', ' '));
      // The same service and validation as POST /api/v1/credentials.
      return services.credentials.register(workspace, { name, provider, ...settings, [secretField]: secret }, CLI_CONTEXT);
    }
    case 'site create':
      return services.sites.create(need(values.workspace, 'workspace'), need(values.agent, 'agent'), need(values.origins, 'origins').split(','));
    case 'site rotate-secret': {
      const grace = values['grace-hours'] === undefined ? undefined : Number(values['grace-hours']);
      if (grace !== undefined && !(Number.isFinite(grace) && grace >= 0)) throw new UsageError('--grace-hours must be a non-negative number');
      return services.sites.rotateSecret(need(target, 'SITE_ID (positional)'), grace, CLI_CONTEXT);
    }
    case 'site set-origins':
      return services.sites.setOrigins(need(target, 'SITE_ID (positional)'), need(values.origins, 'origins').split(','));
    case 'site set-commands':
      return services.sites.setPageCommands(need(target, 'SITE_ID (positional)'), (values.commands ?? '').split(','));
    case 'site set-appearance': {
      const id = need(target, 'SITE_ID (positional)');
      const patch = { brand_color: values['brand-color'], position: values.position, launcher_label: values['launcher-label'], theme: values.theme, language: values.language };
      if (Object.values(patch).every((v) => v === undefined)) throw new UsageError('give at least one of --brand-color, --position, --launcher-label, --theme, --language');
      return services.sites.setAppearance(id, patch);
    }
    case 'site show':
      return services.sites.show(need(target, 'SITE_ID (positional)'));
    case 'team availability':
      return services.team.availability(await existingWorkspace(c, need(target, 'WS_ID (positional)')));
    case 'team away': {
      const ws = need(target, 'WS_ID (positional)');
      if (Boolean(values.on) === Boolean(values.off)) throw new UsageError('give exactly one of --on or --off');
      return services.team.setAvailability(ws, { away: Boolean(values.on), ...(values.message !== undefined && { away_message: values.message }) });
    }
    case 'team set-hours': {
      const ws = need(target, 'WS_ID (positional)');
      if (values.hours && values['always-open']) throw new UsageError('give --hours or --always-open, not both');
      let hours: OpeningInterval[] | undefined;
      try {
        hours = values['always-open'] ? [] : values.hours?.flatMap(parseHoursSpec);
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
      const reply = values['reply-time'];
      let replyTime: number | null | undefined;
      if (reply !== undefined) {
        replyTime = reply.trim().toLowerCase() === 'none' ? null : Number(reply);
        if (replyTime !== null && !Number.isInteger(replyTime)) throw new UsageError('--reply-time must be a whole number of minutes, or none');
      }
      if (values.timezone === undefined && hours === undefined && replyTime === undefined) throw new UsageError('give at least one of --timezone, --hours, --always-open, --reply-time');
      return services.team.setAvailability(ws, {
        ...(values.timezone !== undefined && { timezone: values.timezone }),
        ...(hours !== undefined && { hours }),
        ...(replyTime !== undefined && { reply_time_minutes: replyTime }),
      });
    }
    case 'site suspend':
      return services.sites.setStatus(need(target, 'SITE_ID (positional)'), 'suspended');
    case 'site resume':
      return services.sites.setStatus(need(target, 'SITE_ID (positional)'), 'active');
    case 'support list': {
      if (values.status !== undefined && !(TICKET_STATUSES as readonly string[]).includes(values.status)) {
        throw new UsageError(`--status must be one of ${TICKET_STATUSES.join(', ')}`);
      }
      const limit = values.limit === undefined ? 50 : Number(values.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 200) throw new UsageError('--limit must be an integer from 1 to 200');
      return services.support.operatorList({ status: values.status as TicketStatus | undefined, workspaceId: values.workspace, limit, cursor: values.cursor });
    }
    case 'support show':
      return services.support.operatorGet(need(target, 'TICKET_ID (positional)'));
    case 'support reply': {
      const id = need(target, 'TICKET_ID (positional)');
      if ((values.body === undefined) === (values['body-file'] === undefined)) throw new UsageError('give exactly one of --body TEXT or --body-file PATH (- for stdin)');
      return services.support.operatorReply(id, values.body ?? (await readBody(io, values['body-file']!)));
    }
    case 'workspace set-dial-out': {
      const ws = need(target, 'WS_ID (positional)');
      if (values.countries === undefined && values.types === undefined) throw new UsageError('give --countries and/or --types');
      const list = (v: string) => v.split(',').map((x) => x.trim()).filter(Boolean);
      return services.repos.dialOut.setDialOutPolicy(orm.em, ws, {
        countries: values.countries === undefined ? undefined : values.countries.trim().toLowerCase() === 'all' ? null : list(values.countries),
        types: values.types === undefined ? undefined : values.types.trim().toLowerCase() === 'default' ? null : list(values.types),
      });
    }
    case 'credits grant': {
      const amount = Number(need(values.amount, 'amount'));
      if (!Number.isSafeInteger(amount) || amount <= 0) throw new UsageError('--amount must be a positive whole number of credits');
      const ws = need(values.workspace, 'workspace');
      const entry = await services.credits.grant(ws, amount, values.reason ?? 'granted by the operator');
      return { entry, credits: await services.credits.balance(ws) };
    }
    case 'support close':
      return services.support.close(need(target, 'TICKET_ID (positional)'));
    case 'key delete':
      await services.apiKeys.delete(need(target, 'KEY_ID (positional)'), { ctx: CLI_CONTEXT });
      return { id: target, deleted: true };
    default:
      throw new UsageError(area ? `unknown command '${positionals.join(' ')}'` : 'no command given');
  }
}

/**
 * One run of the CLI: `argv` without the program, the result as JSON on `io.stdout`, an error on `io.stderr`; the
 * exit status (0, 1 for a refused action, 2 for a usage error). The process entry below passes its own streams;
 * tests call it in their process with theirs, and spawn the entry only for what only a process shows.
 */
export async function runAdmin(argv: string[], io: AdminIo = processIo()): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    io.stdout.write(`${USAGE}\n`);
    return 0;
  }
  let c: Composition | null = null;
  try {
    const config = loadConfig(io.env);
    const result = await run(config, io, argv, (opened) => (c = opened));
    io.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } catch (err) {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      io.stderr.write(`error: ${(err as Error).message}\n${USAGE}\n`);
      return 2;
    }
    io.stderr.write(`error: ${err instanceof DomainError ? `${err.code}: ${err.message}` : err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  } finally {
    await (c as Composition | null)?.close();
  }
}

if (require.main === module) void runAdmin(process.argv.slice(2)).then((code) => (process.exitCode = code));
