/**
 * Claim benchmarks (API.md §18.4, first bullet), part of `npm run bench` (alone: BENCH_ONLY=claims), called from
 * bench/run.ts with its server and runtime. Runs are not executed (a bus that only records), so only the claims
 * are measured:
 *
 *   :trigger, 20 at once on one workflow   each call's latency inside bursts of 20 concurrent calls  vs  one call
 *                                          alone on another workflow; noted: count updates tried per execution
 *                                          claimed (goal ~1: no retry for contention) and the answers' statuses
 *
 *   BENCH_CLAIM_ROUNDS (default 20 bursts; the single calls as many times 20).
 */
import { currentBus, setBus } from "../shared/execution/bus/install";
import { type EventBus } from "../shared/execution/bus/event-bus";
import { createOneNodeWorkflow, newOwner, note, type BenchContext } from "./workflows";
import { stat } from "./stats";
import { claimStats } from "../shared/workflow/claim";

const BURST = 20;

export async function benchClaims(ctx: BenchContext): Promise<void> {
  const rounds = Number(process.env.BENCH_CLAIM_ROUNDS ?? 20);
  const previousBus = currentBus();
  const quiet: EventBus = { publish: async () => undefined, subscribe: () => () => undefined };
  setBus(quiet);
  try {
    const who = await newOwner(ctx.base, "20");
    const [contended, alone] = [await createOneNodeWorkflow(ctx.base, who), await createOneNodeWorkflow(ctx.base, who)];
    const statuses = new Map<number, number>();
    const triggerOnce = async (id: string) => {
      const started = performance.now();
      const res = await fetch(`${ctx.base}/workflows/${id}:trigger`, {
        method: "POST",
        headers: who.headers,
        body: JSON.stringify({ triggerType: "manual" }),
      });
      await res.arrayBuffer();
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      return performance.now() - started;
    };

    for (let i = 0; i < 3; i++) await Promise.all(Array.from({ length: BURST }, () => triggerOnce(contended))); // warm-up
    for (let i = 0; i < BURST; i++) await triggerOnce(alone);
    statuses.clear();

    const before = { ...claimStats };
    const burstTimes: number[] = [];
    for (let round = 0; round < rounds; round++)
      burstTimes.push(...(await Promise.all(Array.from({ length: BURST }, () => triggerOnce(contended)))));
    const attempts = claimStats.attempts - before.attempts;
    const claimed = claimStats.claimed - before.claimed;
    const aloneTimes: number[] = [];
    for (let i = 0; i < rounds * BURST; i++) aloneTimes.push(await triggerOnce(alone));

    ctx.report(`:trigger, ${BURST} at once (one workflow)`, stat(burstTimes), ":trigger alone", stat(aloneTimes));
    const answered = [...statuses].map(([status, n]) => `${n}× ${status}`).join(", ");
    note(ctx, `claim attempts per execution ${(attempts / claimed).toFixed(3)} (${attempts}/${claimed}); ${answered}`);
  } finally {
    if (previousBus) setBus(previousBus);
  }
}
