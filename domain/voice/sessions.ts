import type { EntityManager } from '@mikro-orm/postgresql';
import { Call, Recording, VoiceRecordingChunk, VoiceSession, VoiceWorker, type CallStatus, type ICall, type IRecording, type IVoiceSession } from '../../db/entities';
import { DomainError } from '../errors';
import { newId } from '../../lib/ids';
import type { CreditService } from '../billing/credits';
import type { BlobRefRepository } from '../storage/blob-refs';
import type { BlobStore } from '../ports/blob-store';
import { VOICE_SIGNALS, type TransportKind } from '../ports/voice';

/** The PostgreSQL channel the signalling relay wakes on (payload `offer:<vs>` or `answer:<vs>`); control notices go on VOICE_CONTROL. */
export { VOICE_SIGNALS };
/** Control notices to a live session's media activity: `{s: <vs>, k: 'inject'|'end', text?, reason?}`. */
export const VOICE_CONTROL = 'voice_control';

export interface VoiceLimits {
  /** Connected sessions and calls at once per workspace (VOICE_MAX_CONCURRENT). */
  maxConcurrent: number;
  /** Credits one minute spends (BILLING_CREDITS_PER_VOICE_MINUTE). */
  creditsPerMinute: number;
  /** Browser sessions at once (joining or live) per visitor and per client address (VOICE_MAX_SESSIONS_PER_VISITOR / _PER_ADDRESS). */
  perVisitor?: number;
  perAddress?: number;
  /** Of maxConcurrent, slots only API calls may take (VOICE_SLOTS_RESERVED_FOR_API). */
  reservedForApi?: number;
  /** How long a `starting` session counts against its visitor and address (VOICE_JOIN_TIMEOUT_SECONDS). */
  joinWindowMs?: number;
}

/** The defaults of app/config.ts. */
const DEFAULT_LIMITS = { perVisitor: 2, perAddress: 4, reservedForApi: 1, joinWindowMs: 60_000 };

const LIVE_CALL: CallStatus[] = ['calling', 'ringing', 'in_progress'];

/** A worker not heard from for this long no longer counts towards the installation's voice capacity (it reports every 10 s). */
export const VOICE_WORKER_STALE_MS = 30_000;

export interface RecordingView {
  id: string;
  kind: 'caller' | 'agent' | 'combined';
  mime_type: string;
  channels: number;
  duration_ms: number;
  bytes: number;
  voice_session_id: string | null;
  call_id: string | null;
  created_at: string;
}

/**
 * Voice sessions and calls as rows: the concurrency limit (counted under a per-workspace
 * advisory lock, so two processes never both take the fifth slot), the first minute's
 * credits, the signalling relay's offer/answer, and the records a session leaves
 * (recordings, duration, why it ended).
 */
export class VoiceSessionService {
  /** A blob owner kind (BlobRefRepository): how many recordings refer to these bytes. */
  static blobUses(em: EntityManager, sha256: string): Promise<number> {
    return em.count(Recording, { blobSha256: sha256 });
  }

  constructor(
    private readonly em: EntityManager,
    private readonly credits: CreditService,
    private readonly limits: VoiceLimits,
    private readonly blobRefs: Pick<BlobRefRepository, 'releaseBlob'>,
  ) {}

  /** Sessions starting and live in every workspace, for the operator's gauges (app/metrics-backlog.ts; voice_sessions_active_idx answers them). */
  async activeCounts(): Promise<{ starting: number; live: number }> {
    const [starting, live] = await Promise.all([this.em.fork().count(VoiceSession, { status: 'starting' }), this.em.fork().count(VoiceSession, { status: 'live' })]);
    return { starting, live };
  }

  /**
   * Opens a browser session (`starting`) and pays the first minute. A joining session
   * holds no workspace slot (it takes one when its media connects: markLive), so abandoned
   * starts cannot lock a workspace's voice; it counts against its visitor and its client
   * address until it connects or its join window ends: past either cap, 429 `rate_limited`
   * with Retry-After. 429 concurrent_voice_limit_reached when the widget's share of the
   * workspace's slots is taken by connected sessions and calls; 402 out_of_credits (and no
   * session) when the workspace cannot pay.
   */
  async reserveSession(s: { workspaceId: string; siteId: string | null; conversationId: string; agentId: string; customerId: string | null; transport: TransportKind; visitorKey?: string; clientAddress?: string }): Promise<IVoiceSession> {
    const id = newId('vs');
    const row = await this.locked(s.workspaceId, async (em) => {
      await this.checkVisitorCaps(em, s.workspaceId, s.visitorKey, s.clientAddress);
      await this.checkCapacity(em, s.workspaceId, true);
      const created = em.create(VoiceSession, {
        id,
        workspaceId: s.workspaceId,
        siteId: s.siteId,
        conversationId: s.conversationId,
        agentId: s.agentId,
        customerId: s.customerId,
        transport: s.transport,
        roomName: id,
        status: 'starting',
        creditsSpent: 0,
        visitorKey: s.visitorKey ?? null,
        clientAddress: s.clientAddress ?? null,
        createdAt: new Date(),
        updatedAt: new Date(),
      });
      await em.flush();
      return created;
    });
    await this.payMinute(s.workspaceId, id, 1).catch(async (err) => {
      await this.em.fork().nativeDelete(VoiceSession, { id });
      throw err;
    });
    return row;
  }

  /**
   * Takes a slot for a dial-out call (status `calling`) and pays its first minute. A call
   * from the widget (`siteId` set) shares the widget's part of the workspace's slots; an
   * API call (`siteId` null) may also take the slots kept for the API.
   */
  async reserveCall(c: { workspaceId: string; siteId: string | null; conversationId: string; agentId: string; phone: string; provider: string; destinationClass?: 'fixed' | 'mobile' | 'other'; creditsPerMinute?: number }): Promise<ICall> {
    const id = newId('call');
    const now = new Date();
    const row = await this.locked(c.workspaceId, async (em) => {
      await this.checkCapacity(em, c.workspaceId, c.siteId !== null);
      const created = em.create(Call, { id, workspaceId: c.workspaceId, siteId: c.siteId, conversationId: c.conversationId, agentId: c.agentId, phone: c.phone, provider: c.provider, direction: 'outbound', status: 'calling', statusHistory: [{ status: 'calling', at: now.toISOString() }], creditsSpent: 0, destinationClass: c.destinationClass ?? null, creditsPerMinute: c.creditsPerMinute ?? null, createdAt: now, updatedAt: now });
      await em.flush();
      return created;
    });
    await this.payMinute(c.workspaceId, id, 1).catch(async (err) => {
      await this.em.fork().nativeDelete(Call, { id });
      throw err;
    });
    return row;
  }

  /** Sessions and calls holding a workspace slot now (connected sessions; calls from `calling` on). */
  async activeCount(workspaceId: string): Promise<number> {
    return (await this.usage(this.em.fork(), workspaceId)).total;
  }

  private get l() {
    return { ...DEFAULT_LIMITS, ...this.limits };
  }

  /** Slots taken: all of them, and the widget's (browser sessions and widget calls). */
  private async usage(em: EntityManager, workspaceId: string, except?: string): Promise<{ total: number; widget: number }> {
    const sessions = await em.count(VoiceSession, { workspaceId, status: 'live', ...(except ? { id: { $ne: except } } : {}) });
    const apiCalls = await em.count(Call, { workspaceId, status: { $in: LIVE_CALL }, siteId: null });
    const widgetCalls = await em.count(Call, { workspaceId, status: { $in: LIVE_CALL }, siteId: { $ne: null } });
    return { total: sessions + apiCalls + widgetCalls, widget: sessions + widgetCalls };
  }

  // ---- the installation's voice capacity (the workers') ----

  /** A voice worker reports its capacity (at start, then every 10 s). */
  async workerHeartbeat(id: string, capacity: number): Promise<void> {
    const now = new Date();
    await this.em.fork().upsert(VoiceWorker, { id, capacity, heartbeatAt: now, startedAt: now }, { onConflictFields: ['id'], onConflictMergeFields: ['capacity', 'heartbeatAt'] });
  }

  /** A voice worker stopping: its capacity goes at once. */
  async workerGone(id: string): Promise<void> {
    await this.em.fork().nativeDelete(VoiceWorker, { id });
  }

  /**
   * The installation's voice capacity: the sum of the capacities of the workers heard from within
   * VOICE_WORKER_STALE_MS (a dead worker's goes then; its sessions and calls end when their workflows
   * see its heartbeats stop, or at the maintenance reconciliation), and how many workers that is.
   * Null when no voice worker has reported (the workspace limits alone apply: nothing would run the session anyway).
   */
  async installationCapacity(em: EntityManager = this.em.fork()): Promise<{ capacity: number; workers: number } | null> {
    const live = await em.find(VoiceWorker, { heartbeatAt: { $gt: new Date(Date.now() - VOICE_WORKER_STALE_MS) } }, { fields: ['capacity'] });
    if (!live.length) return null;
    return { capacity: live.reduce((n, w) => n + w.capacity, 0), workers: live.length };
  }

  /** Connected sessions and calls from `calling` on, in every workspace: what the workers carry. */
  private async installationLoad(em: EntityManager, except?: string): Promise<number> {
    const sessions = await em.count(VoiceSession, { status: 'live', ...(except ? { id: { $ne: except } } : {}) });
    const calls = await em.count(Call, { status: { $in: LIVE_CALL } });
    return sessions + calls;
  }

  /**
   * 429 concurrent_voice_limit_reached when the installation's workers are full (whatever the
   * workspace's own limit), or the workspace, or the widget's share of it, is.
   */
  private async checkCapacity(em: EntityManager, workspaceId: string, widget: boolean, except?: string): Promise<void> {
    const installation = await this.installationCapacity(em);
    if (installation) {
      const load = await this.installationLoad(em, except);
      if (load >= installation.capacity) {
        throw new DomainError(
          'concurrent_voice_limit_reached',
          `This installation's voice workers are full: ${load} voice sessions or calls running, capacity ${installation.capacity} (${installation.workers} worker${installation.workers === 1 ? '' : 's'}, VOICE_WORKER_CAPACITY each); try again when one ends`,
        );
      }
    }
    const used = await this.usage(em, workspaceId, except);
    const { maxConcurrent } = this.limits;
    if (used.total >= maxConcurrent) {
      throw new DomainError('concurrent_voice_limit_reached', `This workspace already has ${used.total} voice sessions or calls running (limit ${maxConcurrent})`);
    }
    const widgetMax = maxConcurrent - this.l.reservedForApi;
    if (widget && used.widget >= widgetMax) {
      throw new DomainError('concurrent_voice_limit_reached', `This workspace's widget voice already has ${used.widget} sessions or calls running (limit ${widgetMax}; ${this.l.reservedForApi} kept for API calls)`);
    }
  }

  /**
   * 429 rate_limited (Retry-After: when the oldest joining session's window ends) when the
   * visitor or the client address already has its sessions, joining or live. A joining
   * session past its join window no longer counts (its media activity ends it then anyway).
   */
  private async checkVisitorCaps(em: EntityManager, workspaceId: string, visitorKey: string | undefined, clientAddress: string | undefined): Promise<void> {
    const windowStart = new Date(Date.now() - this.l.joinWindowMs);
    const active = { $or: [{ status: 'live' as const }, { status: 'starting' as const, createdAt: { $gt: windowStart } }] };
    const caps: Array<[string, object, number]> = [];
    if (visitorKey) caps.push(['this visitor', { visitorKey }, this.l.perVisitor]);
    if (clientAddress) caps.push(['this address', { clientAddress }, this.l.perAddress]);
    for (const [who, where, max] of caps) {
      const rows = await em.find(VoiceSession, { workspaceId, ...where, ...active }, { fields: ['status', 'createdAt'] });
      if (rows.length < max) continue;
      const ends = rows.filter((r) => r.status === 'starting').map((r) => new Date(r.createdAt).getTime() + this.l.joinWindowMs);
      const retry = Math.max(1, Math.ceil(((ends.length ? Math.min(...ends) : Date.now() + this.l.joinWindowMs) - Date.now()) / 1000));
      throw new DomainError('rate_limited', `Too many voice sessions from ${who} (at most ${max} joining or live); end one first`, {}, { retryAfterSeconds: retry });
    }
  }

  /**
   * Runs `fn` under the installation's voice lock, then the workspace's: counts and inserts are serialised
   * across processes (the installation's capacity is shared by every workspace; always taken in that order).
   */
  private async locked<T>(workspaceId: string, fn: (em: EntityManager) => Promise<T>): Promise<T> {
    return this.em.fork().transactional(async (em) => {
      // raw SQL: an advisory lock has no ORM form; it serialises the count-then-insert across processes.
      // eslint-disable-next-line no-restricted-syntax
      await em.execute(`select pg_advisory_xact_lock(hashtext('voice-slots:installation'))`);
      // eslint-disable-next-line no-restricted-syntax
      await em.execute(`select pg_advisory_xact_lock(hashtext('voice-slots:' || ?))`, [workspaceId]);
      return fn(em);
    });
  }

  /**
   * Pays minute `n` of a session or call (`<id>:minute:<n>`: the same minute is paid
   * once, whatever retries); 402 out_of_credits when the balance cannot.
   */
  async payMinute(workspaceId: string, id: string, n: number): Promise<void> {
    // A call pays the price of its destination's class, fixed on its row when it was placed.
    const rate = (id.startsWith('call_') ? (await this.em.fork().findOne(Call, { id }, { fields: ['creditsPerMinute'] }))?.creditsPerMinute : null) ?? this.limits.creditsPerMinute;
    await this.credits.spend(workspaceId, rate, `voice minute ${n}`, `${id}:minute:${n}`);
    const entity = id.startsWith('call_') ? Call : VoiceSession;
    await this.em.fork().nativeUpdate(entity as typeof VoiceSession, { id }, { creditsSpent: n * rate });
  }

  async session(workspaceId: string, id: string): Promise<IVoiceSession | null> {
    return this.em.fork().findOne(VoiceSession, { id, workspaceId });
  }

  async sessionById(id: string): Promise<IVoiceSession | null> {
    return this.em.fork().findOne(VoiceSession, { id });
  }

  /** The room the transport made (its name, and the transport: a workspace's own voice server may differ from the installation's). */
  async setRoom(id: string, roomName: string, transport?: TransportKind): Promise<void> {
    await this.em.fork().nativeUpdate(VoiceSession, { id }, { roomName, ...(transport ? { transport } : {}) });
  }

  /**
   * The session's media connected: it takes a workspace slot now, within the widget's
   * share. False (and still `starting`) when the workspace or that share is full: the
   * media activity then ends it unconnected, and its minutes are refunded.
   */
  async markLive(id: string, workspaceId?: string): Promise<boolean> {
    // The media activity knows the workspace: one lookup fewer between connected and live.
    const ws = workspaceId ?? (await this.em.fork().findOne(VoiceSession, { id }, { fields: ['workspaceId'] }))?.workspaceId;
    if (!ws) return true;
    return this.locked(ws, async (em) => {
      try {
        await this.checkCapacity(em, ws, true, id);
      } catch (err) {
        if (err instanceof DomainError && err.code === 'concurrent_voice_limit_reached') return false;
        throw err;
      }
      // Only a `starting` session goes live (one stopped meanwhile is left as it is).
      await em.nativeUpdate(VoiceSession, { id, status: 'starting' }, { status: 'live', connectedAt: new Date() });
      return true;
    });
  }

  /** Sessions still starting or live, untouched since `before`: the reconciliation asks Temporal about each one's workflow. */
  async stillOpen(before: Date, limit: number): Promise<string[]> {
    const rows = await this.em.fork().find(VoiceSession, { status: { $in: ['starting', 'live'] }, updatedAt: { $lt: before } }, { fields: ['id'], orderBy: { updatedAt: 'asc' }, limit });
    return rows.map((r) => r.id);
  }

  /** Calls not yet final, untouched since `before` (see stillOpen). */
  async callsStillOpen(before: Date, limit: number): Promise<string[]> {
    const rows = await this.em.fork().find(Call, { status: { $in: ['calling', 'ringing', 'in_progress'] }, updatedAt: { $lt: before } }, { fields: ['id'], orderBy: { updatedAt: 'asc' }, limit });
    return rows.map((r) => r.id);
  }

  /** Ends the session's row once (a later end keeps the first reason). */
  async markEnded(id: string, reason: string, failed = false): Promise<void> {
    const em = this.em.fork();
    const row = await em.findOne(VoiceSession, { id });
    if (!row || row.status === 'ended' || row.status === 'failed') return;
    const endedAt = new Date();
    row.status = failed ? 'failed' : 'ended';
    row.endReason = reason.slice(0, 200);
    row.endedAt = endedAt;
    row.durationMs = row.connectedAt ? endedAt.getTime() - new Date(row.connectedAt).getTime() : 0;
    await em.flush();
    if (!row.connectedAt) await this.refundUnconnected(row.workspaceId, id, 'voice session never connected');
  }

  // ---- the direct transport's signalling relay (the API's socket ↔ the worker's peer) ----

  /** The first signalling socket's claim on the room (its rtc_token is single-use): false when another socket claimed it, or the session is over. */
  async claimRoom(id: string): Promise<boolean> {
    const n = await this.em.fork().nativeUpdate(VoiceSession, { id, rtcClaimedAt: null, status: { $in: ['starting', 'live'] } }, { rtcClaimedAt: new Date() });
    return n > 0;
  }

  /** Stores the browser's offer for the session's agent and wakes it. */
  async putOffer(id: string, sdp: string): Promise<boolean> {
    return this.em.fork().transactional(async (em) => {
      const n = await em.nativeUpdate(VoiceSession, { id, status: { $in: ['starting', 'live'] } }, { offerSdp: sdp, answerSdp: null });
      // raw SQL: pg_notify has no ORM form; sent at commit, with the offer.
      // eslint-disable-next-line no-restricted-syntax
      if (n) await em.execute('select pg_notify(?, ?)', [VOICE_SIGNALS, `offer:${id}`]);
      return n > 0;
    });
  }

  async offer(id: string): Promise<string | null> {
    const row = await this.em.fork().findOne(VoiceSession, { id });
    return row?.offerSdp ?? null;
  }

  async putAnswer(id: string, sdp: string): Promise<void> {
    await this.em.fork().transactional(async (em) => {
      await em.nativeUpdate(VoiceSession, { id }, { answerSdp: sdp });
      // raw SQL: pg_notify has no ORM form; sent at commit, with the answer.
      // eslint-disable-next-line no-restricted-syntax
      await em.execute('select pg_notify(?, ?)', [VOICE_SIGNALS, `answer:${id}`]);
    });
  }

  async answer(id: string): Promise<{ sdp: string | null; status: IVoiceSession['status'] } | null> {
    const row = await this.em.fork().findOne(VoiceSession, { id });
    return row ? { sdp: row.answerSdp ?? null, status: row.status } : null;
  }

  /** A control notice to the session's media activity (inject a text turn, end politely). */
  async control(id: string, notice: { k: 'inject'; text: string } | { k: 'end'; reason: string }): Promise<void> {
    // raw SQL: pg_notify has no ORM form.
    // eslint-disable-next-line no-restricted-syntax
    await this.em.fork().execute('select pg_notify(?, ?)', [VOICE_CONTROL, JSON.stringify({ s: id, ...notice })]);
  }

  // ---- calls ----

  async callStatus(id: string, status: CallStatus, extra: { error?: string } = {}): Promise<void> {
    const em = this.em.fork();
    const row = await em.findOne(Call, { id });
    // A terminal status is final, and a repeat of the current one is no new step of the history.
    if (!row || row.status === status || ['completed', 'failed', 'no_answer', 'busy'].includes(row.status)) return;
    const now = new Date();
    row.status = status;
    row.statusHistory = [...row.statusHistory, { status, at: now.toISOString() }];
    if (status === 'in_progress') row.answeredAt = now;
    if (['completed', 'failed', 'no_answer', 'busy'].includes(status)) {
      row.endedAt = now;
      row.durationMs = row.answeredAt ? now.getTime() - new Date(row.answeredAt).getTime() : 0;
    }
    if (extra.error) row.error = extra.error.slice(0, 500);
    await em.flush();
    if (row.endedAt && !row.answeredAt) await this.refundUnconnected(row.workspaceId, id, `call ${status}, never answered`);
  }

  /**
   * A session or call whose media never connected (the browser never joined, the phone was
   * busy or not answered, the workflow could not start) bought nothing: its first minute,
   * paid when it was reserved (and any further minute paid while it waited), goes back to the workspace (once; the
   * row then shows 0 spent).
   */
  private async refundUnconnected(workspaceId: string, id: string, reason: string): Promise<void> {
    // Every minute paid, in order (a second one when the join timeout and the first billing period end together).
    let minute = 1;
    while (await this.credits.refund(workspaceId, `${id}:minute:${minute}`, `refund: ${reason}`)) minute++;
    if (minute === 1) return;
    const entity = id.startsWith('call_') ? Call : VoiceSession;
    await this.em.fork().nativeUpdate(entity as typeof VoiceSession, { id }, { creditsSpent: 0 });
  }

  async call(workspaceId: string, id: string): Promise<ICall | null> {
    return this.em.fork().findOne(Call, { id, workspaceId });
  }

  async callById(id: string): Promise<ICall | null> {
    return this.em.fork().findOne(Call, { id });
  }

  /** Calls newest first, keyset-paged on (created_at, id). */
  async calls(workspaceId: string, q: { limit: number; after?: { createdAt: Date; id: string } }): Promise<ICall[]> {
    const where = q.after
      ? { workspaceId, $or: [{ createdAt: { $lt: q.after.createdAt } }, { createdAt: q.after.createdAt, id: { $lt: q.after.id } }] }
      : { workspaceId };
    return this.em.fork().find(Call, where, { orderBy: { createdAt: 'desc', id: 'desc' }, limit: q.limit });
  }

  // ---- recordings ----

  async saveRecording(r: Omit<IRecording, 'id' | 'createdAt'>): Promise<IRecording> {
    const em = this.em.fork();
    const key = r.voiceSessionId ? { voiceSessionId: r.voiceSessionId, kind: r.kind } : { callId: r.callId, kind: r.kind };
    const existing = await em.findOne(Recording, key);
    if (existing) return existing;
    const row = em.create(Recording, { ...r, id: newId('rec'), createdAt: new Date() });
    await em.flush();
    return row;
  }

  async recordingsOf(owner: { voiceSessionId?: string; callId?: string }): Promise<IRecording[]> {
    return this.em.fork().find(Recording, owner.voiceSessionId ? { voiceSessionId: owner.voiceSessionId } : { callId: owner.callId }, { orderBy: { kind: 'asc' } });
  }

  async recordingsOfConversation(workspaceId: string, conversationId: string): Promise<IRecording[]> {
    return this.em.fork().find(Recording, { workspaceId, conversationId }, { orderBy: { createdAt: 'asc', kind: 'asc' } });
  }

  async recording(workspaceId: string, id: string): Promise<IRecording | null> {
    return this.em.fork().findOne(Recording, { id, workspaceId });
  }

  /** Drops a finished session's spool rows; the chunk blobs no other spool uses (the caller deletes them). */
  async dropChunks(sessionId: string): Promise<string[]> {
    const em = this.em.fork();
    const rows = await em.find(VoiceRecordingChunk, { sessionId });
    await em.nativeDelete(VoiceRecordingChunk, { sessionId });
    // Content-addressed: identical PCM (silence) may be another live session's chunk too.
    const shas = [...new Set(rows.map((r) => r.blobSha256))];
    const still = shas.length ? await em.find(VoiceRecordingChunk, { blobSha256: { $in: shas } }, { fields: ['blobSha256'] }) : [];
    const kept = new Set(still.map((r) => r.blobSha256));
    return shas.filter((s) => !kept.has(s));
  }

  /**
   * Drops a saved session's spool rows, then each chunk's bytes that no owner of any kind
   * still refers to: chunks are predictable (5 s of silence is the same bytes in every call),
   * so the same blob can be another workspace's upload, file or media. Best effort: a blob
   * left behind costs space, never data.
   */
  async releaseSpool(blobs: BlobStore, sessionId: string): Promise<void> {
    for (const sha of await this.dropChunks(sessionId)) await this.blobRefs.releaseBlob(this.em, blobs, sha).catch(() => undefined);
  }
}

export function recordingView(r: IRecording): RecordingView {
  return {
    id: r.id,
    kind: r.kind,
    mime_type: r.mimeType,
    channels: r.channels,
    duration_ms: r.durationMs,
    bytes: Number(r.bytes),
    voice_session_id: r.voiceSessionId ?? null,
    call_id: r.callId ?? null,
    created_at: new Date(r.createdAt).toISOString(),
  };
}
