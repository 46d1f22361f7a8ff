/**
 * Issue 17 item 6's benchmark (API.md §18.4: the cron floor over a whole cycle), part of `npm run bench` (called
 * from bench/run.ts) and runnable alone without the local stack: `npx tsx bench/cron-floor.ts`. A workflow with
 * 10 schedules in a zone with daylight saving; each side measured round by round in turn with its baseline:
 *
 *   cron floor, whole cycle         cronMinimumGap (shared/workflow/cron-gap.ts)  vs  the check it replaced: the
 *                                   next 64 fires of the union (cronFires) and their gaps
 *   cron floor, first in a zone     the same, each round in a zone neither side has seen (cold caches: the zone's
 *                                   transitions, Intl formatters)
 *   validateDefinition create       the whole create validation with the floor  vs  the same definition validated
 *                                   for :simulate (every rule but the floors)
 *
 *   BENCH_CRON_ROUNDS (default min(200, BENCH_ROUNDS)).
 */
import { validateDefinition } from "../shared/workflow/definition";
import { cronMinimumGap } from "../shared/workflow/cron-gap";
import { stat, statCells, type Stat } from "./stats";
import { cronFires } from "../shared/workflow/chain-rules";
import { DEFAULT_LIMITS } from "../shared/kinds/support/schema-kit";

type Report = (name: string, stat: Stat, baselineName: string, baseline: Stat) => void;

/** Ten schedules that pass the 300 s floor, some of them on the days New York changes its clocks. */
export const TEN_SCHEDULES = [
  "*/15 9-17 * * MON-FRI",
  "0 8 1,15 * *",
  "30 12 * * SAT,SUN",
  "45 2 * 3,11 SUN",
  "0 0 1 1 *",
  "10 23 31 12 *",
  "20 1 * * *",
  "50 3 13 * FRI",
  "5 6 29 2 *",
  "40 18 28-31 * *",
];
const ZONE = "America/New_York";

/** The check before §18.4: the next 64 fires of the union from now, and whether two are closer than the floor. */
function sampledCheck(schedules: readonly string[], timezone: string, now: number, floorMs: number): boolean {
  const fires = cronFires(schedules, timezone, now, 64);
  for (let i = 1; i < fires.length; i++) if (fires[i]!.at - fires[i - 1]!.at < floorMs) return false;
  return true;
}

/** `rounds` rounds of `a` then `b` (after 10 warm-up rounds unless `warm` is false), each timed. */
function interleaved(rounds: number, a: (i: number) => void, b: (i: number) => void, warm = true): [Stat, Stat] {
  const ta: number[] = [];
  const tb: number[] = [];
  for (let i = warm ? -10 : 0; i < rounds; i++) {
    let start = performance.now();
    a(i);
    if (i >= 0) ta.push(performance.now() - start);
    start = performance.now();
    b(i);
    if (i >= 0) tb.push(performance.now() - start);
  }
  return [stat(ta), stat(tb)];
}

/** Zones with daylight saving (January's offset differs from July's), in a stable order. */
function zonesWithDst(): string[] {
  const offset = (zone: string, t: number) =>
    new Intl.DateTimeFormat("en-US", { timeZone: zone, timeZoneName: "longOffset" }).format(t).split("GMT")[1];
  const y = new Date().getUTCFullYear();
  return Intl.supportedValuesOf("timeZone").filter(
    (zone) => zone !== ZONE && offset(zone, Date.UTC(y, 0, 15)) !== offset(zone, Date.UTC(y, 6, 15)),
  );
}

export async function benchCronFloor(report: Report): Promise<void> {
  const rounds = Number(process.env.BENCH_CRON_ROUNDS ?? Math.min(200, Number(process.env.BENCH_ROUNDS ?? 200)));
  const began = performance.now();
  const now = Date.now();
  const floorMs = DEFAULT_LIMITS.minCronIntervalS * 1000;
  const check = (zone: string) => {
    if (cronMinimumGap(TEN_SCHEDULES, zone, now) < floorMs) throw new Error("bench schedules refused");
  };
  const sampled = (zone: string) => {
    if (!sampledCheck(TEN_SCHEDULES, zone, now, floorMs)) throw new Error("bench schedules refused by the sample");
  };

  const [whole, sample] = interleaved(
    rounds,
    () => check(ZONE),
    () => sampled(ZONE),
  );
  report(`cron floor, 10 schedules, ${ZONE}`, whole, "64-fire sample", sample);

  // Cold: the two sides take alternate zones, so neither finds the other's caches warm.
  const zones = zonesWithDst();
  const coldRounds = Math.min(rounds, Math.floor(zones.length / 2));
  const [wholeCold, sampleCold] = interleaved(
    coldRounds,
    (i) => check(zones[2 * i]!),
    (i) => sampled(zones[2 * i + 1]!),
    false,
  );
  report(`cron floor, first in a zone (${coldRounds} zones)`, wholeCold, "64-fire sample", sampleCold);

  const trigger = { name: "start", type: "cron", config: { schedules: TEN_SCHEDULES, timezone: ZONE } };
  const nodes = [{ id: "a", name: "a", type: "customCode", config: { source: "return 1" } }];
  const common = { limits: DEFAULT_LIMITS, chains: [{ chainId: 31337 }], defaultChainId: 31337, now };
  const [create, simulate] = interleaved(
    rounds,
    () =>
      validateDefinition(
        { smartWalletAddress: "0x5b38da6a701c568545dcfcb03fcb875f56beddc4", trigger, nodes },
        { ...common, mode: "create" },
      ),
    () => validateDefinition({ trigger, nodes, inputVariables: {} }, { ...common, mode: "simulate" }),
  );
  report("validateDefinition create (10 cron)", create, "simulate (no floor)", simulate);
  console.log(`cron floor benches: ${((performance.now() - began) / 1000).toFixed(1)} s (rounds ${rounds})`);
}

// Alone: `npx tsx bench/cron-floor.ts` prints its own rows.
if (process.argv[1]?.endsWith("cron-floor.ts")) {
  const rows: string[][] = [];
  await benchCronFloor((name, s, baselineName, b) => rows.push([...statCells(name, s, baselineName, b), `${(s.p50 / b.p50).toFixed(2)}x`]));
  const header = ["operation", "p50 ms", "p99 ms", "baseline", "p50 ms", "p99 ms", "p50 ratio"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  for (const r of [header, ...rows]) console.log(r.map((c, i) => c.padEnd(widths[i]!)).join("  "));
}
