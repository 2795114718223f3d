import type { PgNotifications, Subscription } from '../../db/notifications';
import { KEY_CHANGES_CHANNEL, type KeyLookup, type KeyLookupCache } from './api-keys';

/**
 * A per-process cache of key look-ups, trusted only while this process is LISTENing on
 * the key-change channel. Rotations and deletions NOTIFY in their transaction, so every
 * process clears its cache within milliseconds of the commit. When the listening
 * connection is down, the cache is cleared and bypassed until it is back: a missed
 * notification can never keep a revoked key alive. Entries also expire after `ttlMs`.
 */
export class KeyCache implements KeyLookupCache {
  private readonly entries = new Map<string, { value: KeyLookup; at: number }>();
  private gen = 0;
  private readonly listener: Subscription;

  constructor(
    notifications: PgNotifications,
    private readonly ttlMs = 60_000,
    private readonly maxEntries = 10_000,
  ) {
    const clear = () => this.clear();
    this.listener = notifications.subscribe([KEY_CHANGES_CHANNEL], { onNotify: clear, onLost: clear, onReady: clear }, 'api key cache');
  }

  async start(): Promise<void> {
    await this.listener.start();
  }

  generation(): number {
    return this.gen;
  }

  get(hash: string): KeyLookup | undefined {
    if (!this.listener.listening) return undefined;
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
    if (!this.listener.listening || generation !== this.gen) return;
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(hash, { value, at: Date.now() });
  }

  clear(): void {
    this.gen++;
    this.entries.clear();
  }

  async stop(): Promise<void> {
    await this.listener.stop();
  }
}
