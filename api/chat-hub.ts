import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import { z } from 'zod';
import { CHAT_CHANNEL } from '../domain/chat/frames';
import { SocketAccess, type SocketGrant } from '../domain/chat/socket-access';
import { ChatTranscript, replyFrame } from '../domain/chat/transcript';
import type { PgNotifications, Subscription } from '../db/notifications';
import { DomainError } from '../lib/errors';
import { ApiError, httpAnswerOf } from './http-errors';
import type { SiteService } from '../domain/widget/sites';

/** WebSocket close codes used here (RFC 6455 §7.4.1 and the IANA registry). */
export const CLOSE_POLICY_VIOLATION = 1008;
const CLOSE_GOING_AWAY = 1001;
const CLOSE_SERVICE_RESTART = 1012;

/** A client this far behind (unsent bytes) is cut off rather than buffered without bound. */
const MAX_BUFFERED_BYTES = 1024 * 1024;

const PING = JSON.stringify({ type: 'ping' });

/** Sockets open at once per conversation and per client address (CHAT_MAX_SOCKETS_PER_*). */
export interface SocketCaps {
  perConversation: number;
  perAddress: number;
}

/** The defaults of app/config.ts: a visitor's tabs and devices; many visitors behind one NAT. */
export const DEFAULT_SOCKET_CAPS: SocketCaps = { perConversation: 10, perAddress: 100 };

/** What holds a socket slot: the TCP connection of the handshake (its `close` frees the slot). */
interface Connection {
  destroyed: boolean;
  once(event: 'close', listener: () => void): unknown;
}

const Notice = z.discriminatedUnion('k', [
  z.object({ k: z.literal('frame'), c: z.string().min(1), f: z.looseObject({ type: z.string(), reply_id: z.string().optional() }) }),
  z.object({ k: z.literal('ref'), c: z.string().min(1), m: z.string().min(1) }),
  z.object({ k: z.literal('recheck'), site: z.string().optional(), c: z.string().optional() }),
]);

/** A grant as checked at the handshake, stamped with the recheck count seen before the check began. */
export interface CheckedGrant extends SocketGrant {
  seq: number;
}

interface Subscriber {
  ws: WebSocket;
  grant: SocketGrant;
  /** While catch-up is being sent, live frames wait here (with their reply id, to drop ones catch-up already sent). */
  pending: Array<{ json: string; replyId?: string; type: string }> | null;
}

/**
 * The widget reply sockets of this API process. Frames are produced anywhere (mostly
 * activities in worker processes) and published with NOTIFY on `chat_frames`; each API
 * process LISTENs on one dedicated connection and forwards every notice to the sockets
 * it holds for that conversation.
 *
 * Why LISTEN/NOTIFY: it is already the bus for key-cache and dense-index invalidation,
 * so cross-process fan-out needs no extra infrastructure (no Redis, no broker), and a
 * notice sent inside a transaction is delivered only if it commits. Its one limit, a
 * payload under 8000 bytes, is handled by the publisher: a large reply travels as a
 * `ref` to its persisted chat message, which the listener loads once per process.
 *
 * NOTIFY is not durable: a process that is not listening misses notices. So a socket is
 * only open while its process listens: when the connection drops, every socket closes
 * with 1012 (the client reconnects and catches up with `after`), and handshakes answer
 * 503 until the listener is back.
 */
/**
 * A conversation id is the widget socket's capability (whoever holds it may listen), so
 * logs carry only its prefix: enough to correlate lines, not enough to connect.
 */
const loggable = (conversationId: string) => `${conversationId.slice(0, 9)}…`;

export class ChatHub {
  private readonly byConversation = new Map<string, Set<Subscriber>>();
  /** Per-conversation delivery chain, so a `ref` being loaded is never overtaken by a later frame. */
  private readonly queues = new Map<string, Promise<void>>();
  private readonly listener: Subscription;
  private readonly access: SocketAccess;
  private readonly transcript: ChatTranscript;
  private readonly log: Pick<Logger, 'warn' | 'error'>;
  private readonly pingIntervalMs: number;
  private pingTimer: NodeJS.Timeout | null = null;
  private tickRecheckRunning = false;
  /** Counts recheck notices; a handshake that saw another value re-checks once attached. */
  private recheckSeq = 0;
  private readonly caps: SocketCaps;
  /** Slots held (handshakes in progress and open sockets), by conversation and by client address. */
  private readonly slotsByConversation = new Map<string, number>();
  private readonly slotsByAddress = new Map<string, number>();

  constructor(opts: {
    em: EntityManager;
    sites: SiteService;
    notifications: PgNotifications;
    log: Pick<Logger, 'warn' | 'error'>;
    pingIntervalMs: number;
    maxSockets?: SocketCaps;
  }) {
    this.caps = opts.maxSockets ?? DEFAULT_SOCKET_CAPS;
    this.access = new SocketAccess(opts.em, opts.sites);
    this.transcript = new ChatTranscript(opts.em);
    this.log = opts.log;
    this.pingIntervalMs = opts.pingIntervalMs;
    this.listener = opts.notifications.subscribe(
      [CHAT_CHANNEL],
      { onNotify: (_channel, payload) => this.onNotice(payload), onLost: () => this.closeAll(CLOSE_SERVICE_RESTART, 'reconnect and resume with after') },
      'chat sockets',
    );
  }

  async start(): Promise<void> {
    await this.listener.start();
    this.pingTimer = setInterval(() => this.tick(), this.pingIntervalMs);
    this.pingTimer.unref();
  }

  async stop(): Promise<void> {
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.pingTimer = null;
    await this.listener.stop();
    this.closeAll(CLOSE_GOING_AWAY, 'server shutting down');
  }

  /** Sockets open in this process (all conversations). */
  get size(): number {
    let n = 0;
    for (const set of this.byConversation.values()) n += set.size;
    return n;
  }

  /**
   * Takes a socket slot for a handshake, before any lookup, or answers 429 `rate_limited`
   * when the conversation or the client address already holds its cap (counted in this
   * process, which is where the sockets are). Slots are taken at the handshake, not when
   * the socket is attached, so simultaneous handshakes cannot all pass the check; the slot
   * is freed when the handshake's TCP connection closes, whatever happened to it (refused,
   * upgrade failed, socket closed later).
   */
  reserve(conversationId: string, address: string, connection: Connection): void {
    const conv = this.slotsByConversation.get(conversationId) ?? 0;
    const addr = this.slotsByAddress.get(address) ?? 0;
    if (conv >= this.caps.perConversation) {
      throw new ApiError(429, 'rate_limited', `Too many reply sockets open to this conversation (at most ${this.caps.perConversation}); close one first`);
    }
    if (addr >= this.caps.perAddress) {
      throw new ApiError(429, 'rate_limited', `Too many reply sockets open from this address (at most ${this.caps.perAddress}); close one first`);
    }
    this.slotsByConversation.set(conversationId, conv + 1);
    this.slotsByAddress.set(address, addr + 1);
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      decrement(this.slotsByConversation, conversationId);
      decrement(this.slotsByAddress, address);
    };
    connection.once('close', release);
    // Closed before the listener was added: its close event is already gone.
    if (connection.destroyed) release();
  }

  /** Slots held by a conversation (handshakes in progress and open sockets). */
  slotsOf(conversationId: string): number {
    return this.slotsByConversation.get(conversationId) ?? 0;
  }

  /** The handshake's checks; throws the 403s (or 503 while not listening). */
  async authorize(grant: SocketGrant): Promise<CheckedGrant> {
    const seq = this.recheckSeq;
    if (!this.listener.listening) throw new ApiError(503, 'socket_unavailable', 'Reply sockets are unavailable right now; retry shortly');
    await this.access.authorize(grant).catch((err: unknown) => {
      // unknown_site is a 404 on the HTTP API; a refused socket upgrade is always a 403, with the refusal's code.
      if (!(err instanceof DomainError)) throw err;
      const { status, error } = httpAnswerOf(err.code);
      throw status < 500 ? new ApiError(403, error, err.message) : err;
    });
    return { ...grant, seq };
  }

  /**
   * Binds an upgraded socket to its conversation. With `after` (the last message id the
   * client has), the replies it missed are sent first, in order, then live frames.
   */
  async attach(ws: WebSocket, grant: CheckedGrant, after?: string): Promise<void> {
    const { seq, ...socketGrant } = grant;
    // Live frames wait while the catch-up is read (the hand-off state, then the replies missed), so none is lost or
    // sent before an older state.
    const sub: Subscriber = { ws, grant: socketGrant, pending: [] };
    // Registered before catch-up is read, so nothing published meanwhile is lost.
    let set = this.byConversation.get(grant.conversationId);
    if (!set) this.byConversation.set(grant.conversationId, (set = new Set()));
    set.add(sub);
    ws.on('close', () => this.detach(sub));
    // Receive-only: whatever the client sends is ignored.
    ws.on('message', () => undefined);
    if (seq !== this.recheckSeq) void this.recheck([sub]);
    try {
      // Who answers now: a hand-off or hand-back made while this client was away is never missed.
      this.send(sub, JSON.stringify({ type: 'handoff', active: await this.transcript.handedOff(grant.conversationId) }));
      const sent = new Set<string>();
      for (const row of after ? await this.transcript.repliesAfter(grant.conversationId, after) : []) {
        this.send(sub, JSON.stringify(replyFrame(row)));
        sent.add(row.id);
      }
      const waiting = sub.pending ?? [];
      sub.pending = null;
      for (const frame of waiting) {
        // A reply (or its deltas) already sent whole by catch-up is not sent again.
        if (frame.replyId && sent.has(frame.replyId) && (frame.type === 'reply' || frame.type === 'reply_delta')) continue;
        this.send(sub, frame.json);
      }
    } catch (err) {
      this.log.error({ err }, 'chat socket catch-up failed');
      ws.close(1011, 'catch-up failed');
    }
  }

  private detach(sub: Subscriber): void {
    const set = this.byConversation.get(sub.grant.conversationId);
    if (!set) return;
    set.delete(sub);
    if (!set.size) this.byConversation.delete(sub.grant.conversationId);
  }

  private send(sub: Subscriber, json: string): void {
    if (sub.ws.readyState !== sub.ws.OPEN) return;
    if (sub.ws.bufferedAmount > MAX_BUFFERED_BYTES) {
      sub.ws.terminate();
      return;
    }
    sub.ws.send(json);
  }

  private deliver(conversationId: string, frame: { json: string; replyId?: string; type: string }): void {
    for (const sub of this.byConversation.get(conversationId) ?? []) {
      if (sub.pending) sub.pending.push(frame);
      else this.send(sub, frame.json);
    }
  }

  private enqueue(conversationId: string, job: () => Promise<void> | void): void {
    const next = (this.queues.get(conversationId) ?? Promise.resolve())
      .then(job)
      .catch((err) => this.log.error({ err, conversation: loggable(conversationId) }, 'chat frame delivery failed'))
      .finally(() => {
        if (this.queues.get(conversationId) === next) this.queues.delete(conversationId);
      });
    this.queues.set(conversationId, next);
  }

  /** One notification. A malformed one is logged and dropped; nothing here may throw into the pg client. */
  private onNotice(payload: string): void {
    let notice: z.infer<typeof Notice>;
    try {
      notice = Notice.parse(JSON.parse(payload));
    } catch (err) {
      this.log.warn({ err: (err as Error).message, bytes: payload.length }, 'chat sockets: malformed notice dropped');
      return;
    }
    if (notice.k === 'recheck') {
      this.recheckSeq++;
      const matches = (sub: Subscriber) => (notice.site !== undefined && sub.grant.siteId === notice.site) || (notice.c !== undefined && sub.grant.conversationId === notice.c);
      void this.recheck(this.subscribers().filter(matches));
      return;
    }
    // Nothing held here for that conversation: nothing to load or send.
    if (!this.byConversation.has(notice.c)) return;
    if (notice.k === 'frame') {
      const frame = { json: JSON.stringify(notice.f), replyId: notice.f.reply_id, type: notice.f.type };
      this.enqueue(notice.c, () => this.deliver(notice.c, frame));
      return;
    }
    this.enqueue(notice.c, async () => {
      const row = await this.transcript.get(notice.m);
      if (!row || row.conversation_id !== notice.c) {
        this.log.warn({ conversation: loggable(notice.c), messageId: notice.m }, 'chat sockets: ref to a message not in that conversation dropped');
        return;
      }
      this.deliver(notice.c, { json: JSON.stringify(replyFrame(row)), replyId: row.id, type: 'reply' });
    });
  }

  private subscribers(): Subscriber[] {
    return [...this.byConversation.values()].flatMap((set) => [...set]);
  }

  /** Closes with 1008 the sockets whose authorization is gone; on a database error they stay open until the next check. */
  private async recheck(subs: Subscriber[]): Promise<void> {
    if (!subs.length) return;
    try {
      const allowed = await this.access.stillAllowed(subs.map((s) => s.grant));
      subs.forEach((sub, i) => {
        if (!allowed[i]) sub.ws.close(CLOSE_POLICY_VIOLATION, 'authorization lost');
      });
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'chat sockets: authorization re-check failed; retrying on the next tick');
    }
  }

  private tick(): void {
    const subs = this.subscribers();
    for (const sub of subs) if (!sub.pending) this.send(sub, PING);
    // A pass still running (a slow database) is not stacked on.
    if (this.tickRecheckRunning) return;
    this.tickRecheckRunning = true;
    void this.recheck(subs).finally(() => (this.tickRecheckRunning = false));
  }

  private closeAll(code: number, reason: string): void {
    for (const sub of this.subscribers()) sub.ws.close(code, reason);
  }
}

function decrement(map: Map<string, number>, key: string): void {
  const n = (map.get(key) ?? 0) - 1;
  if (n > 0) map.set(key, n);
  else map.delete(key);
}
