import { availabilityAt, checkHours, parseHoursSpec, type OpeningInterval } from '../../domain/team/availability';

const week = (open: string, close: string, days = ['mon', 'tue', 'wed', 'thu', 'fri']) => days.map((day) => ({ day, open, close })) as OpeningInterval[];
const at = (hours: OpeningInterval[], timezone: string, iso: string, away = false) => availabilityAt({ timezone, hours, away }, new Date(iso));

describe('availabilityAt: wall-clock hours in the zone', () => {
  const paris = week('09:00', '17:30');

  test('no hours: always available; away: never, with no next opening', () => {
    expect(at([], 'Europe/Paris', '2026-11-28T03:00:00Z')).toEqual({ available: true, next_available_at: null });
    expect(at([], 'Europe/Paris', '2026-11-28T03:00:00Z', true)).toEqual({ available: false, next_available_at: null });
    expect(at(paris, 'Europe/Paris', '2026-11-30T10:00:00Z', true)).toEqual({ available: false, next_available_at: null });
  });

  test('open at 09:00 and closed at 17:30 local (winter, UTC+1), the close exclusive', () => {
    expect(at(paris, 'Europe/Paris', '2026-11-30T07:59:59Z')).toEqual({ available: false, next_available_at: '2026-11-30T08:00:00.000Z' });
    expect(at(paris, 'Europe/Paris', '2026-11-30T08:00:00Z').available).toBe(true);
    expect(at(paris, 'Europe/Paris', '2026-11-30T16:29:59Z').available).toBe(true);
    // Friday 17:30 local: closed until Monday 09:00 local.
    expect(at(paris, 'Europe/Paris', '2026-12-04T16:30:00Z')).toEqual({ available: false, next_available_at: '2026-12-07T08:00:00.000Z' });
  });

  test('across the spring DST change: Monday 09:00 is 07:00Z after it, 08:00Z before it', () => {
    // Clocks go from 02:00 CET to 03:00 CEST on Sunday 2026-03-29 (01:00Z).
    expect(at(paris, 'Europe/Paris', '2026-03-27T07:15:00Z')).toEqual({ available: false, next_available_at: '2026-03-27T08:00:00.000Z' });
    expect(at(paris, 'Europe/Paris', '2026-03-28T12:00:00Z')).toEqual({ available: false, next_available_at: '2026-03-30T07:00:00.000Z' });
    expect(at(paris, 'Europe/Paris', '2026-03-30T07:15:00Z').available).toBe(true);
    expect(at(paris, 'Europe/Paris', '2026-03-30T15:45:00Z').available).toBe(false);
  });

  test('across the autumn DST change: Monday 09:00 is 08:00Z again', () => {
    // Clocks go from 03:00 CEST back to 02:00 CET on Sunday 2026-10-25 (01:00Z).
    expect(at(paris, 'Europe/Paris', '2026-10-24T16:00:00Z')).toEqual({ available: false, next_available_at: '2026-10-26T08:00:00.000Z' });
    expect(at(paris, 'Europe/Paris', '2026-10-26T07:30:00Z').available).toBe(false);
  });

  test('an opening inside the spring-forward gap starts when the clocks jump past it', () => {
    // New York: 02:00 EST becomes 03:00 EDT on 2026-03-08 at 07:00Z; 02:30 never happens that day.
    const hours: OpeningInterval[] = [{ day: 'sun', open: '02:30', close: '04:00' }];
    expect(at(hours, 'America/New_York', '2026-03-08T06:00:00Z')).toEqual({ available: false, next_available_at: '2026-03-08T07:00:00.000Z' });
    expect(at(hours, 'America/New_York', '2026-03-08T07:30:00Z').available).toBe(true);
    expect(at(hours, 'America/New_York', '2026-03-08T08:00:00Z')).toEqual({ available: false, next_available_at: '2026-03-15T06:30:00.000Z' });
  });

  test('the repeated fall-back hour is open on both passes', () => {
    // Paris, 2026-10-25: 02:00–03:00 local happens at 00:00Z (CEST) and again at 01:00Z (CET).
    const hours: OpeningInterval[] = [{ day: 'sun', open: '02:00', close: '02:30' }];
    expect(at(hours, 'Europe/Paris', '2026-10-25T00:15:00Z').available).toBe(true);
    expect(at(hours, 'Europe/Paris', '2026-10-25T00:45:00Z')).toEqual({ available: false, next_available_at: '2026-10-25T01:00:00.000Z' });
    expect(at(hours, 'Europe/Paris', '2026-10-25T01:15:00Z').available).toBe(true);
  });

  test('an interval past midnight runs into the next day, and Sunday night into Monday', () => {
    const hours: OpeningInterval[] = [
      { day: 'fri', open: '22:00', close: '02:00' },
      { day: 'sun', open: '23:00', close: '01:00' },
    ];
    // Saturday 01:30 in Paris (00:30Z): still Friday's opening.
    expect(at(hours, 'Europe/Paris', '2026-12-05T00:30:00Z').available).toBe(true);
    // Saturday 02:00: closed until Sunday 23:00.
    expect(at(hours, 'Europe/Paris', '2026-12-05T01:00:00Z')).toEqual({ available: false, next_available_at: '2026-12-06T22:00:00.000Z' });
    // Monday 00:30 local: Sunday's opening, across the end of the week.
    expect(at(hours, 'Europe/Paris', '2026-12-06T23:30:00Z').available).toBe(true);
    expect(at(hours, 'Europe/Paris', '2026-12-07T00:00:00Z')).toEqual({ available: false, next_available_at: '2026-12-11T21:00:00.000Z' });
  });

  test('touching intervals leave no gap; 00:00-24:00 is the whole day', () => {
    const split: OpeningInterval[] = [
      { day: 'mon', open: '09:00', close: '12:00' },
      { day: 'mon', open: '12:00', close: '17:00' },
    ];
    expect(at(split, 'UTC', '2026-11-30T12:00:00Z').available).toBe(true);
    const allDay: OpeningInterval[] = [{ day: 'sat', open: '00:00', close: '24:00' }];
    expect(at(allDay, 'Asia/Tokyo', '2026-11-27T15:00:00Z').available).toBe(true); // Saturday 00:00 in Tokyo
    expect(at(allDay, 'Asia/Tokyo', '2026-11-28T14:59:59Z').available).toBe(true);
    expect(at(allDay, 'Asia/Tokyo', '2026-11-28T15:00:00Z')).toEqual({ available: false, next_available_at: '2026-12-04T15:00:00.000Z' });
  });

  test('a zone with a quarter-hour offset (Kathmandu, UTC+5:45)', () => {
    expect(at(week('09:00', '17:00'), 'Asia/Kathmandu', '2026-11-30T03:00:00Z')).toEqual({ available: false, next_available_at: '2026-11-30T03:15:00.000Z' });
  });
});

describe('checkHours', () => {
  test('refuses overlaps, also across midnight and the end of the week; accepts touching intervals', () => {
    expect(() => checkHours([{ day: 'mon', open: '09:00', close: '17:00' }, { day: 'mon', open: '16:00', close: '18:00' }])).toThrow('hours: mon 09:00-17:00 overlaps mon 16:00-18:00');
    expect(() => checkHours([{ day: 'sun', open: '22:00', close: '02:00' }, { day: 'mon', open: '01:00', close: '03:00' }])).toThrow('hours: sun 22:00-02:00 overlaps mon 01:00-03:00');
    expect(() => checkHours([{ day: 'tue', open: '10:00', close: '11:00' }, { day: 'tue', open: '10:00', close: '11:00' }])).toThrow(/overlaps/);
    expect(checkHours([{ day: 'mon', open: '02:00', close: '03:00' }, { day: 'sun', open: '22:00', close: '02:00' }])).toEqual([
      { day: 'mon', open: '02:00', close: '03:00' },
      { day: 'sun', open: '22:00', close: '02:00' },
    ]);
  });

  test('refuses an empty interval and malformed times, naming the interval', () => {
    expect(() => checkHours([{ day: 'mon', open: '09:00', close: '09:00' }])).toThrow('hours[0]: mon 09:00-09:00 is empty');
    expect(() => checkHours([{ day: 'mon', open: '24:00', close: '09:00' }])).toThrow("hours[0].open: '24:00' is not a time");
    expect(() => checkHours([{ day: 'mon', open: '09:00', close: '9:30' }])).toThrow("hours[0].close: '9:30' is not a time");
    expect(() => checkHours([{ day: 'xyz' as 'mon', open: '09:00', close: '10:00' }])).toThrow("hours[0].day: 'xyz' is not one of");
    expect(checkHours([{ day: 'mon', open: '00:00', close: '24:00' }])).toHaveLength(1);
  });
});

describe('parseHoursSpec (admin CLI --hours)', () => {
  test('days, ranges, lists, named sets; several times a day; several groups', () => {
    // Sorted by checkHours: by start in the week.
    expect(checkHours(parseHoursSpec('mon-fri 09:00-12:00,13:00-17:30; sat 10:00-14:00'))).toEqual([
      ...week('09:00', '12:00').flatMap((h) => [h, { ...h, open: '13:00', close: '17:30' }]),
      { day: 'sat', open: '10:00', close: '14:00' },
    ]);
    expect(parseHoursSpec('fri-mon 9:00-17:00').map((h) => h.day)).toEqual(['fri', 'sat', 'sun', 'mon']);
    expect(parseHoursSpec('Mon,wed,fri-sat 8:00-9:00').map((h) => `${h.day} ${h.open}`)).toEqual(['mon 08:00', 'wed 08:00', 'fri 08:00', 'sat 08:00']);
    expect(parseHoursSpec('daily 00:00-24:00')).toHaveLength(7);
    expect(parseHoursSpec('weekends 10:00-16:00').map((h) => h.day)).toEqual(['sat', 'sun']);
  });

  test('says what is wrong', () => {
    expect(() => parseHoursSpec('mon-fri')).toThrow("hours: 'mon-fri' is not DAYS TIME-TIME, e.g. 'mon-fri 09:00-17:30'");
    expect(() => parseHoursSpec('monday 09:00-17:00')).toThrow("hours: 'monday' in 'monday 09:00-17:00' is not a day");
    expect(() => parseHoursSpec('mon 9-17')).toThrow("hours: '9-17' in 'mon 9-17' is not TIME-TIME");
  });
});
