/**
 * Crashes around the end of a wait (API.md §17.1, issue 26 item 4): a second service process on this file's
 * table takes a signal, resumes the run and is killed with SIGKILL before the run's next step is recorded. The
 * sweeper's passes, as the local host and the AWS sweeper run them, must find the run and finish its downstream
 * work once, whatever state the crash left: `pending` with the resume taken, or `waiting` with the hand-over lost.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, type TestService } from "../support/service";
import { startServiceChild, type ServiceChild } from "../support/service-child";
import { startUpstream, type Upstream } from "../support/upstream";
import { executionPath, jsonClient, type Json, type Owner } from "../support/client";
import { endDueWaits, endWait } from "../../shared/execution/waits";
import { resumeLostRuns, DRIVER_STALE_MS, UNSTARTED_STALE_MS } from "../../shared/execution/recovery";
import { claimExecution } from "../../shared/execution/claim";
import { sweep } from "../../shared/execution/execution-sweep";

let service: TestService;
let upstream: Upstream;
let held = true;
/** Answers of `/quick` requests, given when the test says. */
const quick: (() => void)[] = [];
const children: ServiceChild[] = [];
const { call, ownerWithWallet, createWorkflow } = jsonClient(() => service.url);
let offset = 0;

beforeAll(async () => {
  service = await startService();
  service.runtime.now = () => Date.now() + offset;
  // While `held`, a request is never answered: the process that sent it is killed meanwhile.
  upstream = await startUpstream((req, res) => {
    const answer = () => res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    if (req.url?.startsWith("/quick")) return void quick.push(answer);
    if (!held) answer();
  });
});

afterAll(async () => {
  for (const child of children) await child.kill();
  await upstream?.close();
  await service?.close();
});

/** The sweeper's passes over executions, as local/start.ts and functions/sweeper.ts run them, at `now`. */
async function sweepAt(now: number) {
  const { timedOut } = await sweep(now);
  await endDueWaits(now);
  await resumeLostRuns(now);
  await service.bus.idle();
  return timedOut;
}

async function read(who: Owner, wf: string, exec: string): Promise<Json> {
  const res = await call(who, "GET", executionPath(wf, exec));
  expect(res.status).toBe(200);
  return res.body;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A workflow: an approval, then a call to the upstream, then code reading both. */
async function approvalThenCall(who: Owner): Promise<Json> {
  return createWorkflow(who, {
    trigger: { id: "t", name: "start", type: "manual", config: {} },
    nodes: [
      { id: "gate", name: "gate", type: "await", config: { channel: "api" } },
      { id: "call", name: "call", type: "restApi", config: { url: `${upstream.url}/after`, method: "GET" } },
      { id: "after", name: "after", type: "customCode", config: { source: "return gate.data.payload.n" } },
    ],
    edges: [
      { id: "e1", source: "t", target: "gate" },
      { id: "e2", source: "gate", target: "call" },
      { id: "e3", source: "call", target: "after" },
    ],
  });
}

describe("a crash after a wait ended", () => {
  it("a run resumed by a process that then died goes on from its sealed state once its driver mark is stale, its downstream nodes once, and is not timed out", async () => {
    held = true;
    const alice = await ownerWithWallet();
    const wf = await approvalThenCall(alice);
    const started = await call(alice, "POST", `/workflows/${wf.id}:trigger`, { triggerType: "manual", isBlocking: true });
    expect(started.body.status).toBe("waiting");
    const exec = started.body.executionId as string;

    // Another process takes the signal, resumes the run and is killed while its first downstream node runs.
    const child = await startServiceChild(service.runtime.config.tableName, { ALLOW_PRIVATE_NETWORK: "true" });
    children.push(child);
    const sent = upstream.requests.length;
    const other = jsonClient(() => child.url);
    void other
      .call(alice, "POST", `/executions/${exec}:signal?workflowId=${wf.id}`, { decision: "approve", payload: { n: 7 } })
      .catch(() => undefined);
    await until("the resumed run's call", async () => (upstream.requests.length > sent ? true : undefined));
    await child.kill();

    // What the crash left: pending, the approval recorded, nothing downstream, no driver.
    const left = await read(alice, wf.id, exec);
    expect(left.status).toBe("pending");
    expect(left.steps.map((s: Json) => s.id)).toEqual(["t", "gate"]);
    held = false;

    // A driver is presumed alive until its mark is stale: a sweep now takes nothing over.
    expect(await sweepAt(Date.now())).toEqual([]);
    expect((await read(alice, wf.id, exec)).status).toBe("pending");

    // Past the stale mark (pending time still far below execution_timeout_ms): the run goes on.
    offset = DRIVER_STALE_MS + 1_000;
    expect(await sweepAt(Date.now() + offset)).toEqual([]);
    const done = await until("the recovered run's end", async () => {
      const e = await read(alice, wf.id, exec);
      return e.status === "pending" ? undefined : e;
    });
    expect(done.status, JSON.stringify(done)).toBe("success");
    expect(done.steps.map((s: Json) => s.id)).toEqual(["t", "gate", "call", "after"]);
    expect(done.steps.find((s: Json) => s.id === "after").output.data).toBe(7);
    // Once recovered, later sweeps find nothing more to do.
    await sweepAt(Date.now() + offset + DRIVER_STALE_MS);
    expect((await read(alice, wf.id, exec)).steps).toHaveLength(4);
    offset = 0;
  });

  it("a wait that ended while the run was still pending is checkpointed before the run goes on: a crash after it resumes from there", async () => {
    held = true;
    const alice = await ownerWithWallet();
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [
        { id: "gate", name: "gate", type: "await", config: { channel: "api" } },
        { id: "side", name: "side", type: "restApi", config: { url: `${upstream.url}/quick`, method: "GET" } },
        { id: "call", name: "call", type: "restApi", config: { url: `${upstream.url}/after`, method: "GET" } },
      ],
      edges: [
        { id: "e1", source: "t", target: "gate" },
        { id: "e2", source: "t", target: "side" },
        { id: "e3", source: "gate", target: "call" },
      ],
    });
    // The first pass runs in another process: the wait begins while an independent path is still running.
    const child = await startServiceChild(service.runtime.config.tableName, { ALLOW_PRIVATE_NETWORK: "true" });
    children.push(child);
    const other = jsonClient(() => child.url);
    const sent = upstream.requests.length;
    void other.call(alice, "POST", `/workflows/${wf.id}:trigger`, { triggerType: "manual", isBlocking: true }).catch(() => undefined);
    const exec = await until("the side path's call", async () => {
      if (quick.length === 0) return undefined;
      const list = await call(alice, "GET", `/workflows/${wf.id}/executions`);
      return list.body.data?.[0]?.id as string | undefined;
    });
    await until("the wait", async () => ((await read(alice, wf.id, exec)).waitingFor?.length ? true : undefined));
    // Approved while the run is pending; then the side path ends, and the run goes on to the held call and dies.
    void call(alice, "POST", `/executions/${exec}:signal?workflowId=${wf.id}`, { decision: "approve" }).catch(() => undefined);
    await until("the approval", async () => ((await read(alice, wf.id, exec)).steps.some((s: Json) => s.id === "gate") ? true : undefined));
    quick.splice(0).forEach((answer) => answer());
    await until("the call after the wait", async () =>
      upstream.requests.some((r, i) => i >= sent && r.path === "/after") ? true : undefined,
    );
    await child.kill();
    expect((await read(alice, wf.id, exec)).status).toBe("pending");
    held = false;

    offset = DRIVER_STALE_MS + 1_000;
    expect(await sweepAt(Date.now() + offset)).toEqual([]);
    const done = await until("the recovered run's end", async () => {
      const e = await read(alice, wf.id, exec);
      return e.status === "pending" ? undefined : e;
    });
    expect(done.status, JSON.stringify(done)).toBe("success");
    expect(done.steps.map((s: Json) => s.id).sort()).toEqual(["call", "gate", "side", "t"]);
    offset = 0;
  });

  it("a wait ended while waiting whose hand-over was lost (the process died before publishing it) is resumed by the next sweep", async () => {
    held = false;
    const alice = await ownerWithWallet();
    const wf = await approvalThenCall(alice);
    const started = await call(alice, "POST", `/workflows/${wf.id}:trigger`, { triggerType: "manual", isBlocking: true });
    expect(started.body.status).toBe("waiting");
    const exec = started.body.executionId as string;
    // The end is recorded as the signal records it, and nothing is handed to a runner.
    const ended = await endWait({ workflowId: wf.id, id: exec }, "gate", {
      how: "signal",
      decision: "approve",
      payload: { n: 3 },
      signer: alice.owner,
    });
    expect(ended).toBe("waiting");
    expect((await read(alice, wf.id, exec)).status).toBe("waiting");

    expect(await sweepAt(Date.now())).toEqual([]);
    const done = await until("the resumed run's end", async () => {
      const e = await read(alice, wf.id, exec);
      return e.status === "pending" || e.status === "waiting" ? undefined : e;
    });
    expect(done.status, JSON.stringify(done)).toBe("success");
    expect(done.steps.map((s: Json) => s.id)).toEqual(["t", "gate", "call", "after"]);
    expect(done.steps.find((s: Json) => s.id === "after").output.data).toBe(3);
  });
});

describe("a crash between a claim and its hand-over", () => {
  it("a run claimed and never started (its process died before publishing it) is requested again by the sweep once stale, and runs once", async () => {
    held = false;
    const alice = await ownerWithWallet();
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [{ id: "call", name: "call", type: "restApi", config: { url: `${upstream.url}/unstarted`, method: "GET" } }],
    });
    const calls = () => upstream.requests.filter((r) => r.path === "/unstarted").length;
    // The claim as `:trigger` writes it, without the hand-over that the dead process never published.
    const now = Date.now();
    const exec = await claimExecution(wf.id, { now, owner: alice.owner, runInput: { triggerOutput: { data: {} } } });
    expect((await read(alice, wf.id, exec)).status).toBe("pending");

    // A run that may only be slow in its owner's queue is left alone; a stale one is requested again and runs once.
    await sweepAt(Date.now() + UNSTARTED_STALE_MS - 5_000);
    expect((await read(alice, wf.id, exec)).status).toBe("pending");
    expect(calls()).toBe(0);
    await sweepAt(Date.now() + UNSTARTED_STALE_MS + 1_000);
    const done = await until("the requested run's end", async () => {
      const e = await read(alice, wf.id, exec);
      return e.status === "pending" ? undefined : e;
    });
    expect(done.status, JSON.stringify(done)).toBe("success");
    expect(done.steps.map((s: Json) => s.id)).toEqual(["t", "call"]);
    // Requested again by a later sweep (another process's, or a duplicate delivery): nothing runs twice.
    await sweepAt(Date.now() + UNSTARTED_STALE_MS + 2_000);
    expect(calls()).toBe(1);
  });
});
