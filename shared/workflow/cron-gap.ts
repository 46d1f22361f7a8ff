/**
 * The smallest gap between consecutive fires of a cron trigger (API.md §8.3.3, amended by §18.4): the union of
 * its schedules in its time zone, over a whole cycle of the expressions, computed from the expressions' fields
 * instead of by enumerating fires.
 *
 * What fires (the service's rule, `cronFires` in definition.ts, over croner): a local wall time that matches an
 * expression fires once, at its first occurrence; a local time skipped by a daylight-saving change does not
 * fire. Expressions are parsed by croner itself (`CronPattern`, with the service's options), and a date matches
 * as croner's `_matchDayValue` decides: month, then day of month OR day of week when both are restricted
 * (`domAndDow: false`), only the restricted one when one is `*`.
 *
 * How, without enumerating a year:
 *  - Times of day. A day's fires depend only on which schedules match its date (a bit mask). For each mask that
 *    occurs, the union of those schedules' times of day is built once (at most 1,440 minutes), with its smallest
 *    gap, first and last time.
 *  - Dates. Which schedules match a date depends on (month, day of month, weekday) only, so a Gregorian year's
 *    fire days depend only on its type: the weekday of January 1 and whether it is a leap year (14 types). Each
 *    type is walked day by day once (≤ 366 days, O(1) per day: its mask's smallest gap, and the gap from the
 *    previous fire day's last fire to this day's first), which gives the year's smallest inner gap and its
 *    first and last fire. The 400-year Gregorian cycle is then walked year by year (410 years from now, so that
 *    every pair of consecutive fire years of a cycle, runs of empty years included, is seen once).
 *  - Daylight saving. A day whose local span contains no change of the zone's UTC offset has one offset for all
 *    its fires, so its gaps are its local gaps. A day touched by a change is mapped fire by fire to instants
 *    (skipped times dropped, repeated ones at their first occurrence). Gaps between days use the instants.
 *    The changes of each year type are those of its first year from now (the zone's transitions found with
 *    Intl, sampled weekly and bisected to the second), assumed to repeat in every year of that type: true of
 *    every rule of the form "n-th/last weekday of a month" or "fixed date", which is what the tz database
 *    projects into the future, except for the few zones with tabulated dates (e.g. Morocco's Ramadan changes),
 *    where the years after the first 14 or so are approximated by these. Two changes less than 7 days apart
 *    would be missed by the sampling; no zone has them.
 *
 * Cost: the 14 year types (≤ 5,124 day steps), one union per distinct mask, 410 year steps, plus the zone's
 * transitions (~100 Intl calls per year type, cached per zone and year). A few milliseconds, mostly Intl.
 */
import { CronPattern } from "croner";
import { CRONER_OPTIONS } from "../kinds/triggers/cron";

const DAY_MS = 86_400_000;
/** Years walked for the whole cycle: 400 (Gregorian cycle) plus the longest run of years without a fire (7). */
const CYCLE_WALK_YEARS = 410;

interface Schedule {
  /** Times of day in seconds, ascending. */
  times: Int32Array;
  months: boolean[];
  /** Day of month 1-31 at index 0-30. */
  days: boolean[];
  /** Weekday, Sunday 0. */
  weekdays: boolean[];
  starDom: boolean;
  starDow: boolean;
}

/** One expression read by croner, with the service's options (five fields, domAndDow false). */
function parseSchedule(expression: string): Schedule {
  const p = new CronPattern(expression, undefined, { mode: CRONER_OPTIONS.mode, alternativeWeekdays: CRONER_OPTIONS.alternativeWeekdays });
  // The service's grammar (schemas.ts CRON_PATTERN) has no L, W, #, + or year field; refuse them rather than misread.
  if (
    p.lastDayOfMonth ||
    p.lastWeekday ||
    p.nearestWeekdays.some(Boolean) ||
    p.useAndLogic ||
    !p.starYear ||
    p.dayOfWeek.some((v) => v !== 0 && v !== 63)
  ) {
    throw new RangeError(`cron gap: unsupported expression ${JSON.stringify(expression)}`);
  }
  const times: number[] = [];
  for (let h = 0; h < 24; h++) {
    if (!p.hour[h]) continue;
    for (let m = 0; m < 60; m++) {
      if (!p.minute[m]) continue;
      for (let s = 0; s < 60; s++) if (p.second[s]) times.push(h * 3600 + m * 60 + s);
    }
  }
  return {
    times: Int32Array.from(times),
    months: p.month.map(Boolean),
    days: p.day.map(Boolean),
    weekdays: p.dayOfWeek.slice(0, 7).map(Boolean),
    starDom: p.starDOM,
    starDow: p.starDOW,
  };
}

/** croner's date rule (`_matchDayValue` with `domAndDow` from the service's options). */
function matchesDate(s: Schedule, month: number, day: number, weekday: number): boolean {
  if (!s.months[month]) return false;
  const dom = s.days[day - 1]!;
  if (s.starDow) return dom;
  const dow = s.weekdays[weekday]!;
  return !CRONER_OPTIONS.domAndDow && !s.starDom ? dom || dow : dom && dow;
}

/** The union of some schedules' times of day: ascending seconds, smallest gap (s) and where it starts. */
interface DayTimes {
  times: Int32Array;
  minGap: number;
  minIndex: number;
}

/** The parsed trigger: its schedules, which of them match each (month, day, weekday), and the unions by mask. */
class Model {
  readonly schedules: Schedule[];
  /** Mask of the schedules matching (month, day 1-31, weekday), at (month * 31 + day - 1) * 7 + weekday. */
  readonly dateMasks: Int32Array;
  private readonly unions = new Map<number, DayTimes>();
  /** Times are whole minutes for five-field expressions: unions are marked per minute then. */
  private readonly resolution: number;
  private marks: Int32Array | undefined;
  private stamp = 0;

  constructor(expressions: readonly string[]) {
    if (expressions.length === 0 || expressions.length > 30) throw new RangeError("cron gap: 1 to 30 schedules");
    this.schedules = expressions.map(parseSchedule);
    this.resolution = this.schedules.every((s) => s.times.every((t) => t % 60 === 0)) ? 60 : 1;
    this.dateMasks = new Int32Array(12 * 31 * 7);
    for (let month = 0; month < 12; month++) {
      for (let day = 1; day <= 31; day++) {
        for (let weekday = 0; weekday < 7; weekday++) {
          let mask = 0;
          this.schedules.forEach((s, i) => {
            if (matchesDate(s, month, day, weekday)) mask |= 1 << i;
          });
          this.dateMasks[(month * 31 + day - 1) * 7 + weekday] = mask;
        }
      }
    }
  }

  dayTimes(mask: number): DayTimes {
    let union = this.unions.get(mask);
    if (union) return union;
    let times: Int32Array;
    if ((mask & (mask - 1)) === 0) {
      times = this.schedules[31 - Math.clz32(mask)]!.times;
    } else {
      // Mark each member's times with a fresh stamp, then read the marks in order.
      const r = this.resolution;
      this.marks ??= new Int32Array(86_400 / r);
      const stamp = ++this.stamp;
      let count = 0;
      for (let i = 0; i < this.schedules.length; i++) {
        if (!(mask & (1 << i))) continue;
        for (const t of this.schedules[i]!.times) {
          if (this.marks[t / r] === stamp) continue;
          this.marks[t / r] = stamp;
          count++;
        }
      }
      times = new Int32Array(count);
      for (let slot = 0, k = 0; k < count; slot++) if (this.marks[slot] === stamp) times[k++] = slot * r;
    }
    let minGap = Infinity;
    let minIndex = -1;
    for (let k = 1; k < times.length; k++) {
      if (times[k]! - times[k - 1]! >= minGap) continue;
      minGap = times[k]! - times[k - 1]!;
      minIndex = k - 1;
    }
    union = { times, minGap, minIndex };
    this.unions.set(mask, union);
    return union;
  }
}

// ---------------------------------------------------------------------------------------------------------
// The zone's UTC offsets

const offsetFormats = new Map<string, Intl.DateTimeFormat>();

/** The UTC offset of `timezone` at instant `t`, ms (local wall time = t + offset). */
function offsetAt(t: number, timezone: string): number {
  let f = offsetFormats.get(timezone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", { timeZone: timezone, timeZoneName: "longOffset" });
    offsetFormats.set(timezone, f);
  }
  const m = /GMT(?:([+-])(\d{1,2}):(\d{2})(?::(\d{2}))?)?$/.exec(f.format(t));
  if (!m) throw new Error(`cron gap: unreadable offset of ${timezone}`);
  if (m[1] === undefined) return 0;
  return (m[1] === "-" ? -1 : 1) * ((+m[2]! * 60 + +m[3]!) * 60 + +(m[4] ?? 0)) * 1000;
}

/** A stretch of real time with one offset. */
interface Segment {
  from: number;
  to: number;
  offset: number;
}

/** The zone around one calendar year: its offset segments from two days before to two days after. */
interface ZoneYear {
  segments: Segment[];
  /** Local spans [lo, hi] (ms, as Date.UTC numbers) touched by each change: skipped or repeated wall times. */
  touched: [number, number][];
}

const SAMPLE_MS = 7 * DAY_MS;
const zoneYears = new Map<string, ZoneYear>();

function zoneYear(timezone: string, year: number): ZoneYear {
  const key = `${timezone} ${year}`;
  const cached = zoneYears.get(key);
  if (cached) return cached;
  const start = Date.UTC(year, 0, 1) - 2 * DAY_MS;
  const end = Date.UTC(year + 1, 0, 1) + 2 * DAY_MS;
  const changes: { at: number; before: number; after: number }[] = [];
  let t = start;
  let offset = offsetAt(t, timezone);
  const first = offset;
  while (t < end) {
    const next = Math.min(t + SAMPLE_MS, end);
    const nextOffset = offsetAt(next, timezone);
    // Find every change in (t, next]: bisect to the first second with another offset, then go on from there.
    let lo = t;
    let loOffset = offset;
    while (loOffset !== nextOffset) {
      let hi = next;
      while (hi - lo > 1000) {
        const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
        if (offsetAt(mid, timezone) === loOffset) lo = mid;
        else hi = mid;
      }
      const after = offsetAt(hi, timezone);
      changes.push({ at: hi, before: loOffset, after });
      lo = hi;
      loOffset = after;
    }
    t = next;
    offset = nextOffset;
  }
  const segments: Segment[] = [];
  let from = -Infinity;
  let current = first;
  for (const c of changes) {
    segments.push({ from, to: c.at, offset: current });
    from = c.at;
    current = c.after;
  }
  segments.push({ from, to: Infinity, offset: current });
  const touched = changes.map((c): [number, number] => [c.at + Math.min(c.before, c.after), c.at + Math.max(c.before, c.after)]);
  const zy = { segments, touched };
  if (zoneYears.size > 20_000) zoneYears.clear();
  zoneYears.set(key, zy);
  return zy;
}

/** The instant a local wall time fires at: its first occurrence; undefined when a change skips it. */
function firstOccurrence(local: number, zy: ZoneYear): number | undefined {
  for (const s of zy.segments) {
    const t = local - s.offset;
    if (t >= s.from && t < s.to) return t;
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------------------
// Walking days

const LEAP_STARTS = [0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335, 366];
const COMMON_STARTS = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365];
const isLeap = (y: number) => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;

/** Receives each gap the walk considers (ms, between instants a and b); true stops the walk. */
type GapSink = (gap: number, a: number, b: number) => boolean | void;

/**
 * Walks the fires of whole local days in order, reporting for each fire day the gap from the previous fire
 * and the day's smallest inner gap (every gap of a day touched by a change, or cut by the window).
 */
class Walker {
  /** The last fire so far (instant), undefined before the first. */
  last: number | undefined;
  first: number | undefined;
  stopped = false;

  constructor(
    private readonly model: Model,
    private readonly sink: GapSink,
    /** Only fires strictly inside (after, before) count. */
    private readonly after = -Infinity,
    private readonly before = Infinity,
  ) {}

  private fire(t: number) {
    if (this.last !== undefined && this.sink(t - this.last, this.last, t)) this.stopped = true;
    this.first ??= t;
    this.last = t;
  }

  /** Walks local days [fromDay, toDay) of `year` (day of year, 0-based). */
  walkYear(year: number, zy: ZoneYear, fromDay = 0, toDay = isLeap(year) ? 366 : 365) {
    const starts = isLeap(year) ? LEAP_STARTS : COMMON_STARTS;
    const yearStart = Date.UTC(year, 0, 1);
    const jan1 = new Date(yearStart).getUTCDay();
    let month = 0;
    for (let d = fromDay; d < toDay && !this.stopped; d++) {
      while (d >= starts[month + 1]!) month++;
      const mask = this.model.dateMasks[(month * 31 + d - starts[month]!) * 7 + ((jan1 + d) % 7)]!;
      if (mask !== 0) this.day(yearStart + d * DAY_MS, this.model.dayTimes(mask), zy);
    }
  }

  private day(local: number, union: DayTimes, zy: ZoneYear) {
    const times = union.times;
    // Offsets are within ±1 day: a day more than 2 days from the window's ends lies wholly inside it.
    const inside = local - 2 * DAY_MS > this.after && local + 3 * DAY_MS < this.before;
    const touched = zy.touched.some(([lo, hi]) => lo <= local + DAY_MS && hi >= local);
    if (inside && !touched) {
      const offset = local - firstOccurrence(local, zy)!;
      const base = local - offset;
      this.fire(base + times[0]! * 1000);
      if (this.stopped) return;
      if (union.minIndex >= 0) {
        const a = base + times[union.minIndex]! * 1000;
        if (this.sink(union.minGap * 1000, a, a + union.minGap * 1000)) this.stopped = true;
      }
      this.last = base + times[times.length - 1]! * 1000;
      return;
    }
    // Fire by fire: skipped wall times dropped, repeated ones at their first occurrence, the window applied.
    const instants: number[] = [];
    for (const s of times) {
      const t = firstOccurrence(local + s * 1000, zy);
      if (t !== undefined && t > this.after && t < this.before) instants.push(t);
    }
    instants.sort((x, y) => x - y);
    for (const t of instants) {
      this.fire(t);
      if (this.stopped) return;
    }
  }
}

const yearType = (year: number) => new Date(Date.UTC(year, 0, 1)).getUTCDay() * 2 + (isLeap(year) ? 1 : 0);

/**
 * The smallest gap (ms) between consecutive fires of the union of `schedules` in `timezone`, over a whole
 * cycle (the Gregorian 400 years, each year type's daylight-saving changes those of its next occurrence after
 * `now`). Infinity when the union fires at most once per cycle (no expression the service accepts does).
 */
export function cronMinimumGap(schedules: readonly string[], timezone: string, now: number): number {
  const model = new Model(schedules);
  let min = Infinity;
  const sink: GapSink = (gap) => void (gap < min && (min = gap));
  // One walk per year type, from its first year on or after now's.
  const y0 = new Date(now).getUTCFullYear();
  const summaries = new Map<number, { first: number | undefined; last: number | undefined }>();
  for (let year = y0; summaries.size < 14 && year < y0 + CYCLE_WALK_YEARS; year++) {
    const type = yearType(year);
    if (summaries.has(type)) continue;
    const walker = new Walker(model, sink);
    walker.walkYear(year, zoneYear(timezone, year));
    const start = Date.UTC(year, 0, 1);
    summaries.set(type, {
      first: walker.first === undefined ? undefined : walker.first - start,
      last: walker.last === undefined ? undefined : walker.last - start,
    });
  }
  // Gaps between years: each year's first fire after the last fire of the years before.
  let last: number | undefined;
  for (let year = y0; year < y0 + CYCLE_WALK_YEARS; year++) {
    const s = summaries.get(yearType(year))!;
    if (s.first === undefined) continue;
    const start = Date.UTC(year, 0, 1);
    if (last !== undefined) sink(start + s.first - last, last, start + s.first);
    last = start + s.last!;
  }
  return min;
}

/**
 * Walks the fires strictly between `after` and `before` (real instants) day by day and calls `sink` with
 * consecutive fires' gaps (for a day untouched by a change: the gap from the previous fire to its first fire,
 * then its smallest inner gap only). Stops when `sink` answers true.
 */
export function walkCronGaps(schedules: readonly string[], timezone: string, after: number, before: number, sink: GapSink): void {
  const model = new Model(schedules);
  const walker = new Walker(model, sink, after, before);
  // Local days from two before `after`'s UTC date: a local day's fires lie within a day and a half of its start.
  const from = new Date(after - 2 * DAY_MS);
  const end = before + DAY_MS;
  for (let year = from.getUTCFullYear(); Date.UTC(year, 0, 1) < end && !walker.stopped; year++) {
    const fromDay =
      year === from.getUTCFullYear()
        ? Math.floor((Date.UTC(year, from.getUTCMonth(), from.getUTCDate()) - Date.UTC(year, 0, 1)) / DAY_MS)
        : 0;
    const toDay = Math.min(isLeap(year) ? 366 : 365, Math.ceil((end - Date.UTC(year, 0, 1)) / DAY_MS));
    walker.walkYear(year, zoneYear(timezone, year), fromDay, toDay);
  }
}

/** The first two consecutive fires after `after` closer than `floorMs`, searched over a whole cycle. */
export function firstGapBelow(
  schedules: readonly string[],
  timezone: string,
  after: number,
  floorMs: number,
): { a: number; b: number } | undefined {
  let found: { a: number; b: number } | undefined;
  const horizon = Date.UTC(new Date(after).getUTCFullYear() + CYCLE_WALK_YEARS, 0, 1);
  walkCronGaps(schedules, timezone, after, horizon, (gap, a, b) => {
    if (gap < floorMs) found = { a, b };
    return found !== undefined;
  });
  return found;
}
