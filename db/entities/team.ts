import { defineEntity, type InferEntity } from '@mikro-orm/core';
import type { OpeningInterval } from '../../domain/team/availability';
import { p, updatedAt } from './common';

/** A workspace team's availability (domain/team/team.ts owns it); no row: the defaults. */
export const TeamAvailability = defineEntity({
  name: 'TeamAvailability',
  tableName: 'team_availability',
  properties: {
    workspaceId: p.text().primary(),
    timezone: p.text().default('UTC'),
    hours: p.json<OpeningInterval[]>().defaultRaw(`'[]'`),
    away: p.boolean().default(false),
    awayMessage: p.text().nullable(),
    replyTimeMinutes: p.integer().nullable(),
    updatedAt: updatedAt(),
  },
});
export type ITeamAvailability = InferEntity<typeof TeamAvailability>;
