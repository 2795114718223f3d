// The msgapp sandbox (an emulator of the WhatsApp Cloud API) from the command line.
// JSON on stdout; a clear message on stderr and a non-zero exit on error.
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startMsgappSandbox, type MsgappSandbox } from './';

const USAGE = `usage: npm run -s msgapp-sandbox -- <command>
  serve [--port P] [--host H] --app-secret S [--webhook URL] [--access-token T]
        [--delivered-ms N] [--read-ms N] [--phone-number-id ID --display-number +1555...]
      runs the emulator until interrupted; use the printed "url" as MSGAPP_API_BASE
  inbound --sandbox URL --from +15551230000 --to PHONE_NUMBER_ID|+DISPLAY_NUMBER
        [--text T] [--profile-name NAME]
        [--media-file PATH --media-kind image|audio|video|document|sticker|voice [--mime-type M] [--filename F]]
        [--latitude LAT --longitude LON [--location-name N] [--address A]]
      a customer writes in: the sandbox POSTs a signed webhook to its webhook URL
  sent --sandbox URL
  fail-next --sandbox URL (--status CODE [--code N] [--message M] | --delivery-error TEXT [--code N])
  scenario --sandbox URL [--out-of-order] [--duplicates]
  webhook --sandbox URL --webhook URL
--app-secret defaults to $MSGAPP_APP_SECRET.`;

class UsageError extends Error {}

const MIME_BY_EXT: Record<string, string> = {
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.png': 'image/png',
  '.webp': 'image/webp',
  '.gif': 'image/gif',
  '.mp4': 'video/mp4',
  '.3gp': 'video/3gpp',
  '.ogg': 'audio/ogg',
  '.opus': 'audio/ogg',
  '.mp3': 'audio/mpeg',
  '.m4a': 'audio/mp4',
  '.aac': 'audio/aac',
  '.amr': 'audio/amr',
  '.pdf': 'application/pdf',
  '.txt': 'text/plain',
  '.docx': 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  '.xlsx': 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
};

function need(value: string | undefined, flag: string): string {
  if (value === undefined || value === '') throw new UsageError(`missing --${flag}`);
  return value;
}

function num(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--${flag} must be a number`);
  return n;
}

function int(value: string | undefined, flag: string, min: number, max: number): number | undefined {
  const n = num(value, flag);
  if (n !== undefined && (!Number.isInteger(n) || n < min || n > max)) throw new UsageError(`--${flag} must be an integer from ${min} to ${max}`);
  return n;
}

async function control(sandbox: string, method: 'GET' | 'POST' | 'PUT', route: string, body?: unknown): Promise<unknown> {
  let url: URL;
  try {
    url = new URL(route, sandbox);
  } catch {
    throw new UsageError(`--sandbox "${sandbox}" is not a URL`);
  }
  const res = await fetch(url, {
    method,
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  }).catch((err: unknown) => {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new Error(`cannot reach the sandbox at ${url.origin}: ${cause?.code ?? cause?.message ?? String(err)}`);
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    const e = (json as { error?: { message?: string; error_data?: { details?: string } } } | undefined)?.error;
    const detail = e ? [e.message, e.error_data?.details].filter(Boolean).join(': ') : text.slice(0, 300);
    throw new Error(`sandbox answered ${res.status}: ${detail}`);
  }
  return json;
}

async function serve(values: Record<string, string | boolean | undefined>): Promise<void> {
  const str = (k: string) => values[k] as string | undefined;
  const appSecret = str('app-secret') ?? process.env.MSGAPP_APP_SECRET;
  if (!appSecret) throw new UsageError('missing --app-secret (or MSGAPP_APP_SECRET)');
  const delivered = int(str('delivered-ms'), 'delivered-ms', 0, 3_600_000);
  const read = int(str('read-ms'), 'read-ms', 0, 3_600_000);
  const webhook = str('webhook');
  if (webhook !== undefined && !URL.canParse(webhook)) throw new UsageError(`--webhook "${webhook}" is not a URL`);
  const phoneNumberId = str('phone-number-id');
  const displayNumber = str('display-number');
  if ((phoneNumberId === undefined) !== (displayNumber === undefined)) throw new UsageError('--phone-number-id and --display-number go together');

  const sandbox: MsgappSandbox = await startMsgappSandbox({
    port: int(str('port'), 'port', 0, 65535) ?? 4010,
    host: str('host') ?? '127.0.0.1',
    appSecret,
    webhookUrl: webhook,
    accessToken: str('access-token'),
    statusDelaysMs: { delivered: delivered ?? 300, read: read ?? Math.max(600, delivered ?? 0) },
    numbers: phoneNumberId && displayNumber ? [{ phoneNumberId, displayPhoneNumber: displayNumber }] : undefined,
  });
  process.stdout.write(`${JSON.stringify({ url: sandbox.url, origin: sandbox.origin, webhook: webhook ?? null, control: `${sandbox.origin}/_sandbox` })}\n`);
  const stop = () => {
    sandbox.close().then(
      () => process.exit(0),
      (err: unknown) => {
        console.error(`error: ${err instanceof Error ? err.message : String(err)}`);
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

async function run(argv: string[]): Promise<unknown> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      'app-secret': { type: 'string' },
      webhook: { type: 'string' },
      'access-token': { type: 'string' },
      'delivered-ms': { type: 'string' },
      'read-ms': { type: 'string' },
      'phone-number-id': { type: 'string' },
      'display-number': { type: 'string' },
      sandbox: { type: 'string' },
      from: { type: 'string' },
      to: { type: 'string' },
      text: { type: 'string' },
      'profile-name': { type: 'string' },
      'media-file': { type: 'string' },
      'media-kind': { type: 'string' },
      'mime-type': { type: 'string' },
      filename: { type: 'string' },
      latitude: { type: 'string' },
      longitude: { type: 'string' },
      'location-name': { type: 'string' },
      address: { type: 'string' },
      status: { type: 'string' },
      code: { type: 'string' },
      message: { type: 'string' },
      'delivery-error': { type: 'string' },
      'out-of-order': { type: 'boolean' },
      duplicates: { type: 'boolean' },
    },
  });
  const [command, ...rest] = positionals;
  if (rest.length > 0) throw new UsageError(`unexpected argument '${rest[0]}'`);

  switch (command) {
    case 'serve':
      await serve(values);
      return undefined; // keeps running
    case 'inbound': {
      const sandbox = need(values.sandbox, 'sandbox');
      const body: Record<string, unknown> = { from: need(values.from, 'from'), to: need(values.to, 'to') };
      if (values.text !== undefined) body.text = values.text;
      if (values['profile-name'] !== undefined) body.profileName = values['profile-name'];
      if (values['media-file'] !== undefined) {
        const file = values['media-file'];
        const kind = need(values['media-kind'], 'media-kind');
        if (!['image', 'audio', 'video', 'document', 'sticker', 'voice'].includes(kind)) throw new UsageError(`--media-kind '${kind}' is not one of image, audio, video, document, sticker, voice`);
        let bytes: Buffer;
        try {
          bytes = fs.readFileSync(file);
        } catch (err) {
          throw new UsageError(`cannot read --media-file ${file}: ${(err as Error).message}`);
        }
        const mimeType = values['mime-type'] ?? MIME_BY_EXT[path.extname(file).toLowerCase()];
        if (!mimeType) throw new UsageError(`cannot tell the type of ${file}: give --mime-type`);
        body.media = { kind, mimeType, base64: bytes.toString('base64'), filename: values.filename ?? (kind === 'document' ? path.basename(file) : undefined) };
      }
      if (values.latitude !== undefined || values.longitude !== undefined) {
        body.location = {
          latitude: num(need(values.latitude, 'latitude'), 'latitude'),
          longitude: num(need(values.longitude, 'longitude'), 'longitude'),
          name: values['location-name'],
          address: values.address,
        };
      }
      if (body.text === undefined && body.media === undefined && body.location === undefined) throw new UsageError('give --text, --media-file or --latitude/--longitude');
      return control(sandbox, 'POST', '/_sandbox/inbound', body);
    }
    case 'sent':
      return control(need(values.sandbox, 'sandbox'), 'GET', '/_sandbox/sent');
    case 'fail-next': {
      const sandbox = need(values.sandbox, 'sandbox');
      const code = int(values.code, 'code', 0, Number.MAX_SAFE_INTEGER);
      if (values['delivery-error'] !== undefined) return control(sandbox, 'POST', '/_sandbox/fail-next', { kind: 'delivery', error: values['delivery-error'], code });
      const status = int(need(values.status, 'status (or --delivery-error)'), 'status', 400, 599);
      return control(sandbox, 'POST', '/_sandbox/fail-next', { kind: 'send', status, code, message: values.message });
    }
    case 'scenario':
      return control(need(values.sandbox, 'sandbox'), 'POST', '/_sandbox/scenario', { outOfOrder: values['out-of-order'] ?? false, duplicates: values.duplicates ?? false });
    case 'webhook':
      return control(need(values.sandbox, 'sandbox'), 'PUT', '/_sandbox/webhook', { url: need(values.webhook, 'webhook') });
    default:
      throw new UsageError(command ? `unknown command '${command}'` : 'no command given');
  }
}

async function main() {
  const argv = process.argv.slice(2);
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(USAGE);
    return;
  }
  try {
    const result = await run(argv);
    if (result !== undefined) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  } catch (err) {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      console.error(`error: ${(err as Error).message}\n${USAGE}`);
      process.exitCode = 2;
    } else {
      console.error(`error: ${err instanceof Error ? err.message : String(err)}`);
      process.exitCode = 1;
    }
  }
}

void main();
