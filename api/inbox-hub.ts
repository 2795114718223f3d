import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { INBOX_CHANNEL, type InboxNotice } from '../domain/chat/frames';
import { InboxService } from '../domain/inbox/inbox';
import type { SessionPrincipal, SessionService } from '../domain/people/sessions';
import type { PgNotifications, Subscription } from '../db/notifications';

/** A client this far behind (unsent bytes) is cut off rather than buffered without bound. */
const MAX_BUFFERED_BYTES = 256 * 1024;

interface Stream {
  userId: string;
  sessionId: string;
  workspaceId: string;
  /** The person works conversations (not a viewer): their open stream makes them available for assignment. */
  works: boolean;
  res: ServerResponse;
}

export interface InboxHubOptions {
  notifications: PgNotifications;
  sessions: Pick<SessionService, 'isLive'>;
  inbox: InboxService;
  log: Pick<Logger, 'warn' | 'error'>;
  /** INBOX_HEARTBEAT_MS: the stream's ping, the session's re-check, presence and the queue's upkeep. */
  heartbeatMs: number;
  /** INBOX_OFFLINE_GRACE_MS: a person's stream gone this long counts as offline. */
  graceMs: number;
}

/**
 * The console inbox's live streams (Server-Sent Events) of this API process, built as the widget's sockets are
 * (api/chat-hub.ts): NOTIFY on a channel, the process's one LISTEN connection (db/notifications.ts), a hub that
 * forwards. The `conversations` table's trigger sends an `inbox` notice on INBOX_CHANNEL at every writer's commit (a
 * new conversation, a message, a hand-off, an assignment, a close), from any process; each API process forwards it to
 * the streams of that workspace. Each heartbeat the hub pings, re-checks every stream's session (a sign-out ends it), marks the
 * people whose inbox is open present and tends the queue (InboxService.rebalance).
 */
export class InboxHub {
  private readonly byWorkspace = new Map<string, Set<Stream>>();
  private readonly listener: Subscription;
  private timer: NodeJS.Timeout | null = null;
  private ticking = false;
  /** One queue upkeep at a time in this process (others are kept apart by the conditional updates). */
  private upkeep: Promise<void> = Promise.resolve();

  constructor(private readonly opts: InboxHubOptions) {
    this.listener = opts.notifications.subscribe([INBOX_CHANNEL], { onNotify: (_channel, payload) => this.onNotice(payload), onLost: () => this.closeAll() }, 'inbox streams');
  }

  get graceMs(): number {
    return this.opts.graceMs;
  }

  async start(): Promise<void> {
    await this.listener.start();
    this.timer = setInterval(() => void this.tick(), this.opts.heartbeatMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.listener.stop();
    this.closeAll();
    await this.upkeep;
  }

  get listening(): boolean {
    return this.listener.listening;
  }

  /** Streams open in this process. */
  get size(): number {
    let n = 0;
    for (const set of this.byWorkspace.values()) n += set.size;
    return n;
  }

  /** Takes over a response as the person's stream: `ready` first, then a `conversation` event per change, `ping`s between. */
  open(user: SessionPrincipal, res: ServerResponse): void {
    const stream: Stream = { userId: user.id, sessionId: user.sessionId, workspaceId: user.workspaceId, works: InboxService.works(user.role), res };
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      'x-content-type-options': 'nosniff',
    });
    let set = this.byWorkspace.get(user.workspaceId);
    if (!set) this.byWorkspace.set(user.workspaceId, (set = new Set()));
    set.add(stream);
    res.on('close', () => {
      const s = this.byWorkspace.get(stream.workspaceId);
      s?.delete(stream);
      if (s && !s.size) this.byWorkspace.delete(stream.workspaceId);
    });
    res.write(`retry: 3000\n\n`);
    this.send(stream, 'ready', { heartbeat_ms: this.opts.heartbeatMs });
    if (stream.works) this.schedule([stream.workspaceId], [stream]);
  }

  private send(stream: Stream, event: string, data: unknown): void {
    const res = stream.res;
    if (res.destroyed || res.writableEnded) return;
    if (res.writableLength > MAX_BUFFERED_BYTES) {
      res.destroy();
      return;
    }
    res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  private onNotice(payload: string): void {
    let notice: InboxNotice;
    try {
      notice = JSON.parse(payload) as InboxNotice;
    } catch {
      this.opts.log.warn({ bytes: payload.length }, 'inbox streams: malformed notice dropped');
      return;
    }
    if (notice.k !== 'inbox' || typeof notice.w !== 'string') return;
    const streams = this.byWorkspace.get(notice.w);
    if (!streams) return;
    for (const s of streams) this.send(s, 'conversation', { conversation_id: notice.c, change: notice.e, waiting: Boolean(notice.h) });
    // Someone new waits, or someone's load changed: automatic assignment looks again.
    if (notice.e !== 'activity') this.schedule([notice.w], []);
  }

  /** Presence for these streams' people, then the queue's upkeep for these workspaces; one at a time. */
  private schedule(workspaceIds: string[], present: Stream[]): void {
    this.upkeep = this.upkeep
      .then(async () => {
        await this.opts.inbox.store.touch(present.filter((s) => s.works).map((s) => ({ userId: s.userId, workspaceId: s.workspaceId })));
        await this.opts.inbox.rebalance(workspaceIds, this.opts.graceMs);
      })
      .catch((err: unknown) => this.opts.log.warn({ err: (err as Error).message }, 'inbox: queue upkeep failed; retrying on the next heartbeat'));
  }

  private async tick(): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      const streams = [...this.byWorkspace.values()].flatMap((s) => [...s]);
      for (const s of streams) this.send(s, 'ping', {});
      // A signed-out (or expired, or removed) session's stream ends.
      const live = await Promise.all(streams.map((s) => this.opts.sessions.isLive(s.sessionId).catch(() => true)));
      streams.forEach((s, i) => {
        if (!live[i]) s.res.end();
      });
      const kept = streams.filter((_, i) => live[i]);
      this.schedule([...this.byWorkspace.keys()], kept);
      await this.upkeep;
    } finally {
      this.ticking = false;
    }
  }

  private closeAll(): void {
    for (const set of this.byWorkspace.values()) for (const s of set) s.res.end();
  }
}
