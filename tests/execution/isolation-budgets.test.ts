/**
 * An execution's memory, size and outbound budgets (API.md §18.2, §18.3) over a real HTTP server of the
 * whole service: bodies held as text (the host's RSS while four executions fetch three 9.5 MiB bodies of
 * tiny objects each, and another owner's latency meanwhile), the 32 MiB execution state, JSON nested deeper
 * than 512 levels, and the 500 requests per execution counted at the upstream.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, type TestService } from "../support/service";
import { startUpstream, type Upstream } from "../support/upstream";
import { executionPath, jsonClient, type Json, type Owner } from "../support/client";

const MIB = 1_048_576;
let service: TestService;
const { call, ownerWithWallet, createWorkflow, waitTerminal } = jsonClient(() => service.url);
let target: Upstream;
let counted = 0;

/** ~9.5 MiB of `[{},{},...]`: parsed, each `{}` would be an object of its own. */
const TINY_OBJECTS = "[" + "{},".repeat(Math.floor((9.5 * MIB) / 3) - 1) + "{}]";
const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth);

beforeAll(async () => {
  service = await startService();
  target = await startUpstream((req, res) => {
    const path = req.url ?? "";
    res.setHeader("Content-Type", "application/json");
    if (path.startsWith("/tiny")) return res.end(TINY_OBJECTS);
    if (path.startsWith("/deep/")) return res.end(nested(Number(path.slice("/deep/".length))));
    if (path.startsWith("/count")) counted++;
    res.end(JSON.stringify({ ok: true }));
  });
});

afterAll(async () => {
  await service?.close();
  await target?.close();
});

const get = (id: string, path: string) => ({ id, name: id, type: "restApi", config: { url: `${target.url}${path}`, method: "GET" } });
/** Edges trigger → nodes[0] → nodes[1] → … */
const chain = (nodes: Json[]) => nodes.map((n, i) => ({ id: `e${i}`, source: i === 0 ? "t" : nodes[i - 1]!.id, target: n.id }));
/** Edges trigger → each node. */
const fan = (nodes: Json[]) => nodes.map((n, i) => ({ id: `f${i}`, source: "t", target: n.id }));

async function run(who: Owner, nodes: Json[], edges?: Json[]): Promise<Json> {
  const created = await createWorkflow(who, {
    trigger: { id: "t", name: "start", type: "manual", config: { data: {} } },
    nodes,
    ...(edges ? { edges } : {}),
  });
  const started = await call(who, "POST", `/workflows/${created.id}:trigger`, { triggerType: "manual", isBlocking: false });
  expect(started.status).toBe(202);
  return waitTerminal(who, executionPath(created.id, started.body.executionId), { timeoutMs: 120_000, intervalMs: 100 });
}

describe("execution state (§18.2)", () => {
  it("holds bodies as text: four executions fetching three 9.5 MiB bodies of tiny objects stay under 1 GB of RSS, and a neighbour is answered meanwhile", async () => {
    const [a, b] = await Promise.all([ownerWithWallet(), ownerWithWallet()]);
    const nodes = [get("one", "/tiny"), get("two", "/tiny"), get("three", "/tiny")];
    let peak = process.memoryUsage().rss;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
    const latencies: number[] = [];
    let done = false;
    const neighbour = (async () => {
      while (!done) {
        const started = performance.now();
        expect((await call(b, "GET", "/workflows?limit=5")).status).toBe(200);
        latencies.push(performance.now() - started);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const executions = await Promise.all([0, 1, 2, 3].map(() => run(a, nodes, chain(nodes))));
    done = true;
    await neighbour;
    clearInterval(sampler);

    for (const execution of executions) {
      expect(execution.status).toBe("success");
      // Recorded as the truncation marker (over max_step_output_bytes); later nodes saw the whole value.
      expect(execution.steps[1].output).toEqual({ data: null, truncated: true, originalSize: expect.any(Number) });
    }
    expect(peak / MIB).toBeLessThan(1_024);
    latencies.sort((x, y) => x - y);
    expect(latencies.at(-1)!).toBeLessThan(2_000);
    expect(latencies[Math.floor(latencies.length * 0.9)]!).toBeLessThan(500);
  }, 180_000);

  it("a step whose output would pass 32 MiB fails OUTPUT_TOO_LARGE with output {data: null}; later templates still read what was kept", async () => {
    const a = await ownerWithWallet();
    const nodes = [
      get("one", "/tiny"),
      get("two", "/tiny"),
      get("three", "/tiny"),
      get("four", "/tiny"),
      get("use", "/count?status={{three.data.status}}&url={{one.data.url}}"),
    ];
    const edges = [...chain(nodes.slice(0, 4)), { id: "c", source: "three", target: "use" }];
    // "use" runs beside "four": its templates are read out of the outputs the execution kept, as text.
    const execution = await run(a, nodes, edges);
    const byId = Object.fromEntries(execution.steps.map((s: Json) => [s.id, s]));
    expect(byId.three.success).toBe(true);
    expect(byId.four).toMatchObject({
      success: false,
      errorCode: "OUTPUT_TOO_LARGE",
      error: "execution state would exceed 32 MiB",
      output: { data: null },
    });
    expect(byId.use).toMatchObject({ success: true, inputs: ["three.data.status", "one.data.url"] });
  }, 120_000);

  it("JSON nested deeper than 512 levels fails the step INVALID_RESPONSE; 512 levels are read", async () => {
    const a = await ownerWithWallet();
    const nodes = [get("ok", "/deep/512"), get("deep", "/deep/1000"), get("deeper", "/deep/100000")];
    const execution = await run(a, nodes, fan(nodes));
    const byId = Object.fromEntries(execution.steps.map((s: Json) => [s.id, s]));
    expect(byId.ok.success).toBe(true);
    expect(JSON.stringify(byId.ok.output.data.data)).toBe(nested(512));
    for (const id of ["deep", "deeper"]) {
      expect(byId[id]).toMatchObject({
        success: false,
        errorCode: "INVALID_RESPONSE",
        error: "response JSON nested deeper than 512 levels",
      });
    }
  }, 60_000);
});

describe("outbound requests (§18.3)", () => {
  it("allows 500 requests per execution, loops included; the 501st fails HTTP_BUDGET_EXCEEDED and is never sent", async () => {
    const a = await ownerWithWallet();
    const items = Array.from({ length: 100 }, (_, i) => i);
    const loop = (id: string) => ({
      id,
      name: id,
      type: "loop",
      config: {
        inputVariable: "{{start.data.items}}",
        iterVar: "item",
        executionMode: "parallel",
        runner: { type: "restApi", config: { url: `${target.url}/count`, method: "GET" } },
      },
    });
    const nodes = ["l1", "l2", "l3", "l4", "l5", "l6"].map(loop);
    const created = await call(a, "POST", "/workflows", {
      smartWalletAddress: a.wallet,
      trigger: { id: "t", name: "start", type: "manual", config: { data: { items } } },
      nodes,
      edges: chain(nodes),
    });
    expect(created.status).toBe(201);
    const before = counted;
    const started = await call(a, "POST", `/workflows/${created.body.id}:trigger`, { triggerType: "manual", isBlocking: true });
    expect(started.status).toBe(200);
    const execution = (await call(a, "GET", `/executions/${started.body.executionId}?workflowId=${created.body.id}`)).body;
    expect(counted - before).toBe(500);
    const last = execution.steps.find((s: Json) => s.id === "l6");
    expect(last).toMatchObject({
      success: false,
      errorCode: "ITERATION_FAILED",
      error: expect.stringMatching(/^iteration \d+: execution reached its limit of 500 HTTP requests$/),
    });
    expect(execution.steps.filter((s: Json) => s.success && s.id !== "t")).toHaveLength(5);
  }, 60_000);
});
