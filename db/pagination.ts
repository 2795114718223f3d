import type { EntityName, FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { DomainError } from '../lib/errors';

/**
 * Keyset cursors over (created_at desc, id desc): a position, not an offset, so rows
 * added while a client pages never shift a page (nothing skipped, nothing repeated).
 * Opaque to clients, but with a form a pattern describes exactly (`<unix ms>.<row id>`):
 * every string matching CURSOR_PATTERN is a position, so the OpenAPI document never
 * calls valid a cursor the server would refuse. At most 14 digits keeps it a date PostgreSQL reads (before the year 5139).
 */
export const CURSOR_PATTERN = /^[0-9]{1,14}\.[A-Za-z0-9_-]{1,100}$/;

export function encodeCursor(row: { created_at: Date | string; id: string }): string {
  return `${new Date(row.created_at).getTime()}.${row.id}`;
}

export function decodeCursor(cursor: string): [createdAt: string, id: string] {
  if (!CURSOR_PATTERN.test(cursor)) throw new DomainError('invalid_request', 'cursor: not a cursor this endpoint returned');
  const dot = cursor.indexOf('.');
  return [new Date(Number(cursor.slice(0, dot))).toISOString(), cursor.slice(dot + 1)];
}

export interface Page<R> {
  rows: R[];
  next_cursor: string | null;
}

/**
 * One page of entities ordered by (createdAt, id), newest first (`desc`) or oldest first
 * (`asc`), continuing after `cursor`. The row comparison
 * `(created_at, id) < (at, id)` is spelt out as `created_at < at or (created_at = at and id < id)`.
 */
export async function keysetFind<T extends { createdAt: Date; id: string }>(
  em: EntityManager,
  entity: EntityName<T>,
  where: FilterQuery<T>,
  q: { limit: number; cursor?: string },
  opts: { direction?: 'asc' | 'desc' } = {},
): Promise<Page<T>> {
  const dir = opts.direction ?? 'desc';
  const conditions: FilterQuery<T>[] = [where];
  if (q.cursor) {
    const [iso, id] = decodeCursor(q.cursor);
    const at = new Date(iso);
    const op = dir === 'desc' ? '$lt' : '$gt';
    conditions.push({ $or: [{ createdAt: { [op]: at } }, { createdAt: at, id: { [op]: id } }] } as FilterQuery<T>);
  }
  const rows = await em.find(entity, { $and: conditions } as FilterQuery<T>, {
    orderBy: { createdAt: dir, id: dir } as never,
    limit: q.limit + 1,
  });
  const page = rows.slice(0, q.limit);
  const last = page[page.length - 1];
  return { rows: page, next_cursor: rows.length > q.limit ? encodeCursor({ created_at: last.createdAt, id: last.id }) : null };
}
