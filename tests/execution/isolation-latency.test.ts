/**
 * Another owner's latency while one owner's executions read large HTTP bodies (API.md §18, §18.2): four
 * executions each fetching three 9.5 MiB bodies of tiny objects, while a neighbour calls GET /health and its own
 * list. Every large piece of work per body (decoding, checking, measuring, copying) runs in bounded slices or
 * off the serving thread, so the neighbour keeps its usual latency.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { startService, type TestService } from "../support/service";
import { spawn, type ChildProcess } from "node:child_process";
import { executionPath, jsonClient, type Json, type Owner } from "../support/client";

const MIB = 1_048_576;
let service: TestService;
const { call, ownerWithWallet, createWorkflow, waitTerminal } = jsonClient(() => service.url);
let upstream: ChildProcess;
let targetUrl: string;

/**
 * The upstream in a process of its own, answering ~9.5 MiB of `[{},{},...]` (parsed, each `{}` would be an
 * object of its own): its writes of large bodies would otherwise count as the service's own work.
 */
const UPSTREAM = `
  const body = Buffer.from("[" + "{},".repeat(${Math.floor((9.5 * MIB) / 3) - 1}) + "{}]");
  const server = require("node:http").createServer((req, res) => {
    res.setHeader("Content-Type", "application/json");
    res.end(body);
  });
  server.listen(0, "127.0.0.1", () => process.send(server.address().port));
`;

beforeAll(async () => {
  service = await startService();
  upstream = spawn(process.execPath, ["-e", UPSTREAM], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
  targetUrl = `http://127.0.0.1:${await new Promise<number>((resolve) => upstream.once("message", (port) => resolve(Number(port))))}`;
});

afterAll(async () => {
  await service?.close();
  upstream?.kill();
});

const get = (id: string) => ({ id, name: id, type: "restApi", config: { url: `${targetUrl}/tiny`, method: "GET" } });

async function run(who: Owner, nodes: Json[]): Promise<Json> {
  // Every node straight from the trigger: the three bodies of an execution are read and scanned at once.
  const edges = nodes.map((n, i) => ({ id: `e${i}`, source: "t", target: n.id }));
  const created = await createWorkflow(who, { trigger: { id: "t", name: "start", type: "manual", config: { data: {} } }, nodes, edges });
  const started = await call(who, "POST", `/workflows/${created.id}:trigger`, { triggerType: "manual", isBlocking: false });
  expect(started.status).toBe(202);
  return waitTerminal(who, executionPath(created.id, started.body.executionId), { timeoutMs: 120_000, intervalMs: 250 });
}

describe("large bodies and a neighbour's latency (§18, §18.2)", () => {
  it("four executions parsing three 9.5 MiB bodies each leave the serving thread free (event-loop delay p90 < 28 ms) and another owner's /health at p90 < 300 ms", async () => {
    const [a, b] = await Promise.all([ownerWithWallet(), ownerWithWallet()]);
    const latencies: number[] = [];
    const delay = monitorEventLoopDelay({ resolution: 5 });
    delay.enable();
    let done = false;
    const neighbour = (async () => {
      while (!done) {
        const started = performance.now();
        expect((await call(b, "GET", "/health")).status).toBe(200);
        latencies.push(performance.now() - started);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const executions = await Promise.all([0, 1, 2, 3].map(() => run(a, [get("one"), get("two"), get("three")])));
    done = true;
    delay.disable();
    await neighbour;
    console.log(
      `event loop delay: p50=${(delay.percentile(50) / 1e6).toFixed(0)} p90=${(delay.percentile(90) / 1e6).toFixed(0)} p99=${(delay.percentile(99) / 1e6).toFixed(0)} max=${(delay.max / 1e6).toFixed(0)} ms`,
    );
    for (const execution of executions) expect(execution.status).toBe("success");
    latencies.sort((x, y) => x - y);
    const p90 = latencies[Math.floor(latencies.length * 0.9)]!;
    console.log(
      `neighbour /health: n=${latencies.length} p50=${latencies[Math.floor(latencies.length / 2)]!.toFixed(0)} p90=${p90.toFixed(0)} max=${latencies.at(-1)!.toFixed(0)} ms`,
    );
    expect(p90).toBeLessThan(300);
    // What separates the fix (13-16 ms measured, 2 loaded cores) from before it (36-37 ms): the serving thread's
    // own delay, which the neighbour's round trips (client and server on this one thread) blur.
    expect(delay.percentile(90) / 1e6).toBeLessThan(28);
  }, 180_000);
});
