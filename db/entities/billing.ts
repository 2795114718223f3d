import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { p } from './common';

/** A workspace's credits: the balance every spend locks and checks, and its running totals. */
export const CreditBalance = defineEntity({
  name: 'CreditBalance',
  tableName: 'credit_balances',
  properties: {
    workspaceId: p.text().primary(),
    balance: p.bigint('number').default(0),
    granted: p.bigint('number').default(0),
    used: p.bigint('number').default(0),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export type ICreditBalance = InferEntity<typeof CreditBalance>;

/** The credits ledger: grants, spends and refunds of spends, append-only, each with the balance after it. */
export const CreditLedgerEntry = defineEntity({
  name: 'CreditLedgerEntry',
  tableName: 'credit_ledger',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    kind: p.enum(['grant', 'spend', 'refund'] as const).columnType('text'),
    amount: p.bigint('number'),
    balanceAfter: p.bigint('number'),
    reason: p.text(),
    reference: p.text().nullable(),
    createdAt: p.datetime().defaultRaw('clock_timestamp()'),
  },
});
export type ICreditLedgerEntry = InferEntity<typeof CreditLedgerEntry>;
