/**
 * Fair runs across owners (API.md §18.4, third bullet) over the real server with RUNNER_CONCURRENCY 4 (at most 2
 * runs per owner): owner A's burst (a flood of asynchronous :trigger calls, or 60 fixedTime workflows on one
 * epoch fired by the local scheduler) of runs that each take ~200 ms of a restApi call to a slow local server,
 * while owner B's single run (asynchronous, blocking, or its fire on the same epoch) starts within a bound far
 * below the time A's backlog takes to drain; A never holds more than its share of running slots. Plus the
 * queue's dispatch rules on their own (turns, caps, max-min shares).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, type TestService } from "../support/service";
import { startUpstream, type Upstream } from "../support/upstream";
import { executionPath, jsonClient, type Json, type Owner } from "../support/client";
import { FairRunQueue, runQueue, waterLevel } from "../../shared/execution/run-queue";
import { createLocalScheduler, interleaveByOwner } from "../../shared/workflow/scheduler/local";
import { setScheduler } from "../../shared/workflow/scheduler/install";
import { fireTimeTrigger } from "../../shared/execution/time-fire";

const RUN_MS = 200;
let service: TestService;
/** The slow server; its requests: path and arrival time. */
let target: Upstream;
const { call, ownerWithWallet, createWorkflow, waitTerminal } = jsonClient(() => service.url);
/** How many requests of each owner the slow server holds at once, and the most it held. */
const inFlight = new Map<string, number>();
const maxInFlight = new Map<string, number>();

beforeAll(async () => {
  service = await startService({ RUNNER_CONCURRENCY: "4" });
  target = await startUpstream((req, res) => {
    const path = req.url ?? "";
    const who = path.split("/")[1] ?? "";
    inFlight.set(who, (inFlight.get(who) ?? 0) + 1);
    maxInFlight.set(who, Math.max(maxInFlight.get(who) ?? 0, inFlight.get(who)!));
    setTimeout(() => {
      inFlight.set(who, inFlight.get(who)! - 1);
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ path }));
    }, RUN_MS);
  });
});

afterAll(async () => {
  await service?.close();
  await target?.close();
});

/** A workflow whose run is one restApi GET of `<target>/<path>` (~200 ms). */
async function slowWorkflow(
  who: Owner,
  path: string,
  trigger: Json = { id: "t", name: "start", type: "manual", config: { data: {} } },
): Promise<string> {
  const workflow = await createWorkflow(who, {
    trigger,
    nodes: [{ id: "call", name: "call", type: "restApi", config: { url: `${target.url}/${path}`, method: "GET" } }],
    maxExecution: 10_000,
  });
  return workflow.id;
}

const arrivalOf = async (prefix: string, within: number): Promise<number> => {
  const deadline = Date.now() + within;
  while (Date.now() < deadline) {
    const hit = target.requests.find((a) => a.path.startsWith(prefix));
    if (hit) return hit.at;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no request to ${prefix} within ${within} ms`);
};

const queuedOf = (owner: Owner) => runQueue().stats().byOwner[owner.owner.toLowerCase()]?.queued ?? 0;

describe("one owner's flood of :trigger calls", () => {
  it("another owner's asynchronous and blocking runs start at once, not after the flood's backlog", { timeout: 120_000 }, async () => {
    const a = await ownerWithWallet();
    const b = await ownerWithWallet();
    const aFlows = await Promise.all([0, 1, 2, 3].map((i) => slowWorkflow(a, `a/${i}`)));
    const bFlow = await slowWorkflow(b, "b/async");
    const bBlocking = await slowWorkflow(b, "b/blocking");

    // A: 80 asynchronous runs of ~200 ms with at most 2 running: ~8 s to drain.
    const flood = await Promise.all(
      Array.from({ length: 80 }, (_, i) => call(a, "POST", `/workflows/${aFlows[i % 4]}:trigger`, { triggerType: "manual" })),
    );
    expect(flood.every((r) => r.status === 202)).toBe(true);
    await arrivalOf("/a/", 5_000);

    const sent = Date.now();
    expect((await call(b, "POST", `/workflows/${bFlow}:trigger`, { triggerType: "manual" })).status).toBe(202);
    const started = await arrivalOf("/b/async", 5_000);
    expect(started - sent).toBeLessThan(1_500);
    expect(queuedOf(a)).toBeGreaterThan(40); // A's backlog is still there

    const asked = Date.now();
    const blocking = await call(b, "POST", `/workflows/${bBlocking}:trigger`, { triggerType: "manual", isBlocking: true });
    expect(blocking.status).toBe(200);
    expect(blocking.body.status).toBe("success");
    expect(Date.now() - asked).toBeLessThan(2_000);
    expect(queuedOf(a)).toBeGreaterThan(30);

    // A never ran more than its share (half of 4 slots) at once.
    await service.bus.idle();
    expect(maxInFlight.get("a")).toBeLessThanOrEqual(2);
    expect(target.requests.filter((x) => x.path.startsWith("/a/"))).toHaveLength(80);
  });

  it(
    "a blocking trigger waits in its owner's turn; when blocking_trigger_wait_ms runs out it answers pending and the run goes on",
    { timeout: 120_000 },
    async () => {
      const a = await ownerWithWallet();
      const flows = await Promise.all([0, 1].map((i) => slowWorkflow(a, `a2/${i}`)));
      const limits = service.runtime.config.limits as { blockingTriggerWaitMs: number };
      const before = limits.blockingTriggerWaitMs;
      limits.blockingTriggerWaitMs = 500;
      try {
        const flood = await Promise.all(
          Array.from({ length: 20 }, (_, i) => call(a, "POST", `/workflows/${flows[i % 2]}:trigger`, { triggerType: "manual" })),
        );
        expect(flood.every((r) => r.status === 202)).toBe(true);
        // A's own blocking call queues behind A's backlog (~2 s): the wait, queue time included, runs out first.
        const own = await call(a, "POST", `/workflows/${flows[0]}:trigger`, { triggerType: "manual", isBlocking: true });
        expect(own.status).toBe(200);
        expect(own.body).toEqual({ executionId: expect.any(String), status: "pending", startAt: expect.any(Number) });
        await service.bus.idle();
        const execution = await waitTerminal(a, executionPath(flows[0]!, own.body.executionId), { timeoutMs: 10_000, intervalMs: 100 });
        expect(execution.status).toBe("success");
      } finally {
        limits.blockingTriggerWaitMs = before;
      }
    },
  );
});

describe("one owner's burst of fires on one fixedTime epoch", () => {
  it("another owner's fire on that epoch is claimed among the first and runs at once", { timeout: 180_000 }, async () => {
    const scheduler = setScheduler(createLocalScheduler(fireTimeTrigger));
    const a = await ownerWithWallet();
    const b = await ownerWithWallet();
    const epoch = Date.now() + 3_600_000;
    const trigger = { id: "t", name: "at", type: "fixedTime", config: { epochs: [epoch] } };
    const aFlows: string[] = [];
    for (let i = 0; i < 60; i++) aFlows.push(await slowWorkflow(a, `fa/${i}`, trigger));
    const bFlow = await slowWorkflow(b, "fb", trigger); // created last: its schedule item sorts after A's 60

    const began = Date.now();
    const fired = await scheduler.tick(epoch);
    expect(fired).toHaveLength(61);
    expect(fired.every((f) => f.result.outcome === "fired")).toBe(true);
    expect(fired.findIndex((f) => f.workflowId === bFlow)).toBeLessThanOrEqual(1); // interleaved by owner
    const started = await arrivalOf("/fb", 5_000);
    expect(started - began).toBeLessThan(1_500);
    expect(queuedOf(a)).toBeGreaterThan(30); // A's 60 runs take ~6 s at 2 at a time

    await service.bus.idle();
    expect(target.requests.filter((x) => x.path.startsWith("/fa/"))).toHaveLength(60);
    expect(maxInFlight.get("fa")).toBeLessThanOrEqual(2);
  });
});

// ---------------------------------------------------------------------------------------------------------

describe("the run queue's dispatch", () => {
  const gate = () => {
    let open!: () => void;
    const promise = new Promise<void>((r) => (open = r));
    return { promise, open };
  };

  it("serves owners in turn, least recently served first, at most half the slots each", async () => {
    const queue = new FairRunQueue(() => 4);
    const started: string[] = [];
    const gates: { open: () => void }[] = [];
    const job = (owner: string, label: string) =>
      queue.run(owner, async () => {
        started.push(label);
        const g = gate();
        gates.push(g);
        await g.promise;
      });
    const all = [...Array.from({ length: 6 }, (_, i) => job("A", `a${i}`)), job("B", "b0"), job("C", "c0"), job("B", "b1")];
    await new Promise((r) => setImmediate(r));
    // A takes its half (2); B and C, served least recently, take the other two.
    expect(started).toEqual(["a0", "a1", "b0", "c0"]);
    // a0 ends. Shares of 4 slots over A (wants 2), B (wants 2: b1 waits) and C (1): C 1, A and B 1.5 each, so
    // both may take the free slot; A was served least recently (before b0 and c0) and goes first.
    gates[0]!.open();
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(started.slice(4)).toEqual(["a2"]);
    // a1 ends: now A has 1 and B 1 waiting with b1 served less recently than A: B goes.
    gates[1]!.open();
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(started.slice(5)).toEqual(["b1"]);
    for (let i = 0; i < 20; i++) {
      gates.forEach((g) => g.open());
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(all);
    expect(started).toHaveLength(9);
    expect(queue.stats()).toMatchObject({ running: 0, queued: 0 });
  });

  it("splits slots max-min fairly", () => {
    expect(waterLevel([10, 10], 4)).toBe(2);
    expect(waterLevel([1, 10, 10], 16)).toBe(7);
    expect(waterLevel([1, 2], 16)).toBe(2);
    expect(waterLevel([8, 8, 8], 16)).toBe(5);
  });

  it("orders due fires owner by owner", () => {
    const items = [
      { workflowId: "1", owner: "A" },
      { workflowId: "2", owner: "A" },
      { workflowId: "3", owner: "A" },
      { workflowId: "4", owner: "B" },
      { workflowId: "5" },
      { workflowId: "6", owner: "b" },
    ];
    expect(interleaveByOwner(items).map((i) => i.workflowId)).toEqual(["1", "4", "5", "2", "6", "3"]);
  });
});
