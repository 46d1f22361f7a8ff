/**
 * The runner (shared/execution/runner.ts, functions/runner.ts): idempotent per execution id (the same bus event
 * delivered twice runs once, the runner queue's entry point included), a workflow deleted mid-run ends `error`
 * "workflow was deleted" after the step in flight, a block trigger reads the latest block at run time, and a
 * manual run sends a real ethTransfer from a funded registered wallet on the devnet.
 */
import { installedSandbox, setSandbox } from "../../shared/sandbox/port";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { currentBus, setBus } from "../../shared/execution/bus/install";
import { privateKeyToAccount, generatePrivateKey } from "viem/accounts";
import { parseEther } from "viem";
import { stackEnv } from "../support/runtime";
import { type SignedIn } from "../support/auth";
import { startService, type TestService } from "../support/service";
import { startUpstream, type Upstream } from "../support/upstream";
import { jsonClient, type Json, type Owner } from "../support/client";
import { devnet, gasCogs, setBalance } from "../support/chain";
import { createInProcessBus } from "../../shared/execution/bus/in-process";
import { EVENT_SOURCE } from "../../shared/execution/bus/sqs";
import { sqsEvent } from "../support/lambda-host";
import { runExecution, withRunner } from "../../shared/execution/runner";
import { sweep } from "../../shared/execution/execution-sweep";
import { setRuntime, type Runtime } from "../../shared/current-runtime";

let service: TestService;
let runtime: Runtime;
const { call, ownerWithWallet, createWorkflow } = jsonClient(() => service.url);
const newOwner = (salt = "1") => ownerWithWallet(salt);
let target: Upstream;
const hits = new Map<string, number>();
const held: (() => void)[] = [];

beforeAll(async () => {
  // A bus nobody listens to: executions stay pending until a test delivers them.
  service = await startService({}, { runner: false });
  runtime = service.runtime;
  target = await startUpstream((req, res) => {
    const path = req.url ?? "";
    hits.set(path, (hits.get(path) ?? 0) + 1);
    const answer = () => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ path }));
    };
    if (path.startsWith("/hold")) held.push(answer);
    else answer();
  });
});

afterAll(async () => {
  for (const release of held.splice(0)) release();
  await service?.close();
  await target?.close();
});

const rest = (id: string, path: string) => ({ id, name: id, type: "restApi", config: { url: `${target.url}${path}`, method: "GET" } });

/** Triggers asynchronously on the silent bus: the execution is claimed and pending, and nobody runs it yet. */
async function claimed(who: Owner, workflowId: string): Promise<string> {
  const res = await call(who, "POST", `/workflows/${workflowId}:trigger`, { triggerType: "manual" });
  expect(res.status).toBe(202);
  return res.body.executionId;
}

const read = async (who: SignedIn, workflowId: string, id: string) =>
  (await call(who, "GET", `/executions/${id}?workflowId=${workflowId}`)).body;

describe("idempotent per execution id", () => {
  it("the same event delivered twice (and a direct call racing it) runs the workflow once", async () => {
    const alice = await newOwner();
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [rest("once", "/count-once")],
    });
    const id = await claimed(alice, wf.id);
    expect((await read(alice, wf.id, id)).status).toBe("pending");
    expect(hits.get("/count-once")).toBeUndefined();

    const bus = withRunner(createInProcessBus());
    const event = { type: "execution.requested" as const, workflowId: wf.id, executionId: id };
    await Promise.all([bus.publish(event), bus.publish(event), runExecution(wf.id, id)]);
    await bus.idle();
    await bus.publish(event); // a late re-delivery of a finished execution
    await bus.idle();

    expect(hits.get("/count-once")).toBe(1);
    const execution = await read(alice, wf.id, id);
    expect(execution.status).toBe("success");
    expect(execution.steps.map((s: Json) => s.id)).toEqual(["t", "once"]);
  });

  it("the runner queue's entry point runs the execution a message names, once", async () => {
    const alice = await newOwner();
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [rest("eb", "/count-eb")],
    });
    const id = await claimed(alice, wf.id);
    const env = stackEnv();
    Object.assign(process.env, {
      ...env,
      LOG_LEVEL: "error",
      SST_RESOURCE_Table: JSON.stringify({ name: runtime.config.tableName }),
      // The entry point names the sandbox function (this workflow runs no script, so nothing invokes it).
      SANDBOX_FUNCTION: "sandbox",
    });
    // The entry point installs its own runtime, bus and sandbox (wireAws, shared/service/wire-aws.ts) on the same
    // table; this file's come back after.
    const bus = currentBus();
    const sandbox = installedSandbox();
    const { handler } = await import("../../functions/runner");
    onTestFinished(() => {
      setRuntime(runtime);
      if (bus) setBus(bus);
      if (sandbox) setSandbox(sandbox);
    });
    // The runner queue delivers the event in its envelope (bus/sqs.ts); the same message twice, then one not ours.
    const event = {
      version: "0",
      id: "e1",
      "detail-type": "execution.requested",
      source: EVENT_SOURCE,
      account: "123456789012",
      time: new Date().toISOString(),
      region: "us-east-1",
      resources: [],
      detail: { workflowId: wf.id, executionId: id },
    };
    const context = { awsRequestId: "runner-test" } as Parameters<typeof handler>[1];
    const message = { body: JSON.stringify(event), messageId: "m1" };
    expect(await handler(sqsEvent([message]), context)).toEqual({ batchItemFailures: [] });
    expect(await handler(sqsEvent([{ ...message, receiveCount: 2 }]), context)).toEqual({ batchItemFailures: [] });
    const foreign = { body: JSON.stringify({ ...event, source: "someone.else" }), messageId: "m2" };
    expect(await handler(sqsEvent([foreign, { body: "not json", messageId: "m3" }]), context)).toEqual({ batchItemFailures: [] });
    expect(hits.get("/count-eb")).toBe(1);
    expect((await read(alice, wf.id, id)).status).toBe("success");
  });
});

describe("a workflow deleted mid-run", () => {
  it('finishes the step in flight, starts nothing further and ends error "workflow was deleted"', async () => {
    const alice = await newOwner();
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [rest("first", "/hold-1"), rest("second", "/count-second")],
    });
    const id = await claimed(alice, wf.id);
    const running = runExecution(wf.id, id);
    for (let i = 0; i < 100 && held.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(held).toHaveLength(1);

    expect((await call(alice, "DELETE", `/workflows/${wf.id}`)).status).toBe(204);
    held.shift()!();
    await running;

    const execution = await read(alice, wf.id, id);
    expect(execution).toMatchObject({ status: "error", error: "workflow was deleted", endAt: expect.any(Number) });
    expect(execution.steps.map((s: Json) => [s.id, s.success])).toEqual([
      ["t", true],
      ["first", true],
    ]);
    expect(hits.get("/count-second")).toBeUndefined();
  });

  it("an execution whose workflow is already gone ends error without running", async () => {
    const alice = await newOwner();
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [rest("gone", "/count-gone")],
    });
    const id = await claimed(alice, wf.id);
    expect((await call(alice, "DELETE", `/workflows/${wf.id}`)).status).toBe(204);
    await runExecution(wf.id, id);
    expect(await read(alice, wf.id, id)).toMatchObject({ status: "error", error: "workflow was deleted" });
    expect(hits.get("/count-gone")).toBeUndefined();
  });

  it("a run the sweeper ended is not overwritten", async () => {
    const alice = await newOwner();
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [rest("late", "/count-late")],
    });
    const id = await claimed(alice, wf.id);
    await sweep(Date.now() + runtime.config.limits.executionTimeoutMs + 1_000);
    await runExecution(wf.id, id);
    expect(await read(alice, wf.id, id)).toMatchObject({ status: "error", error: "execution timed out" });
    expect(hits.get("/count-late")).toBeUndefined();
  });
});

describe("trigger outputs at run time", () => {
  it("a block trigger without triggerOutput reads the latest block of its chain; with one, uses it verbatim", async () => {
    const alice = await newOwner();
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "tick", type: "block", config: { interval: 100 } },
      nodes: [{ id: "n", name: "n", type: "customCode", config: { source: "return tick.data.blockNumber" } }],
    });
    const before = Number(await devnet().client.getBlockNumber());
    const res = await call(alice, "POST", `/workflows/${wf.id}:trigger`, { triggerType: "block", isBlocking: true });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe("success");
    const execution = await read(alice, wf.id, res.body.executionId);
    const data = execution.steps[0].output.data;
    expect(data).toEqual({
      blockNumber: expect.any(Number),
      blockHash: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      parentHash: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      timestamp: expect.any(Number),
      gasLimit: expect.stringMatching(/^\d+$/),
      gasUsed: expect.stringMatching(/^\d+$/),
    });
    expect(data.blockNumber).toBeGreaterThanOrEqual(before);
    expect(data.timestamp % 1000).toBe(0);
    expect(execution.steps[1].output.data).toBe(data.blockNumber);

    const given = await call(alice, "POST", `/workflows/${wf.id}:trigger`, {
      triggerType: "block",
      isBlocking: true,
      triggerOutput: { blockNumber: 123 },
    });
    const second = await read(alice, wf.id, given.body.executionId);
    expect(second.steps[0].output).toEqual({ data: { blockNumber: 123 } });
    expect(second.steps[1].output).toEqual({ data: 123 });
  });
});

describe("on chain", () => {
  it("a manual run sends an ethTransfer from the funded registered wallet: the exact amount moves, hash, gas and cogs recorded", async () => {
    const alice = await newOwner("7");
    await setBalance(alice.wallet, parseEther("1"));
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [{ id: "pay", name: "pay", type: "ethTransfer", config: { destination: recipient, amount: "123456789" } }],
    });
    const res = await call(alice, "POST", `/workflows/${wf.id}:trigger`, { triggerType: "manual", isBlocking: true });
    expect(res.status).toBe(200);
    expect(res.body.status, JSON.stringify(res.body)).toBe("success");
    expect(await devnet().client.getBalance({ address: recipient })).toBe(123456789n);

    const execution = await read(alice, wf.id, res.body.executionId);
    const step = execution.steps[1];
    expect(step.output.data).toMatchObject({
      to: recipient,
      value: "123456789",
      isSimulated: false,
      userOpHash: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      transactionHash: expect.stringMatching(/^0x[0-9a-f]{64}$/),
    });
    const receipt = await devnet().client.getTransactionReceipt({ hash: step.output.data.transactionHash });
    expect(receipt.status).toBe("success");
    expect(BigInt(step.gasUsed)).toBeGreaterThan(0n);
    expect(execution.cogs).toEqual([gasCogs("pay", step)]);
    expect(execution.valueFee).toMatchObject({ tier: "tier1" });
  });
});
