import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { TeamAvailability, type ITeamAvailability } from '../../db/entities/team';
import { DomainError } from '../errors';
import {
  availabilityAt,
  AvailabilityError,
  checkAwayMessage,
  checkHours,
  checkReplyTime,
  checkTimeZone,
  DEFAULT_AVAILABILITY,
  type Availability,
  type AvailabilitySettings,
} from './availability';

/** The settings with what they mean now (GET/PUT /api/v1/team/availability, `team availability`). */
export type TeamAvailabilityView = AvailabilitySettings & Availability & { updated_at: string | null };

/** A change: the fields given are set (null clears a message or reply time; `hours: []` is always open); the others keep their value. */
export type AvailabilityPatch = Partial<AvailabilitySettings>;

/** What the widget tells a visitor whose conversation a person holds (`statusFor`). */
export interface TeamStatus {
  available: boolean;
  /** The next opening when nobody is available now (ISO 8601, UTC); null when available, away, or no opening within a week. */
  next_available_at: string | null;
  /** The away message, only while the team is away; null otherwise. */
  away_message: string | null;
  reply_time_minutes: number | null;
}

function settingsOf(row: ITeamAvailability | null): AvailabilitySettings & { updated_at: string | null } {
  if (!row) return { ...DEFAULT_AVAILABILITY, hours: [], updated_at: null };
  return {
    timezone: row.timezone,
    hours: row.hours,
    away: row.away,
    away_message: row.awayMessage ?? null,
    reply_time_minutes: row.replyTimeMinutes ?? null,
    updated_at: row.updatedAt.toISOString(),
  };
}

const invalid = (err: unknown): never => {
  if (err instanceof AvailabilityError) throw new DomainError('invalid_request', err.message);
  throw err;
};

/**
 * A workspace team's availability: what the widget tells a visitor whose conversation a
 * person holds. One row per workspace (`team_availability`), made on the first change.
 */
export class TeamService {
  constructor(private readonly em: EntityManager) {}

  async settings(workspaceId: string): Promise<AvailabilitySettings & { updated_at: string | null }> {
    return settingsOf(await this.em.fork().findOne(TeamAvailability, { workspaceId }));
  }

  /** The stored settings, with whether someone is available at `now` and the next opening. */
  async availability(workspaceId: string, now = new Date()): Promise<TeamAvailabilityView> {
    const s = await this.settings(workspaceId);
    return { ...s, ...availabilityAt(s, now) };
  }

  /** Sets the fields given (checked: 400 invalid_request naming the field); 404 for an unknown workspace. */
  async setAvailability(workspaceId: string, patch: AvailabilityPatch, now = new Date()): Promise<TeamAvailabilityView> {
    let changes: Partial<ITeamAvailability>;
    try {
      changes = {
        ...(patch.timezone !== undefined && { timezone: checkTimeZone(patch.timezone) }),
        ...(patch.hours !== undefined && { hours: checkHours(patch.hours) }),
        ...(patch.away !== undefined && { away: patch.away }),
        ...(patch.away_message !== undefined && { awayMessage: checkAwayMessage(patch.away_message) }),
        ...(patch.reply_time_minutes !== undefined && { replyTimeMinutes: checkReplyTime(patch.reply_time_minutes) }),
      };
    } catch (err) {
      return invalid(err);
    }
    const row = await this.em.fork().transactional(async (em) => {
      try {
        // The row exists before it is locked: two first changes at once both land, one after the other.
        await em.createQueryBuilder(TeamAvailability).insert({ workspaceId }).onConflict('workspaceId').ignore();
      } catch (err) {
        // A query builder's error is the driver's own: 23503, foreign key violation (no such workspace).
        if ((err as { code?: string }).code === '23503') throw new DomainError('not_found', `No workspace with id '${workspaceId}'`);
        throw err;
      }
      const locked = await em.findOneOrFail(TeamAvailability, { workspaceId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      em.assign(locked, { ...changes, updatedAt: new Date() });
      await em.flush();
      return locked;
    });
    const s = settingsOf(row);
    return { ...s, ...availabilityAt(s, now) };
  }

  /**
   * For the widget's init (and anything else that tells a visitor): whether someone of the
   * team is available at `now`, the next opening if not, the away message while away, and
   * the typical reply time.
   */
  async statusFor(workspaceId: string, now = new Date()): Promise<TeamStatus> {
    const s = await this.settings(workspaceId);
    const a = availabilityAt(s, now);
    return { available: a.available, next_available_at: a.next_available_at, away_message: s.away ? s.away_message : null, reply_time_minutes: s.reply_time_minutes };
  }
}
