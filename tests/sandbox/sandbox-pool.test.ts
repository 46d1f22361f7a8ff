/**
 * The sandbox pool's dispatch (API.md §18.1), on pools sized by the test: owners are served in turn, one
 * owner never holds more than its share, time queued does not count as running time, and a cut-off signal
 * stops an evaluation whether it is queued or running.
 */
import { afterEach, describe, expect, it } from "vitest";
import { defaultPoolOptions, SandboxPool } from "../../shared/sandbox/pool";
import type { Evaluation } from "../../shared/sandbox/quickjs";

const pools: SandboxPool[] = [];
const newPool = async (workers: number, perOwner: number) => {
  const pool = new SandboxPool({ ...defaultPoolOptions({}), workers, perOwner });
  pools.push(pool);
  await pool.ready();
  return pool;
};
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
});

const limits = { timeLimitMs: 5_000, memoryLimitMib: 64, logLimitBytes: 65_536 };
const expression = (source: string, timeLimitMs = 5_000): Evaluation => ({
  op: "run",
  kind: "expression",
  source,
  globalsJson: "{}",
  limits: { ...limits, timeLimitMs },
});
const spin = (ms: number) => expression(`(() => { const end = Date.now() + ${ms}; while (Date.now() < end) {} return ${ms} })()`);

describe("the sandbox pool", () => {
  it("serves owners in turn: with one worker, A's backlog and B's evaluations alternate", async () => {
    const pool = await newPool(1, 1);
    const order: string[] = [];
    const run = (owner: string, i: number) => pool.evaluate(owner, spin(20)).then(() => order.push(`${owner}${i}`));
    await Promise.all([...[0, 1, 2, 3].map((i) => run("A", i)), ...[0, 1].map((i) => run("B", i))]);
    expect(order).toEqual(["A0", "B0", "A1", "B1", "A2", "A3"]);
  });

  it("one owner holds at most its share: B's one-liner starts at once while A's spinning scripts fill A's share", async () => {
    const pool = await newPool(2, 1);
    const spinning = [0, 1, 2, 3].map(() => pool.evaluate("A", spin(1_000)));
    await new Promise((r) => setTimeout(r, 100));
    expect(pool.runningFor("A")).toBe(1);
    const started = performance.now();
    const b = await pool.evaluate("B", expression("1 + 1"));
    expect(b.answer).toEqual({ ok: true, raw: "2", log: "" });
    expect(performance.now() - started).toBeLessThan(500);
    const results = await Promise.all(spinning);
    // Each ran ~1 s although the last waited ~3 s in the queue: time queued is not running time.
    for (const r of results) expect(r.elapsedMs).toBeLessThan(1_500);
  });

  it("a cut-off signal stops a queued and a running evaluation with its reason, and frees the worker", async () => {
    const pool = await newPool(1, 1);
    const cut = new AbortController();
    const running = pool.evaluate("A", expression("(() => { while (true) {} })()"), cut.signal);
    const queued = pool.evaluate("A", expression("1"), cut.signal);
    await new Promise((r) => setTimeout(r, 200));
    cut.abort(new Error("simulation time limit of 25000 ms reached"));
    const stopped = { ok: false, errorCode: "SANDBOX_TIMEOUT", error: "simulation time limit of 25000 ms reached", log: "" };
    expect((await running).answer).toEqual(stopped);
    expect((await queued).answer).toEqual(stopped);
    expect((await queued).elapsedMs).toBe(0);
    expect((await pool.evaluate("B", expression("40 + 2"))).answer).toMatchObject({ ok: true, raw: "42" });
  });
});
