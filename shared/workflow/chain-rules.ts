/**
 * §8.7 item 5 (non-zero chain ids are configured) and item 7 (frequency floors of cron and block triggers, with the
 * cron fires they are measured on): ./definition.ts, module header.
 */
import { Cron } from "croner";
import type { FieldError } from "../errors";
import { cronMinimumGap, firstGapBelow } from "./cron-gap";
import type { Mode, ChainInfo, ValidateOptions, Definition } from "./definition-types";
import { isObject } from "./field-rules";
import type { Registry } from "../kinds/registry";
import { CRONER_OPTIONS } from "../kinds/triggers/cron";
import { partChainId } from "../kinds/support/schema-kit";

// ---------------------------------------------------------------------------------------------------------
// Item 5: chains

export function unsupportedChains(definition: Definition, chains: readonly ChainInfo[], kinds: Registry): FieldError[] {
  const configured = new Set(chains.map((c) => c.chainId));
  const problems: FieldError[] = [];
  const check = (path: string, chainId: unknown) => {
    if (typeof chainId === "number" && chainId !== 0 && !configured.has(chainId)) {
      problems.push({ path, message: `chain ${chainId} is not supported by this service` });
    }
  };
  const checkConfig = (chainAware: boolean | undefined, config: unknown, at: string) => {
    if (!chainAware || !isObject(config)) return;
    check(`${at}.chainId`, config.chainId);
    if (typeof config.chain === "string" && /^[0-9]+$/.test(config.chain)) check(`${at}.chain`, Number(config.chain));
  };
  check("body.chainId", definition.chainId);
  checkConfig(kinds.trigger(definition.trigger.type)?.chainAware, definition.trigger.config, "body.trigger.config");
  definition.nodes.forEach((node, i) => {
    const kind = kinds.node(node.type);
    checkConfig(kind?.chainAware, node.config, `body.nodes[${i}].config`);
    if (kind?.nestedChainIds && isObject(node.config))
      for (const nested of kind.nestedChainIds(node.config)) check(`body.nodes[${i}].config.${nested.path}`, nested.chainId);
    // A kind that holds another (the loop's runner).
    const runner = (node.config as { runner?: unknown }).runner;
    if (isObject(runner) && typeof runner.type === "string")
      checkConfig(kinds.node(runner.type)?.chainAware, runner.config, `body.nodes[${i}].config.runner.config`);
  });
  return problems;
}

// ---------------------------------------------------------------------------------------------------------
// Item 7: frequency floors

/** Block times of API.md §5, seconds; any other chain 1 s. A chain's configured `blockTimeSeconds` wins. */
const DEFAULT_BLOCK_TIMES: Readonly<Record<number, number>> = {
  1: 12,
  11155111: 12,
  10: 2,
  8453: 2,
  84532: 2,
  56: 0.75,
  42161: 0.25,
  130: 0.2,
  4663: 0.1,
};

function blockTimeSeconds(chainId: number, chains: readonly ChainInfo[] = []): number {
  return chains.find((c) => c.chainId === chainId)?.blockTimeSeconds ?? DEFAULT_BLOCK_TIMES[chainId] ?? 1;
}

export function frequencyProblems(definition: Definition, options: ValidateOptions<Mode>): FieldError[] {
  const trigger = definition.trigger;
  if (trigger.type === "block") {
    const chainId = partChainId(trigger.config, definition.chainId);
    const blockMs = Math.round(blockTimeSeconds(chainId, options.chains) * 1000);
    const floorMs = options.limits.minBlockIntervalS * 1000;
    if (trigger.config.interval * blockMs < floorMs) {
      const least = Math.ceil(floorMs / blockMs);
      return [
        {
          path: "body.trigger.config.interval",
          message: `fires every ${(trigger.config.interval * blockMs) / 1000} s on chain ${chainId} (${blockMs / 1000} s blocks); the minimum is ${options.limits.minBlockIntervalS} s, so the interval must be at least ${least}`,
        },
      ];
    }
  }
  if (trigger.type === "cron") {
    // Every fire of a whole cycle counts (§18.4), computed from the expressions' fields (cron-gap.ts).
    const { schedules, timezone } = trigger.config;
    const floorMs = options.limits.minCronIntervalS * 1000;
    const least = cronMinimumGap(schedules, timezone, options.now);
    if (least >= floorMs) return [];
    const floor = `the minimum is ${options.limits.minCronIntervalS} s`;
    // The first such pair from now, for the message; the walk finds one unless the zone's changes broke the
    // assumption of cron-gap.ts (changes repeat by year type), which then still refuses.
    const pair = firstGapBelow(schedules, timezone, options.now, floorMs);
    if (!pair) return [{ path: "body.trigger.config.schedules", message: `fires ${least / 1000} s apart at least once; ${floor}` }];
    const { a, b } = pair;
    const shared = schedules.findIndex((s) => {
      const cron = new Cron(s, { ...CRONER_OPTIONS, timezone });
      return cron.match(new Date(a)) && cron.match(new Date(b));
    });
    return [
      {
        path: shared < 0 ? "body.trigger.config.schedules" : `body.trigger.config.schedules[${shared}]`,
        message: `fires ${(b - a) / 1000} s apart (${new Date(a).toISOString()} and ${new Date(b).toISOString()}); ${floor}`,
      },
    ];
  }
  return [];
}

/** A fire instant of a cron trigger and the indices of the schedules that fire then. */
export interface CronFire {
  at: number;
  schedules: number[];
}

/**
 * The first `count` fire instants after `after` of the union of `schedules` in `timezone`, with the contract's
 * daylight-saving rules (§8.3.3): a local time skipped by a change does not fire, and a local time that
 * occurs twice fires once, at its first occurrence.
 *
 * croner computes the instants. Its own DST handling follows Vixie cron instead (a fixed-time job skipped by
 * a change runs just after the gap; an interval job runs in both passes of a repeated hour), so its instants
 * are filtered: one whose local time does not match the expression (moved out of a gap) or whose local time
 * already happened earlier (second pass) is dropped.
 */
export function cronFires(schedules: readonly string[], timezone: string, after: number, count: number): CronFire[] {
  // A k-way merge: each schedule yields its next kept instant; the earliest is taken until `count` are found.
  const streams = schedules.map((expression) => {
    const cron = new Cron(expression, { ...CRONER_OPTIONS, timezone });
    let previous = new Date(after);
    return () => {
      // Dropped instants come in runs of at most a repeated hour or two of minutes.
      for (let guard = 0; guard < 1500; guard++) {
        const next = cron.nextRun(previous);
        if (!next) return undefined;
        previous = next;
        if (cron.match(next) && !isRepeatedLocalTime(next.getTime(), timezone)) return next.getTime();
      }
      return undefined;
    };
  });
  const heads = streams.map((next) => next());
  const fires: CronFire[] = [];
  while (fires.length < count) {
    let at: number | undefined;
    for (const head of heads) if (head !== undefined && (at === undefined || head < at)) at = head;
    if (at === undefined) break;
    const indices = heads.flatMap((head, i) => (head === at ? [i] : []));
    for (const i of indices) heads[i] = streams[i]!();
    fires.push({ at, schedules: indices });
  }
  return fires;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

/** The UTC offset of `timezone` at instant `t`, in ms (local wall time = t + offset). */
function utcOffset(t: number, timezone: string): number {
  let f = formatters.get(timezone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone: timezone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    formatters.set(timezone, f);
  }
  const parts = Object.fromEntries(f.formatToParts(new Date(t)).map((p) => [p.type, p.value]));
  const wall = Date.UTC(+parts.year!, +parts.month! - 1, +parts.day!, +parts.hour!, +parts.minute!, +parts.second!);
  return wall - Math.floor(t / 1000) * 1000;
}

/** True when the local wall time at `t` already occurred earlier (the second pass of a repeated hour). */
function isRepeatedLocalTime(t: number, timezone: string): boolean {
  const offset = utcOffset(t, timezone);
  // A clock set back by Δ within the last 3 hours shows a larger offset 3 hours ago; without one, nothing repeats.
  if (utcOffset(t - 3 * 3_600_000, timezone) <= offset) return false;
  const earlierOffsets = new Set<number>();
  for (let k = 1; k <= 12; k++) {
    const o = utcOffset(t - k * 15 * 60_000, timezone);
    if (o > offset) earlierOffsets.add(o);
  }
  for (const o of earlierOffsets) {
    const earlier = t + offset - o;
    if (earlier < t && utcOffset(earlier, timezone) === o) return true;
  }
  return false;
}
