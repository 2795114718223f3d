import { Client } from 'pg';
import type { Logger } from 'pino';

export interface NotificationHandlers {
  onNotify: (channel: string, payload: string) => void;
  /** The connection dropped: notices may be missed from now on (caches must clear). */
  onLost?: () => void;
  /** LISTENing (again): notices may have been missed before (caches must clear). */
  onReady?: () => void;
}

/** One component's LISTEN on the process's shared connection. */
export interface Subscription {
  /** True while the shared connection is up and LISTENs on this subscription's channels. */
  readonly listening: boolean;
  /** LISTENs on the channels (connecting the shared connection if needed); resolves once it does. */
  start(): Promise<void>;
  /** Stops delivering to this subscriber (UNLISTEN for channels no one else wants). */
  stop(): Promise<void>;
}

interface Subscriber {
  channels: string[];
  handlers: NotificationHandlers;
  what: string;
  active: boolean;
}

/**
 * The process's one dedicated PostgreSQL connection for LISTEN/NOTIFY, shared by every
 * component that caches or wakes on notices (API key cache, dense index, chat sockets,
 * outbox dispatcher): each subscribes to its channels. After a loss it reconnects every
 * second and re-LISTENs every subscribed channel; subscribers hear `onLost` at the drop
 * and `onReady` once listening again, and must trust a cache only while `listening`.
 */
export class PgNotifications {
  private client: Client | null = null;
  private retry: NodeJS.Timeout | null = null;
  private stopped = false;
  private connecting: Promise<void> | null = null;
  /** Serialises LISTEN/UNLISTEN on the connection (pg queues them anyway; this keeps `listened` exact). */
  private chain: Promise<unknown> = Promise.resolve();
  private readonly subscribers = new Set<Subscriber>();
  /** Channels LISTENed on the current connection. */
  private readonly listened = new Set<string>();
  private up = false;

  constructor(
    private readonly databaseUrl: string,
    private readonly log: Pick<Logger, 'warn'>,
  ) {}

  /** True while the connection is up. */
  get listening(): boolean {
    return this.up;
  }

  /** The server process id of the connection (tests cut it with pg_terminate_backend); null while down. */
  get backendPid(): number | null {
    return this.up ? ((this.client as unknown as { processID?: number })?.processID ?? null) : null;
  }

  subscribe(channels: string[], handlers: NotificationHandlers, what: string): Subscription {
    const sub: Subscriber = { channels, handlers, what, active: false };
    const isListening = () => sub.active && this.up && channels.every((c) => this.listened.has(c));
    return {
      get listening() {
        return isListening();
      },
      start: async () => {
        if (this.stopped) return;
        sub.active = true;
        this.subscribers.add(sub);
        await this.connect();
        await this.listen(channels);
        handlers.onReady?.();
      },
      stop: async () => {
        sub.active = false;
        this.subscribers.delete(sub);
        const stillWanted = new Set([...this.subscribers].flatMap((s) => s.channels));
        const drop = channels.filter((c) => !stillWanted.has(c) && this.listened.has(c));
        if (drop.length && this.up) await this.run(async (client) => {
          for (const c of drop) {
            await client.query(`unlisten ${c}`);
            this.listened.delete(c);
          }
        }).catch(() => undefined);
      },
    };
  }

  /** Connects now (also done by the first subscriber's start). */
  async start(): Promise<void> {
    await this.connect();
  }

  private connect(): Promise<void> {
    if (this.up || this.stopped) return Promise.resolve();
    this.connecting ??= this.open().finally(() => (this.connecting = null));
    return this.connecting;
  }

  private async open(): Promise<void> {
    const client = new Client({ connectionString: this.databaseUrl, application_name: 'concierge notifications' });
    client.on('notification', (msg) => {
      for (const s of this.subscribers) if (s.active && s.channels.includes(msg.channel)) s.handlers.onNotify(msg.channel, msg.payload ?? '');
    });
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    this.listened.clear();
    try {
      await client.connect();
      const channels = [...new Set([...this.subscribers].flatMap((s) => s.channels))];
      for (const c of channels) await client.query(`listen ${c}`);
      channels.forEach((c) => this.listened.add(c));
    } catch (err) {
      this.lost(client, err as Error);
      throw err;
    }
    this.client = client;
    this.up = true;
  }

  private listen(channels: string[]): Promise<void> {
    return this.run(async (client) => {
      for (const c of channels) {
        if (this.listened.has(c)) continue;
        await client.query(`listen ${c}`);
        this.listened.add(c);
      }
    });
  }

  private run(fn: (client: Client) => Promise<void>): Promise<void> {
    const next = this.chain.then(async () => {
      const client = this.client;
      if (!client || !this.up) throw new Error('notifications connection is down');
      await fn(client);
    });
    this.chain = next.catch(() => undefined);
    return next;
  }

  private lost(client: Client, err?: Error): void {
    if (this.client && this.client !== client) return;
    const wasUp = this.up;
    this.up = false;
    this.client = null;
    this.listened.clear();
    client.removeAllListeners();
    client.on('error', () => undefined);
    client.end().catch(() => undefined);
    for (const s of this.subscribers) if (s.active) s.handlers.onLost?.();
    if (this.stopped || this.retry) return;
    if (wasUp) this.log.warn({ err: err?.message }, `notifications (${[...this.subscribers].map((s) => s.what).join(', ')}): LISTEN connection lost; reconnecting`);
    this.retry = setTimeout(() => {
      this.retry = null;
      this.connect()
        .then(() => {
          for (const s of this.subscribers) if (s.active) s.handlers.onReady?.();
        })
        .catch(() => undefined);
    }, 1_000);
    this.retry.unref();
  }

  /** Closes the connection; subscribers hear nothing more. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    this.up = false;
    this.listened.clear();
    const c = this.client;
    this.client = null;
    if (c) {
      c.removeAllListeners();
      c.on('error', () => undefined);
      await c.end().catch(() => undefined);
    }
  }
}
