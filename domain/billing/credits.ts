import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { CreditBalance, CreditLedgerEntry, type ICreditLedgerEntry } from '../../db/entities';
import { DomainError } from '../errors';
import { newId } from '../../lib/ids';

/** A usage page's position: the UTC day and the kind (base64url) of the last row it showed. */
export const USAGE_CURSOR = /^(\d{4}-\d{2}-\d{2})\.([A-Za-z0-9_-]{0,400})$/;
import type { ModelPolicy } from '../agents/model-policy';

/** What each usage kind costs per unit, in BILLING_CURRENCY (config defaults; documented in docs/analytics-billing-support.md). */
export interface Prices {
  currency: string;
  msgapp_message: number;
  structured_extraction_page: number;
  /** Per 1,000 language-model tokens of agent replies. */
  llm_1k_tokens: number;
  /** Credits one voice minute spends (the voice sessions' spender uses it). */
  voice_minute_credits: number;
  /** Credits one dial-out call minute spends by destination class (absent: voice_minute_credits). */
  call_minute_credits?: { fixed: number; mobile: number; other: number };
}

export interface LedgerView {
  id: string;
  kind: 'grant' | 'spend' | 'refund';
  amount: number;
  balance_after: number;
  reason: string;
  reference: string | null;
  created_at: string;
}

const view = (e: ICreditLedgerEntry): LedgerView => ({
  id: e.id,
  kind: e.kind,
  amount: Number(e.amount),
  balance_after: Number(e.balanceAfter),
  reason: e.reason,
  reference: e.reference ?? null,
  created_at: new Date(e.createdAt).toISOString(),
});

/**
 * Credits and usage. Credits are granted by the operator (admin CLI `credits grant`) and
 * spent only by voice minutes (the contract's one credit error is 402 `out_of_credits`);
 * every other kind is metered in usage at the configured prices and never refused.
 * A spend locks the workspace's balance row, checks it and writes the ledger in one
 * transaction: concurrent spends queue on the row and the balance never goes negative
 * (a check constraint says so too). A spend names what it pays for (`reference`): the
 * same reference again is the same spend, not a second one.
 */
export class CreditService {
  constructor(
    private readonly em: EntityManager,
    private readonly prices: Prices,
    /** Per-model prices of language-model tokens (LLM_MODEL_PRICES); absent: every model at llm_1k_tokens. */
    private readonly models?: Pick<ModelPolicy, 'priceOf' | 'defaultModel'>,
  ) {}

  async balance(workspaceId: string): Promise<{ balance: number; granted: number; used: number; updated_at: string | null }> {
    const row = await this.em.fork().findOne(CreditBalance, { workspaceId });
    return { balance: Number(row?.balance ?? 0), granted: Number(row?.granted ?? 0), used: Number(row?.used ?? 0), updated_at: row ? new Date(row.updatedAt).toISOString() : null };
  }

  async grant(workspaceId: string, amount: number, reason = 'granted by the operator'): Promise<LedgerView> {
    if (!Number.isSafeInteger(amount) || amount <= 0) throw new DomainError('invalid_request', 'amount: a positive whole number of credits');
    return this.em.fork().transactional(async (em) => {
      const row = await this.locked(em, workspaceId);
      row.balance = Number(row.balance) + amount;
      row.granted = Number(row.granted) + amount;
      row.updatedAt = new Date();
      const entry = em.create(CreditLedgerEntry, { id: newId('cle'), workspaceId, kind: 'grant', amount, balanceAfter: row.balance, reason: reason.slice(0, 500), reference: null, createdAt: new Date() });
      await em.flush();
      return view(entry);
    });
  }

  /** Spends `amount` credits for `reference` (e.g. `call:<id>:minute:3`), or 402 out_of_credits; a repeated reference returns the first spend. */
  async spend(workspaceId: string, amount: number, reason: string, reference: string): Promise<LedgerView> {
    if (!Number.isSafeInteger(amount) || amount <= 0) throw new Error(`spend: ${amount} is not a positive whole number of credits`);
    return this.em.fork().transactional(async (em) => {
      const row = await this.locked(em, workspaceId);
      const done = await em.findOne(CreditLedgerEntry, { workspaceId, reference });
      if (done) return view(done);
      if (Number(row.balance) < amount) {
        throw new DomainError('out_of_credits', `This needs ${amount} credit${amount === 1 ? '' : 's'} and the workspace has ${row.balance}`);
      }
      row.balance = Number(row.balance) - amount;
      row.used = Number(row.used) + amount;
      row.updatedAt = new Date();
      const entry = em.create(CreditLedgerEntry, { id: newId('cle'), workspaceId, kind: 'spend', amount, balanceAfter: row.balance, reason: reason.slice(0, 500), reference, createdAt: new Date() });
      await em.flush();
      return view(entry);
    });
  }

  /**
   * Returns the spend made for `reference` (one that bought nothing: a voice session or
   * call that failed to start); once only (the refund's reference is the spend's plus
   * `:refund`). Null when there was no such spend.
   */
  async refund(workspaceId: string, reference: string, reason: string): Promise<LedgerView | null> {
    return this.em.fork().transactional(async (em) => {
      const row = await this.locked(em, workspaceId);
      const spent = await em.findOne(CreditLedgerEntry, { workspaceId, reference, kind: 'spend' });
      if (!spent) return null;
      const done = await em.findOne(CreditLedgerEntry, { workspaceId, reference: `${reference}:refund` });
      if (done) return view(done);
      const amount = Number(spent.amount);
      row.balance = Number(row.balance) + amount;
      row.used = Number(row.used) - amount;
      row.updatedAt = new Date();
      const entry = em.create(CreditLedgerEntry, { id: newId('cle'), workspaceId, kind: 'refund', amount, balanceAfter: row.balance, reason: reason.slice(0, 500), reference: `${reference}:refund`, createdAt: new Date() });
      await em.flush();
      return view(entry);
    });
  }

  /** The workspace's balance row, created at zero if it has none, locked until the transaction ends. */
  private async locked(em: EntityManager, workspaceId: string) {
    await em.createQueryBuilder(CreditBalance).insert({ workspaceId, balance: 0, granted: 0, used: 0 }).onConflict('workspaceId').ignore();
    return em.findOneOrFail(CreditBalance, { workspaceId }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
  }

  /**
   * Usage by UTC day and kind, newest day first: message sends and structured-extraction
   * pages from the usage records, credits spent (voice) from the ledger; each row with
   * its quantity, unit, unit price and amount. `cursor` continues after the last row.
   */
  async usage(workspaceId: string, q: { from?: string; to?: string; limit: number; cursor?: string }) {
    const to = q.to ? new Date(q.to) : new Date();
    const from = q.from ? new Date(q.from) : new Date(to.getTime() - 30 * 86_400_000);
    if (Number.isNaN(from.getTime()) || Number.isNaN(to.getTime()) || from >= to) throw new DomainError('invalid_request', 'from, to: ISO 8601, from before to');
    // Any cursor of the documented form is a position (the rows sort by day text, then kind): nothing to refuse.
    const position = q.cursor ? USAGE_CURSOR.exec(q.cursor) : null;
    const after = position ? { day: position[1], kind: Buffer.from(position[2], 'base64url').toString() } : null;
    // raw SQL: a union of two sources grouped by day (date_trunc in UTC) has no ORM form.
    // eslint-disable-next-line no-restricted-syntax
    const rows = await this.em.fork().getConnection().execute<Array<{ day: string; kind: string; quantity: string }>>(
      `select to_char(day, 'YYYY-MM-DD') as day, kind, sum(quantity) as quantity from (
         select date_trunc('day', created_at at time zone 'UTC') as day, kind, quantity from usage_records
          where workspace_id = ? and created_at >= ? and created_at < ?
         union all
         select date_trunc('day', created_at at time zone 'UTC'), 'voice_credits', case when kind = 'refund' then -amount else amount end from credit_ledger
          where workspace_id = ? and kind in ('spend', 'refund') and created_at >= ? and created_at < ?
       ) u
       group by 1, 2
       having (?::text is null or (to_char(day, 'YYYY-MM-DD') < ?::text or (to_char(day, 'YYYY-MM-DD') = ?::text and kind > ?::text)))
       order by 1 desc, 2 asc
       limit ?`,
      [workspaceId, from, to, workspaceId, from, to, after?.day ?? null, after?.day ?? null, after?.day ?? null, after?.kind ?? null, q.limit + 1],
    );
    const page = rows.slice(0, q.limit);
    const priced = page.map((r) => {
      const quantity = Number(r.quantity);
      const { unit, price } = this.priceOf(r.kind);
      return { day: r.day, kind: r.kind, quantity, unit, unit_price: price, amount: Math.round(quantity * price * 1e6) / 1e6, currency: unit === 'credits' ? 'credits' : this.prices.currency };
    });
    const last = page.at(-1);
    return { usage: priced, next_cursor: rows.length > q.limit && last ? `${last.day}.${Buffer.from(last.kind).toString('base64url')}` : null };
  }

  private priceOf(kind: string): { unit: string; price: number } {
    if (kind === 'msgapp_message') return { unit: 'message', price: this.prices.msgapp_message };
    if (kind === 'structured_extraction') return { unit: 'page', price: this.prices.structured_extraction_page };
    // A turn's tokens are metered under the model it ran on (domain/chat/turn.ts): each model at its own price, else the flat one.
    if (kind === 'llm_tokens' || kind.startsWith('llm_tokens:')) {
      const model = kind === 'llm_tokens' ? this.models?.defaultModel : kind.slice('llm_tokens:'.length);
      const per1k = (model ? this.models?.priceOf(model) : undefined) ?? this.prices.llm_1k_tokens;
      return { unit: 'token', price: per1k / 1000 };
    }
    if (kind === 'voice_credits') return { unit: 'credits', price: 1 };
    return { unit: 'unit', price: 0 };
  }
}
