import { Client } from 'pg';
import type { Logger } from 'pino';

/**
 * A dedicated PostgreSQL connection LISTENing on some channels, reconnecting after a
 * loss. Callers that cache on the strength of notifications must trust their cache
 * only while `listening` is true: `onLost` fires when the connection drops (so they can
 * clear), `onReady` when it is (re)established (notifications may have been missed).
 */
export class PgListener {
  private client: Client | null = null;
  private retry: NodeJS.Timeout | null = null;
  private stopped = false;
  listening = false;

  constructor(
    private readonly databaseUrl: string,
    private readonly channels: string[],
    private readonly handlers: { onNotify: (channel: string, payload: string) => void; onLost?: () => void; onReady?: () => void },
    private readonly log: Pick<Logger, 'warn'>,
    private readonly what: string,
  ) {}

  async start(): Promise<void> {
    if (this.stopped) return;
    const client = new Client({ connectionString: this.databaseUrl });
    client.on('notification', (msg) => this.handlers.onNotify(msg.channel, msg.payload ?? ''));
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      for (const channel of this.channels) await client.query(`listen ${channel}`);
    } catch (err) {
      this.lost(client, err as Error);
      throw err;
    }
    this.client = client;
    this.listening = true;
    this.handlers.onReady?.();
  }

  private lost(client: Client, err?: Error): void {
    if (this.client && this.client !== client) return;
    const wasListening = this.listening;
    this.listening = false;
    this.client = null;
    client.removeAllListeners();
    client.on('error', () => undefined);
    client.end().catch(() => undefined);
    this.handlers.onLost?.();
    if (this.stopped || this.retry) return;
    if (wasListening) this.log.warn({ err: err?.message }, `${this.what}: LISTEN connection lost; reconnecting`);
    this.retry = setTimeout(() => {
      this.retry = null;
      this.start().catch(() => undefined);
    }, 1_000);
    this.retry.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    this.listening = false;
    const c = this.client;
    this.client = null;
    if (c) {
      c.removeAllListeners();
      c.on('error', () => undefined);
      await c.end().catch(() => undefined);
    }
  }
}
