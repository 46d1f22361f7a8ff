/**
 * JavaScript never runs on the serving thread (API.md §18.1), over a real HTTP server of the whole service:
 * while owner A's scripts spin (one `while (true) {}`, then a parallel loop of them saturating A's share of
 * the sandbox pool), owner B's requests and B's own one-line run keep their latency; the per-execution
 * JavaScript budget; :simulate stopping its work at the cap; a delete that takes effect while a script runs;
 * a sandbox worker killed mid-script. Bounds are generous: what they separate is milliseconds from seconds.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, type TestService } from "../support/service";
import { startUpstream, type Upstream } from "../support/upstream";
import { executionPath, jsonClient, type Json, type Owner } from "../support/client";
import { manualTrigger } from "../support/workflows";
import { waitFor } from "../support/wait";
import type { SignedIn } from "../support/auth";
import { sandboxPool } from "../../shared/sandbox/pool";

const SIMULATE_CAP_MS = 3_000;
let service: TestService;
const { call, ownerWithWallet, createWorkflow, waitTerminal } = jsonClient(() => service.url);
let target: Upstream;
let counted = 0;

beforeAll(async () => {
  service = await startService({ SIMULATE_TIMEOUT_MS: String(SIMULATE_CAP_MS) });
  target = await startUpstream((req, res) => {
    if (req.url?.startsWith("/count")) counted++;
    setTimeout(() => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ n: counted }));
    }, 100);
  });
});

afterAll(async () => {
  await service?.close();
  await target?.close();
});

const code = (id: string, source: string) => ({ id, name: id, type: "customCode", config: { source } });
/** A script that keeps its thread busy for `ms` (QuickJS has no timers: only spinning waits). */
const spinFor = (ms: number) => `const end = Date.now() + ${ms}; while (Date.now() < end) {} return ${ms}`;

/** The manual trigger every workflow here starts with: ten numbered items. */
const tenItems = manualTrigger({ items: Array.from({ length: 10 }, (_, i) => i) });

const trigger = (who: SignedIn, id: string, isBlocking: boolean) =>
  call(who, "POST", `/workflows/${id}:trigger`, { triggerType: "manual", isBlocking });

const terminal = (who: SignedIn, workflowId: string, executionId: string, timeoutMs = 60_000) =>
  waitTerminal(who, executionPath(workflowId, executionId), { timeoutMs, intervalMs: 100 });

/** Worst latency (ms) of each probe, sampled one after another for `durationMs`. */
async function sample(durationMs: number, probes: Record<string, () => Promise<void>>): Promise<Record<string, number>> {
  const worst: Record<string, number> = Object.fromEntries(Object.keys(probes).map((k) => [k, 0]));
  const until = Date.now() + durationMs;
  while (Date.now() < until) {
    for (const [name, probe] of Object.entries(probes)) {
      const started = performance.now();
      await probe();
      worst[name] = Math.max(worst[name]!, performance.now() - started);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return worst;
}

/** Owner B's probes: /health, an authenticated GET, and B's own one-line customCode run (blocking). */
async function neighbourProbes(b: Owner) {
  const oneLine = await createWorkflow(b, { trigger: tenItems, nodes: [code("one", "return 1 + 1")] });
  const probes = {
    health: async () => expect((await fetch(`${service.url}/health`)).status).toBe(200),
    authenticated: async () => expect((await call(b, "GET", "/workflows?limit=5")).status).toBe(200),
    run: async () => {
      const res = await trigger(b, oneLine.id, true);
      expect(res.status).toBe(200);
      expect(res.body.status).toBe("success");
    },
  };
  for (const probe of Object.values(probes)) await probe(); // warm: first calls load code paths, not what is measured
  return probes;
}

describe("a neighbour's spinning scripts", () => {
  it("while A runs `while (true) {}`, B's requests and B's one-line run keep their latency", async () => {
    const [a, b] = await Promise.all([ownerWithWallet(), ownerWithWallet()]);
    const probes = await neighbourProbes(b);
    const spinning = await createWorkflow(a, { trigger: tenItems, nodes: [code("spin", "while (true) {}")] });
    const started = await trigger(a, spinning.id, false);
    expect(started.status).toBe(202);
    await new Promise((r) => setTimeout(r, 200)); // the script is running now

    const worst = await sample(3_000, probes);
    expect(worst.health).toBeLessThan(300);
    expect(worst.authenticated).toBeLessThan(300);
    expect(worst.run).toBeLessThan(1_000);

    // A's own step is stopped by its time limit, wherever the script is.
    const execution = await terminal(a, spinning.id, started.body.executionId);
    expect(execution.status).toBe("failed");
    expect(execution.steps[1]).toMatchObject({
      success: false,
      errorCode: "SANDBOX_TIMEOUT",
      error: "script exceeded time limit of 5000 ms",
    });
  }, 60_000);

  it("while A's parallel loop of spinning iterations saturates A's share of the pool, B still gets a sandbox at once", async () => {
    const [a, b] = await Promise.all([ownerWithWallet(), ownerWithWallet()]);
    const probes = await neighbourProbes(b);
    const loop = {
      id: "spinAll",
      name: "spinAll",
      type: "loop",
      config: {
        inputVariable: "{{start.data.items}}",
        iterVar: "item",
        executionMode: "parallel",
        runner: { type: "customCode", config: { source: "while (true) {}" } },
      },
    };
    const spinning = await createWorkflow(a, { trigger: tenItems, nodes: [loop] });
    expect((await trigger(a, spinning.id, false)).status).toBe(202);
    await new Promise((r) => setTimeout(r, 300));
    const pool = sandboxPool();
    expect(pool.runningFor(a.owner)).toBe(pool.options.perOwner); // A's whole share; the rest of A's iterations wait
    expect(pool.stats().queued).toBeGreaterThan(0);

    const worst = await sample(4_000, probes);
    expect(worst.health).toBeLessThan(300);
    expect(worst.authenticated).toBeLessThan(300);
    expect(worst.run).toBeLessThan(1_000);
  }, 120_000);
});

describe("the per-execution JavaScript budget", () => {
  it("a sequential loop spinning 4 s per item ends with the budget's message after ~30 s of JavaScript", async () => {
    const a = await ownerWithWallet();
    const loop = {
      id: "slowLoop",
      name: "slowLoop",
      type: "loop",
      config: {
        inputVariable: "{{start.data.items}}",
        iterVar: "item",
        executionMode: "sequential",
        runner: { type: "customCode", config: { source: spinFor(4_000) } },
      },
    };
    const wf = await createWorkflow(a, { trigger: tenItems, nodes: [loop] });
    const started = Date.now();
    const res = await trigger(a, wf.id, false);
    const execution = await terminal(a, wf.id, res.body.executionId, 90_000);
    const took = Date.now() - started;
    expect(execution.status).toBe("failed");
    // Items 0-6 take 28 s; item 7 gets the 2 s left and is interrupted by the budget.
    expect(execution.steps[1]).toMatchObject({
      success: false,
      errorCode: "ITERATION_FAILED",
      error: "iteration 7: execution exceeded its JavaScript budget of 30000 ms",
    });
    expect(execution.steps[1].output.data.slice(0, 7)).toEqual([4000, 4000, 4000, 4000, 4000, 4000, 4000]);
    expect(took).toBeGreaterThan(29_000);
    expect(took).toBeLessThan(40_000);
  }, 120_000);
});

describe(":simulate at its cap", () => {
  it("answers within the cap + 2 s and stops the work still running: scripts interrupted, no request sent afterwards", async () => {
    const a = await ownerWithWallet();
    const loop = {
      id: "counting",
      name: "counting",
      type: "loop",
      config: {
        inputVariable: "{{start.data.items}}",
        iterVar: "item",
        executionMode: "sequential",
        runner: { type: "restApi", config: { url: `${target.url}/count`, method: "GET" } },
      },
    };
    const items = Array.from({ length: 100 }, (_, i) => i);
    const started = Date.now();
    const res = await call(a, "POST", "/workflows:simulate", {
      trigger: { id: "t", name: "start", type: "manual", config: { data: { items } } },
      nodes: [code("spin", "while (true) {}"), loop],
      edges: [
        { id: "e1", source: "t", target: "spin" },
        { id: "e2", source: "t", target: "counting" },
      ],
      inputVariables: {},
    });
    const took = Date.now() - started;
    expect(res.status).toBe(200);
    expect(took).toBeLessThan(SIMULATE_CAP_MS + 2_000);
    expect(res.body).toMatchObject({ status: "error", error: "simulation timed out" });
    const byId = Object.fromEntries(res.body.steps.map((s: Json) => [s.id, s]));
    const reached = `simulation time limit of ${SIMULATE_CAP_MS} ms reached`;
    expect(byId.spin).toMatchObject({ success: false, errorCode: "SANDBOX_TIMEOUT", error: reached });
    expect(byId.counting).toMatchObject({
      success: false,
      errorCode: "ITERATION_FAILED",
      error: expect.stringMatching(new RegExp(`^iteration \\d+: ${reached}$`)),
    });

    // Nothing keeps running: no sandbox is busy for the owner (other tests' owners may still be running), and the
    // counter, which the loop moved every few milliseconds, stays where it was.
    const atAnswer = counted;
    expect(atAnswer).toBeGreaterThan(5);
    await waitFor("the owner's sandboxes to stop", () => sandboxPool().runningFor(a.owner) === 0, { timeoutMs: 1_500 });
    await new Promise((r) => setTimeout(r, 250));
    expect(counted).toBe(atAnswer);
  }, 30_000);
});

describe("deleting a workflow while its script runs", () => {
  it('is served at once; the running step finishes, no further node starts, the run ends error "workflow was deleted"', async () => {
    const a = await ownerWithWallet();
    const wf = await createWorkflow(a, { trigger: tenItems, nodes: [code("slow", spinFor(2_500)), code("after", "return 'ran'")] });
    const res = await trigger(a, wf.id, false);
    await new Promise((r) => setTimeout(r, 500)); // "slow" is running
    const deleteStarted = performance.now();
    expect((await call(a, "DELETE", `/workflows/${wf.id}`)).status).toBe(204);
    expect(performance.now() - deleteStarted).toBeLessThan(300);

    const execution = await terminal(a, wf.id, res.body.executionId);
    expect(execution).toMatchObject({ status: "error", error: "workflow was deleted" });
    expect(execution.steps.map((s: Json) => s.id)).toEqual(["t", "slow"]);
    expect(execution.steps[1]).toMatchObject({ success: true, output: { data: 2500 } });
    expect(execution.endAt - execution.startAt).toBeLessThan(5_000); // within the script's own limit
  }, 30_000);
});

describe("a sandbox worker killed mid-script", () => {
  it("fails that step, is replaced, and the next evaluation works", async () => {
    const a = await ownerWithWallet();
    const wf = await createWorkflow(a, { trigger: tenItems, nodes: [code("spin", spinFor(3_000))] });
    const pending = trigger(a, wf.id, true);
    const pool = sandboxPool();
    for (let i = 0; i < 50 && pool.busyWorkersForTests(a.owner).length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    const [busy] = pool.busyWorkersForTests(a.owner);
    expect(busy).toBeDefined();
    await busy!.terminate();

    const res = await pending;
    expect(res.status).toBe(200);
    expect(res.body.status).toBe("failed");
    const execution = await terminal(a, wf.id, res.body.executionId);
    expect(execution.steps[1]).toMatchObject({ success: false, errorCode: "SANDBOX_ERROR", error: "the sandbox failed" });

    const again = await createWorkflow(a, { trigger: tenItems, nodes: [code("fine", "return [1, 2, 3].map((x) => x * 2)")] });
    const next = await trigger(a, again.id, true);
    expect(next.body.status).toBe("success");
    expect(pool.stats().workers).toBe(pool.options.workers);
  }, 30_000);
});
