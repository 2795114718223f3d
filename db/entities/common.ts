import { defineEntity } from '@mikro-orm/core';

/** The property builders, shared by every entity file. */
export const p = defineEntity.properties;

/** `timestamptz not null default now()`: the database fills it in on insert (read back through RETURNING). */
export const createdAt = () => p.datetime().defaultRaw('now()');
/** `timestamptz(3) not null default clock_timestamp()`: rows paged by keyset cursors (milliseconds, as a cursor says). */
export const createdAtMs = () => p.datetime(3).defaultRaw('clock_timestamp()');
/** `timestamptz not null default now()`, set again by every flush that changes the row. */
export const updatedAt = () => p.datetime().defaultRaw('now()').onUpdate(() => new Date());
