/**
 * cron (API.md §8.3.3): fires at every instant of the union of `schedules` in `timezone`. Step output:
 * `{timestamp, timestampIso}`. The expression grammar and croner's reading of it live here; the frequency floor
 * (§8.7 item 7) and the fire instants are in shared/workflow/chain-rules.ts.
 */
import * as v from "valibot";
import { Cron } from "croner";
import { list, opt, str, strict } from "../support/schema-kit";
import { defineTrigger, triggerShape } from "../kind";

const CRON_VALUE = "(?:[0-9]+|[A-Za-z]{3})";
const CRON_ITEM = `(?:\\*|${CRON_VALUE}(?:-${CRON_VALUE})?)(?:/[0-9]+)?`;
const CRON_FIELD = `${CRON_ITEM}(?:,${CRON_ITEM})*`;
const CRON_DESCRIPTORS = ["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@hourly"] as const;
const CRON_PATTERN = new RegExp(`^(?:${CRON_DESCRIPTORS.join("|")}|${CRON_FIELD}(?:[ \\t]+${CRON_FIELD}){4})$`);
const CRON_MESSAGE =
  "must be a cron expression: five fields (minute hour day-of-month month day-of-week) with *, lists, ranges, steps and JAN-DEC/SUN-SAT names, or @yearly, @annually, @monthly, @weekly, @daily, @hourly";

/**
 * Options for croner that give the contract's reading of an expression: five fields only, day-of-month OR
 * day-of-week when both are restricted (croner's `domAndDow: false`, the former `legacyMode: true`), 0 and 7
 * both Sunday (croner's standard weekday numbering).
 */
export const CRONER_OPTIONS = { mode: "5-part", domAndDow: false, alternativeWeekdays: false, paused: true } as const;

function isCronExpression(expression: string): boolean {
  if (!CRON_PATTERN.test(expression)) return false;
  try {
    // An expression that can never fire (`0 0 30 2 *`) is refused too: 28 years from 2000 cover every calendar.
    return new Cron(expression, CRONER_OPTIONS).nextRun(new Date(Date.UTC(2000, 0, 1))) !== null;
  } catch {
    return false;
  }
}

const CronExpression = v.pipe(
  str(),
  v.regex(CRON_PATTERN, CRON_MESSAGE),
  v.check(isCronExpression, CRON_MESSAGE),
  v.description(
    "Five-field cron expression (minute hour day-of-month month day-of-week; `*`, `,`, `-`, `/`, JAN-DEC, SUN-SAT case-insensitive, day of week 0-7 with 0 and 7 Sunday; day-of-month and day-of-week both restricted means either may match), or @yearly, @annually, @monthly, @weekly, @daily, @hourly.",
  ),
);

function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: name });
    return true;
  } catch {
    return false;
  }
}
const TimeZone = v.pipe(
  str(),
  v.regex(/^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)*$/, "must be an IANA time zone name such as Europe/Paris"),
  v.check(isTimeZone, "must be an IANA time zone name such as Europe/Paris"),
);

export const cronShape = triggerShape({
  type: "cron",
  doc: "Fires at each instant of its cron schedules in its time zone; output {timestamp, timestampIso}.",
  config: () =>
    strict(
      {
        schedules: list(CronExpression, 1, 10, "schedules"),
        timezone: opt(TimeZone, "UTC"),
      },
      "cron trigger. Any two consecutive fires of the union of `schedules` in `timezone`, over a whole cycle of the expressions (daylight-saving changes included), must be at least `min_cron_interval_s` (300 s) apart (TRIGGER_TOO_FREQUENT).",
    ),
});

export const cron = /* @__PURE__ */ defineTrigger(cronShape);
