/**
 * The unmodified public client `@avaprotocol/sdk-js` driving workflows and executions against a real HTTP server
 * of the whole service: sign-in and a registered wallet, `workflows.create` (manual trigger, a customCode node, a
 * restApi node calling a local HTTP server), `workflows.trigger` blocking, `executions.retrieve` with every step,
 * and `executions.stream` following the run live (pending, then the terminal status) and a finished run (one frame).
 *
 * Request bodies are typed with the SDK's own request types, so this also checks that what the SDK declares is
 * accepted by the service. Where the SDK's types and API.md differ, API.md is the contract. The paths, methods and
 * query parameters the SDK sends for everything used here agree with API.md; its types differ in these places:
 * - `Workflow.completionReason` is typed "TASK_COMPLETION_REASON_*" (API.md §8.1: "MAX_EXECUTIONS_REACHED", ...);
 * - `Node.name` and `ExecutionStep.name` are optional in the SDK, required in API.md §8.4 / §10.2;
 * - `ManualTriggerConfig.lang`, `CustomCodeNodeConfig.lang` and `ContractWriteNodeConfig.chainId` are required in
 *   the SDK, optional in API.md (so the bodies below send `lang`);
 * - `ExecutionStatus` adds "waiting", which this service never produces; `NodeCOGS` lacks API.md's `chainId`;
 * - `StreamExecutionParams.interval` documents a default of 1s; API.md §10.9's default is 250 ms (the SDK sends
 *   nothing when it is omitted, so the server's default applies).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, Nodes } from "@avaprotocol/sdk-js";
import type { v4 } from "@avaprotocol/types";
import { generatePrivateKey } from "viem/accounts";
import { devnet } from "../support/chain";
import { startService, type TestService } from "../support/service";
import { startUpstream, type Upstream } from "../support/upstream";

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let service: TestService;
/** The restApi target; its requests are what it has received. */
let target: Upstream;
let client: Client;
let wallet: `0x${string}`;
/** Answers the target is holding back (paths starting with /hold), released by the test. */
const held: (() => void)[] = [];

beforeAll(async () => {
  service = await startService();
  target = await startUpstream((req, res) => {
    const path = req.url ?? "";
    const answer = () => {
      res.writeHead(200, { "Content-Type": "application/json", "X-Target": "local" });
      res.end(JSON.stringify({ path, greeting: "hello from the target" }));
    };
    if (path.startsWith("/hold")) held.push(answer);
    else answer();
  });

  client = new Client({ baseUrl: service.url });
  await client.auth.exchangeWithKey(generatePrivateKey(), { uri: "https://app.example.com", chainId: devnet().chainId, version: "0.1.0" });
  wallet = (await client.wallets.create({ salt: "1" })).address as `0x${string}`;
});

afterAll(async () => {
  for (const release of held.splice(0)) release();
  await service?.close();
  await target?.close();
});

/** A manual trigger, a customCode node computing from the trigger data, and a restApi node using its result. */
function definition(path: string): v4.CreateWorkflowRequest {
  return {
    name: "sdk round trip",
    smartWalletAddress: wallet,
    trigger: { id: "start", name: "start", type: "manual", config: { lang: "json", data: { a: 20, b: 22 } } },
    nodes: [
      {
        id: "compute",
        name: "compute",
        type: "customCode",
        config: { lang: "javascript", source: "console.log('adding'); return { sum: start.data.a + start.data.b };" },
      },
      { id: "fetch", name: "fetch", type: "restApi", config: { url: `${target.url}${path}?sum={{ compute.data.sum }}`, method: "GET" } },
    ],
  };
}

async function waitFor<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("@avaprotocol/sdk-js drives workflows and executions", () => {
  it("creates a workflow, triggers it blocking, reads the execution's steps and streams its status", async () => {
    const workflow = await client.workflows.create(definition("/plain"));
    expect(workflow).toMatchObject({
      name: "sdk round trip",
      smartWalletAddress: wallet,
      status: "enabled",
      executionCount: 0,
      maxExecution: 51_840,
    });
    // Edges were omitted: the service generated the chain trigger → compute → fetch.
    expect(workflow.edges?.map((e) => [e.source, e.target])).toEqual([
      ["start", "compute"],
      ["compute", "fetch"],
    ]);
    expect(await client.workflows.retrieve(workflow.id)).toEqual(workflow);

    const result = await client.workflows.trigger(workflow.id, { triggerType: "manual", isBlocking: true });
    expect(result).toEqual({ executionId: expect.any(String), status: "success", startAt: expect.any(Number), endAt: expect.any(Number) });
    expect(target.requests.map((r) => r.path)).toContain("/plain?sum=42");

    const execution = await client.executions.retrieve(result.executionId, { workflowId: workflow.id });
    expect(execution).toMatchObject({
      id: result.executionId,
      workflowId: workflow.id,
      chainId: devnet().chainId,
      index: 0,
      status: "success",
    });
    expect(execution.startAt).toBe(result.startAt);
    expect(execution.endAt).toBe(result.endAt);
    const steps = (execution.steps ?? []) as unknown as Json[];
    expect(steps.map((s) => [s.id, s.type, s.name, s.success])).toEqual([
      ["start", "manual", "start", true],
      ["compute", "customCode", "compute", true],
      ["fetch", "restApi", "fetch", true],
    ]);
    const [trigger, compute, fetched] = steps as [Json, Json, Json];
    expect(trigger.output).toEqual({ data: { a: 20, b: 22 }, headers: {}, pathParams: {} });
    expect(compute.output).toEqual({ data: { sum: 42 } });
    expect(compute.log).toContain("adding");
    expect(fetched.inputs).toEqual(["compute.data.sum"]);
    expect(fetched.config).toMatchObject({ url: `${target.url}/plain?sum={{ compute.data.sum }}`, method: "GET" });
    expect(fetched.output).toEqual({
      data: {
        status: 200,
        statusText: "OK",
        url: `${target.url}/plain?sum=42`,
        headers: expect.objectContaining({ "content-type": "application/json", "x-target": "local" }),
        data: { path: "/plain?sum=42", greeting: "hello from the target" },
      },
    });
    for (const step of steps) expect(step.endAt).toBeGreaterThanOrEqual(step.startAt);
    // Off-chain only: no gas, no costs, the unspecified value-fee tier.
    expect(execution.cogs).toEqual([]);
    expect(execution.valueFee).toMatchObject({ tier: "unspecified", fee: { amount: "0", unit: "PERCENTAGE" } });
    expect(execution.executionFee).toEqual({ amount: expect.any(String), unit: "USD" });

    // A finished execution streams exactly one frame, its terminal status, then the server closes the stream.
    const frames: v4.ExecutionStatusSummary[] = [];
    for await (const frame of client.executions.stream(result.executionId, { workflowId: workflow.id })) frames.push(frame);
    expect(frames).toEqual([
      { id: result.executionId, workflowId: workflow.id, status: "success", startAt: result.startAt, endAt: result.endAt },
    ]);
    expect(await client.executions.getStatus(result.executionId, { workflowId: workflow.id })).toEqual(frames[0]);

    const list = await client.executions.listForWorkflow(workflow.id);
    expect(list.data.map((e) => e.id)).toEqual([result.executionId]);
    expect(await client.workflows.retrieve(workflow.id)).toMatchObject({ executionCount: 1, remainingExecutions: 51_839 });
  });

  it("follows a blocking run live over the stream: pending first, then success, then the stream ends", async () => {
    const workflow = await client.workflows.create(definition("/hold"));
    const blocking = client.workflows.trigger(workflow.id, { triggerType: "manual", isBlocking: true });

    // The run is parked in the restApi call; the claimed execution is readable meanwhile.
    await waitFor("the held request", () => (held.length > 0 ? true : undefined));
    const listed = await client.executions.listForWorkflow(workflow.id);
    expect(listed.data).toHaveLength(1);
    const pending = listed.data[0]!;
    expect(pending.status).toBe("pending");
    // The customCode step is recorded already; the restApi step is not (a node's step appears once it has finished).
    expect((pending.steps ?? []).map((s) => s.id)).toEqual(["start", "compute"]);

    const frames: v4.ExecutionStatusSummary[] = [];
    const stream = client.executions.stream(pending.id, { workflowId: workflow.id, interval: "250ms" });
    const first = await stream.next();
    expect(first.done).toBe(false);
    frames.push(first.value as v4.ExecutionStatusSummary);
    expect(frames[0]).toEqual({ id: pending.id, workflowId: workflow.id, status: "pending", startAt: pending.startAt });

    held.shift()!();
    for await (const frame of stream) frames.push(frame);
    const result = await blocking;
    expect(result).toMatchObject({ executionId: pending.id, status: "success" });
    expect(frames.map((f) => f.status)).toEqual(["pending", "success"]);
    expect(frames[1]).toEqual({
      id: pending.id,
      workflowId: workflow.id,
      status: "success",
      startAt: pending.startAt,
      endAt: result.endAt,
    });

    const execution = await client.executions.retrieve(pending.id, { workflowId: workflow.id });
    expect(execution.steps?.map((s) => [s.id, s.success])).toEqual([
      ["start", true],
      ["compute", true],
      ["fetch", true],
    ]);
    expect((execution.steps?.[2]?.output as Json).data.data).toEqual({ path: "/hold?sum=42", greeting: "hello from the target" });
  });

  it("a workflow whose last execution was claimed reads completed with API.md's completionReason, and refuses more runs", async () => {
    const workflow = await client.workflows.create({ ...definition("/plain"), maxExecution: 1 });
    expect((await client.workflows.trigger(workflow.id, { triggerType: "manual", isBlocking: true })).status).toBe("success");
    const done = await client.workflows.retrieve(workflow.id);
    // SDK/API.md mismatch: the SDK's `Workflow.completionReason` type lists "TASK_COMPLETION_REASON_MAX_EXECUTIONS_REACHED"
    // (and has no CONSECUTIVE_ERRORS); API.md §8.1 spells it "MAX_EXECUTIONS_REACHED", which is what the service sends.
    expect(done).toMatchObject({
      status: "completed",
      completionReason: "MAX_EXECUTIONS_REACHED",
      executionCount: 1,
      remainingExecutions: 0,
    });
    await expect(client.workflows.trigger(workflow.id, { triggerType: "manual" })).rejects.toMatchObject({
      status: 412,
      code: "WORKFLOW_NOT_RUNNABLE",
      problem: expect.objectContaining({ reason: "MAX_EXECUTIONS_REACHED" }),
    });
  });

  it("answers the SDK's errors as problem+json the SDK surfaces (APIError with status and code)", async () => {
    const workflow = await client.workflows.create(definition("/plain"));
    await expect(client.workflows.trigger(workflow.id, { triggerType: "cron" })).rejects.toMatchObject({
      status: 400,
      code: "TRIGGER_TYPE_MISMATCH",
    });
    await expect(client.executions.retrieve("01JD7R5X2T6V0B9K3M8N4P7Q1S", { workflowId: workflow.id })).rejects.toMatchObject({
      status: 404,
      code: "EXECUTION_NOT_FOUND",
    });
    const stream = client.executions.stream("01JD7R5X2T6V0B9K3M8N4P7Q1S", { workflowId: workflow.id });
    await expect(stream.next()).rejects.toMatchObject({ status: 404, code: "EXECUTION_NOT_FOUND" });
    // Nothing was claimed by the refused trigger.
    expect(await client.workflows.retrieve(workflow.id)).toMatchObject({ executionCount: 0 });
  });
});

describe("@avaprotocol/sdk-js with an await node (API.md §17.1)", () => {
  it("builds the node with Nodes.await, sees the run waiting, and resumes it with executions.signal", async () => {
    const workflow = await client.workflows.create({
      name: "sdk approval",
      smartWalletAddress: wallet,
      trigger: { id: "start", name: "start", type: "manual", config: { lang: "json", data: { a: 1 } } },
      nodes: [
        Nodes.await({ id: "gate", name: "gate", channel: "api", prompt: "go on?", timeoutSeconds: 600 }),
        {
          id: "after",
          name: "after",
          type: "customCode",
          config: { lang: "javascript", source: "return start.data.a + gate.data.payload.b" },
        },
      ],
    } as unknown as v4.CreateWorkflowRequest);
    const started = await client.workflows.trigger(workflow.id, { triggerType: "manual", isBlocking: true });
    expect(started.status).toBe("waiting");
    const status = (await client.executions.getStatus(started.executionId, { workflowId: workflow.id })) as unknown as Json;
    expect(status.waitingFor).toEqual([expect.objectContaining({ nodeId: "gate", kind: "signal", prompt: "go on?" })]);

    const resumed = (await client.executions.signal(started.executionId, {
      workflowId: workflow.id,
      decision: "approve",
      payload: { b: 2 },
    })) as unknown as Json;
    expect(resumed.status).toBe("success");
    expect(resumed.steps.find((s: Json) => s.id === "after").output.data).toBe(3);
  });
});
