import { Client } from 'pg';
import type { Logger } from 'pino';
import type { KeyLookup } from './api-keys';

export const KEY_CHANGES_CHANNEL = 'concierge_api_keys';

/**
 * A per-process cache of key look-ups, trusted only while this process is LISTENing on
 * the key-change channel. Rotations and deletions NOTIFY in their transaction, so every
 * process clears its cache within milliseconds of the commit. When the listening
 * connection is down, the cache is cleared and bypassed until it is back: a missed
 * notification can never keep a revoked key alive. Entries also expire after `ttlMs`.
 */
export class KeyCache {
  private readonly entries = new Map<string, { value: KeyLookup; at: number }>();
  private gen = 0;
  private client: Client | null = null;
  private listening = false;
  private stopped = false;
  private retry: NodeJS.Timeout | null = null;

  constructor(
    private readonly databaseUrl: string,
    private readonly log: Logger,
    private readonly ttlMs = 60_000,
    private readonly maxEntries = 10_000,
  ) {}

  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = new Client({ connectionString: this.databaseUrl });
    client.on('notification', () => this.clear());
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      await client.query(`listen ${KEY_CHANGES_CHANNEL}`);
      this.client = client;
      this.clear();
      this.listening = true;
    } catch (err) {
      this.lost(client, err as Error);
    }
  }

  private lost(client: Client, err?: Error): void {
    if (this.client && this.client !== client) return;
    this.listening = false;
    this.client = null;
    this.clear();
    client.removeAllListeners();
    client.on('error', () => undefined);
    client.end().catch(() => undefined);
    if (this.stopped || this.retry) return;
    this.log.warn({ err: err?.message }, 'api key cache: change feed lost, cache bypassed until it reconnects');
    this.retry = setTimeout(() => {
      this.retry = null;
      void this.connect();
    }, 1000);
    this.retry.unref();
  }

  generation(): number {
    return this.gen;
  }

  get(hash: string): KeyLookup | undefined {
    if (!this.listening) return undefined;
    const hit = this.entries.get(hash);
    if (!hit) return undefined;
    if (Date.now() - hit.at > this.ttlMs) {
      this.entries.delete(hash);
      return undefined;
    }
    return hit.value;
  }

  /** Stores a look-up unless the cache was cleared since the look-up began. */
  set(hash: string, value: KeyLookup, generation: number | undefined): void {
    if (!this.listening || generation !== this.gen) return;
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(hash, { value, at: Date.now() });
  }

  clear(): void {
    this.gen++;
    this.entries.clear();
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
