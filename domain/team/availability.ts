/**
 * A workspace team's availability: business hours in an IANA time zone, an "away"
 * switch and a typical reply time. Pure code (no database): the settings' checks, the
 * admin CLI's hours syntax, and `availabilityAt`, which answers "is someone there now,
 * and if not, from when" across time zones, DST changes and midnight.
 */

export const DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export type Day = (typeof DAYS)[number];

/**
 * One weekly opening, in the zone's wall-clock time. `close` may be `24:00` (the day's end);
 * a `close` earlier than `open` runs past midnight into the next day (fri 22:00–02:00 ends
 * on Saturday at 02:00).
 */
export interface OpeningInterval {
  day: Day;
  open: string;
  close: string;
}

export interface AvailabilitySettings {
  /** IANA time zone the hours are read in. */
  timezone: string;
  /** Weekly openings; empty: always open (unless away). */
  hours: OpeningInterval[];
  /** Nobody is answering, whatever the hours say. */
  away: boolean;
  /** Shown to visitors while away; null: the widget's own words. */
  away_message: string | null;
  /** The team's typical first reply, in minutes; null: not said. */
  reply_time_minutes: number | null;
}

export const DEFAULT_AVAILABILITY: AvailabilitySettings = { timezone: 'UTC', hours: [], away: false, away_message: null, reply_time_minutes: null };

export interface Availability {
  available: boolean;
  /** When nobody is available now: the next opening (ISO 8601, UTC); null when available now, when away, or when no opening comes within a week. */
  next_available_at: string | null;
}

export const OPEN_PATTERN = /^([01]\d|2[0-3]):[0-5]\d$/;
export const CLOSE_PATTERN = /^(([01]\d|2[0-3]):[0-5]\d|24:00)$/;
export const MAX_INTERVALS = 70;
export const AWAY_MESSAGE_MAX = 500;
/** A typical reply time longer than a week says nothing a visitor can use. */
export const REPLY_TIME_MAX_MINUTES = 10_080;

const WEEK = 7 * 1440;
const DAY_MS = 86_400_000;

/** A refusal of a setting, its message starting with the field's name (the API's 400 invalid_request). */
export class AvailabilityError extends Error {}

const minutes = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));

/** An interval as [start, end) minutes of the week from Monday 00:00; `end` may pass WEEK (Sunday night into Monday). */
function span(i: OpeningInterval): [number, number] {
  const start = DAYS.indexOf(i.day) * 1440 + minutes(i.open);
  const close = minutes(i.close);
  const length = close > minutes(i.open) ? close - minutes(i.open) : close + 1440 - minutes(i.open);
  return [start, start + length];
}

/** Whether an IANA zone (or an alias such as US/Eastern) is one this runtime knows. */
export function isTimeZone(zone: string): boolean {
  if (!zone || zone.length > 64) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/** The time zone checked; throws AvailabilityError naming it. */
export function checkTimeZone(zone: string): string {
  if (!isTimeZone(zone)) throw new AvailabilityError(`timezone: '${zone.slice(0, 64)}' is not an IANA time zone such as Europe/Paris`);
  return zone;
}

/**
 * The hours checked: each a known day, HH:MM times (close may be 24:00), open ≠ close, and
 * no two overlapping anywhere in the week (midnight-spanning ones included; touching is
 * fine). Sorted by their start in the week.
 */
export function checkHours(hours: OpeningInterval[]): OpeningInterval[] {
  if (hours.length > MAX_INTERVALS) throw new AvailabilityError(`hours: at most ${MAX_INTERVALS} intervals`);
  hours.forEach((h, n) => {
    if (!(DAYS as readonly string[]).includes(h.day)) throw new AvailabilityError(`hours[${n}].day: '${String(h.day).slice(0, 10)}' is not one of ${DAYS.join(', ')}`);
    if (!OPEN_PATTERN.test(h.open)) throw new AvailabilityError(`hours[${n}].open: '${String(h.open).slice(0, 10)}' is not a time HH:MM from 00:00 to 23:59`);
    if (!CLOSE_PATTERN.test(h.close)) throw new AvailabilityError(`hours[${n}].close: '${String(h.close).slice(0, 10)}' is not a time HH:MM from 00:00 to 24:00`);
    if (minutes(h.open) === minutes(h.close)) throw new AvailabilityError(`hours[${n}]: ${h.day} ${h.open}-${h.close} is empty (open equals close; 00:00-24:00 is the whole day)`);
  });
  const list = hours.map((h) => ({ day: h.day, open: h.open, close: h.close }));
  const spans = list.map(span);
  for (let a = 0; a < spans.length; a++) {
    for (let b = a + 1; b < spans.length; b++) {
      // Compare on the weekly circle: b shifted a week either way covers Sunday-night wraps.
      const overlaps = [-WEEK, 0, WEEK].some((shift) => spans[a][0] < spans[b][1] + shift && spans[b][0] + shift < spans[a][1]);
      if (overlaps) {
        const show = (h: OpeningInterval) => `${h.day} ${h.open}-${h.close}`;
        throw new AvailabilityError(`hours: ${show(list[a])} overlaps ${show(list[b])}`);
      }
    }
  }
  return list.sort((x, y) => span(x)[0] - span(y)[0]);
}

/** An away message: trimmed; empty clears it. */
export function checkAwayMessage(message: string | null): string | null {
  const text = message?.trim() ?? '';
  if (!text) return null;
  if ([...text].length > AWAY_MESSAGE_MAX) throw new AvailabilityError(`away_message: at most ${AWAY_MESSAGE_MAX} characters`);
  return text;
}

export function checkReplyTime(value: number | null): number | null {
  if (value === null) return null;
  if (!Number.isInteger(value) || value < 1 || value > REPLY_TIME_MAX_MINUTES) throw new AvailabilityError(`reply_time_minutes: a whole number of minutes from 1 to ${REPLY_TIME_MAX_MINUTES}, or null`);
  return value;
}

// ---------------------------------------------------------------------------------------------------------------
// Time zones: wall-clock time of an instant, and instants of a wall-clock time, through Intl (no library).

const formatters = new Map<string, Intl.DateTimeFormat>();
function formatter(zone: string): Intl.DateTimeFormat {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', { timeZone: zone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric', weekday: 'short' });
    formatters.set(zone, f);
  }
  return f;
}

interface Wall {
  /** The wall-clock date and time read as if it were UTC (ms). */
  naive: number;
  /** Monday 0 … Sunday 6. */
  weekday: number;
  /** Minutes since the wall-clock midnight. */
  minute: number;
}

const WEEKDAYS: Record<string, number> = { Mon: 0, Tue: 1, Wed: 2, Thu: 3, Fri: 4, Sat: 5, Sun: 6 };

function wall(zone: string, t: number): Wall {
  const parts: Record<string, string> = {};
  for (const p of formatter(zone).formatToParts(new Date(t))) parts[p.type] = p.value;
  const hour = Number(parts.hour) % 24;
  const naive = Date.UTC(Number(parts.year), Number(parts.month) - 1, Number(parts.day), hour, Number(parts.minute), Number(parts.second));
  return { naive, weekday: WEEKDAYS[parts.weekday], minute: hour * 60 + Number(parts.minute) };
}

/** The zone's offset at `t` (ms to add to UTC), to the second. */
const offsetAt = (zone: string, t: number) => wall(zone, t).naive - Math.floor(t / 1000) * 1000;

/** Whether the wall clock at `t` is inside one of the openings. */
function openAt(spans: Array<[number, number]>, zone: string, t: number): boolean {
  const w = wall(zone, t);
  const m = w.weekday * 1440 + w.minute;
  return spans.some(([s, e]) => (m >= s && m < e) || (m + WEEK >= s && m + WEEK < e));
}

/** Every instant whose wall-clock time is `naive` (two in a fall-back hour, none in a spring-forward gap). */
function instantsOf(zone: string, naive: number): number[] {
  const offsets = new Set([offsetAt(zone, naive - DAY_MS), offsetAt(zone, naive + DAY_MS), offsetAt(zone, naive)]);
  const out: number[] = [];
  for (const o of offsets) {
    const t = naive - o;
    if (offsetAt(zone, t) === o && !out.includes(t)) out.push(t);
  }
  return out.sort((a, b) => a - b);
}

/** The instants in (from, to] where the zone's offset changes (each the first instant of the new offset, to the second). */
function transitions(zone: string, from: number, to: number): number[] {
  const out: number[] = [];
  const step = 6 * 3_600_000;
  for (let a = from; a < to; a += step) {
    const b = Math.min(a + step, to);
    if (offsetAt(zone, a) === offsetAt(zone, b)) continue;
    // Offsets change on whole seconds: bisect to the second.
    let lo = Math.floor(a / 1000);
    let hi = Math.floor(b / 1000);
    const before = offsetAt(zone, lo * 1000);
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (offsetAt(zone, mid * 1000) === before) lo = mid;
      else hi = mid;
    }
    out.push(hi * 1000);
  }
  return out;
}

/**
 * Whether the team is available at `now`, and if not, when it next is. Away wins over
 * the hours (next_available_at null: nobody knows when someone is back); no hours means
 * always open. Hours are wall-clock times of `timezone`: an opening at 09:00 is 09:00
 * local on both sides of a DST change; an opening inside a spring-forward gap starts
 * when the clocks reach it (the gap's end); in a repeated fall-back hour the wall clock
 * decides, so both passes through it count.
 */
export function availabilityAt(settings: Pick<AvailabilitySettings, 'timezone' | 'hours' | 'away'>, now: Date): Availability {
  if (settings.away) return { available: false, next_available_at: null };
  if (!settings.hours.length) return { available: true, next_available_at: null };
  const zone = settings.timezone;
  const t = now.getTime();
  const spans = settings.hours.map(span);
  if (openAt(spans, zone, t)) return { available: true, next_available_at: null };
  // Availability only changes at a wall-clock opening or at an offset change (which can jump
  // the wall clock into an opening), so the next available instant is one of those.
  const today = wall(zone, t);
  const midnight = today.naive - today.minute * 60_000 - (today.naive % 60_000);
  const candidates: number[] = [];
  for (let d = -1; d <= 8; d++) {
    const date = midnight + d * DAY_MS;
    const weekday = (((today.weekday + d) % 7) + 7) % 7;
    for (const h of settings.hours) {
      if (DAYS.indexOf(h.day) === weekday) candidates.push(...instantsOf(zone, date + minutes(h.open) * 60_000));
    }
  }
  candidates.push(...transitions(zone, t, t + 8 * DAY_MS));
  const next = candidates.filter((c) => c > t && openAt(spans, zone, c)).sort((a, b) => a - b)[0];
  return { available: false, next_available_at: next === undefined ? null : new Date(next).toISOString() };
}

// ---------------------------------------------------------------------------------------------------------------
// The admin CLI's hours syntax.

/**
 * `--hours` values of `team set-hours`: `DAYS TIME-TIME[,TIME-TIME...]`, several joined
 * with `;`. DAYS is a day (`mon`), a range (`mon-fri`, `fri-mon` wraps), a list of
 * those (`mon,wed,fri-sat`), `daily` or `weekdays`/`weekends`. TIME is HH:MM (24-hour; a
 * close of 24:00 is midnight; a close before the open runs past midnight). Examples:
 * `mon-fri 09:00-17:30`, `mon-fri 09:00-12:00,13:00-17:00; sat 10:00-14:00`, `fri 22:00-02:00`.
 * The result still goes through `checkHours`.
 */
export function parseHoursSpec(spec: string): OpeningInterval[] {
  const out: OpeningInterval[] = [];
  for (const raw of spec.split(';')) {
    const part = raw.trim();
    if (!part) continue;
    const m = /^(\S+)\s+(\S+)$/.exec(part);
    if (!m) throw new AvailabilityError(`hours: '${part}' is not DAYS TIME-TIME, e.g. 'mon-fri 09:00-17:30'`);
    const days = parseDays(m[1].toLowerCase(), part);
    for (const range of m[2].split(',')) {
      const t = /^(\d{1,2}:\d{2})-(\d{1,2}:\d{2})$/.exec(range);
      if (!t) throw new AvailabilityError(`hours: '${range}' in '${part}' is not TIME-TIME, e.g. 09:00-17:30`);
      const pad = (x: string) => x.padStart(5, '0');
      for (const day of days) out.push({ day, open: pad(t[1]), close: pad(t[2]) });
    }
  }
  return out;
}

function parseDays(text: string, part: string): Day[] {
  const named: Record<string, Day[]> = { daily: [...DAYS], weekdays: ['mon', 'tue', 'wed', 'thu', 'fri'], weekends: ['sat', 'sun'] };
  if (named[text]) return named[text];
  const days: Day[] = [];
  for (const item of text.split(',')) {
    const [a, b] = item.split('-');
    const from = DAYS.indexOf(a as Day);
    const to = b === undefined ? from : DAYS.indexOf(b as Day);
    if (from < 0 || to < 0 || item.split('-').length > 2) throw new AvailabilityError(`hours: '${item}' in '${part}' is not a day (mon … sun), a range such as mon-fri, daily, weekdays or weekends`);
    for (let d = from; ; d = (d + 1) % 7) {
      if (!days.includes(DAYS[d])) days.push(DAYS[d]);
      if (d === to) break;
    }
  }
  return days;
}
