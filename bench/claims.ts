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
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { signInWithAccount } from "../local/client";
import { currentBus, setBus, type EventBus } from "../shared/execution/bus";
import { claimStats } from "../shared/workflow/workflow";
import type { BenchContext, Stat } from "./workflows";

const BURST = 20;

function stat(times: number[]): Stat {
  const sorted = [...times].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
  return { p50: at(50), p99: at(99) };
}

export async function benchClaims(ctx: BenchContext): Promise<void> {
  const rounds = Number(process.env.BENCH_CLAIM_ROUNDS ?? 20);
  const previousBus = currentBus();
  const quiet: EventBus = { publish: async () => undefined, subscribe: () => () => undefined };
  setBus(quiet);
  try {
    const account = privateKeyToAccount(generatePrivateKey());
    const headers = { Authorization: `Bearer ${await signInWithAccount(ctx.base, account)}`, "Content-Type": "application/json" };
    const wallet = await fetch(`${ctx.base}/wallets`, { method: "POST", headers, body: JSON.stringify({ salt: "20" }) });
    const { address } = (await wallet.json()) as { address: string };
    const create = async () => {
      const res = await fetch(`${ctx.base}/workflows`, {
        method: "POST",
        headers,
        body: JSON.stringify({
          smartWalletAddress: address,
          trigger: { id: "t", name: "start", type: "manual", config: { data: {} } },
          nodes: [{ id: "one", name: "one", type: "customCode", config: { source: "return 1" } }],
          maxExecution: 1_000_000,
        }),
      });
      const body = (await res.json()) as { id?: string };
      if (res.status !== 201 || !body.id) throw new Error(`POST /workflows: ${res.status} ${JSON.stringify(body)}`);
      return body.id;
    };
    const [contended, alone] = [await create(), await create()];
    const statuses = new Map<number, number>();
    const triggerOnce = async (id: string) => {
      const started = performance.now();
      const res = await fetch(`${ctx.base}/workflows/${id}:trigger`, { method: "POST", headers, body: JSON.stringify({ triggerType: "manual" }) });
      await res.arrayBuffer();
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      return performance.now() - started;
    };

    for (let i = 0; i < 3; i++) await Promise.all(Array.from({ length: BURST }, () => triggerOnce(contended))); // warm-up
    for (let i = 0; i < BURST; i++) await triggerOnce(alone);
    statuses.clear();

    const before = { ...claimStats };
    const burstTimes: number[] = [];
    for (let round = 0; round < rounds; round++) burstTimes.push(...(await Promise.all(Array.from({ length: BURST }, () => triggerOnce(contended)))));
    const attempts = claimStats.attempts - before.attempts;
    const claimed = claimStats.claimed - before.claimed;
    const aloneTimes: number[] = [];
    for (let i = 0; i < rounds * BURST; i++) aloneTimes.push(await triggerOnce(alone));

    ctx.report(`:trigger, ${BURST} at once (one workflow)`, stat(burstTimes), ":trigger alone", stat(aloneTimes));
    const answered = [...statuses].map(([status, n]) => `${n}× ${status}`).join(", ");
    ctx.rows[ctx.rows.length - 1]!.push(`claim attempts per execution ${(attempts / claimed).toFixed(3)} (${attempts}/${claimed}); ${answered}`);
  } finally {
    if (previousBus) setBus(previousBus);
  }
}
