/**
 * Idempotency-Keys after a crash (docs/decisions.md "Idempotency after a crash"; API.md §8.8.7, §11.5): a service process is
 * killed (SIGKILL) in the middle of a `:withdraw` or a `:trigger` sent with an Idempotency-Key, at a chosen step (a
 * bundler or DynamoDB request held by a proxy), and the client retries with the same key. Within the key's lease
 * the retry answers 409 with Retry-After; once it has passed it either replays the original outcome or performs
 * the operation, once: one withdrawal recorded and one operation on chain, one execution and one index. Also
 * `:withdraw`'s own bounds (item 6): a silent bundler is answered `pending` within withdraw_confirm_wait_ms of the
 * record, and a silent preflight 503 with nothing recorded and the key free again.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseEther, type Address } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { stackEnv, useTestRuntime } from "../support/runtime";
import { signIn, type SignedIn } from "../support/auth";
import { devnet, includedOperations, setBalance } from "../support/chain";
import { startRpcProxy, type RpcProxy } from "../support/rpc-proxy";
import { startDynamoProxy, type DynamoProxy } from "../support/dynamo-proxy";
import { startServiceChild, type ServiceChild } from "../support/service-child";
import { manualWorkflow as manualDefinition } from "../support/workflows";
import { createServiceApp } from "../../shared/service/app";
import { setBus } from "../../shared/execution/bus/install";
import { createInProcessBus, type InProcessBus } from "../../shared/execution/bus/in-process";
import { withRunner } from "../../shared/execution/runner";
import { listWithdrawals } from "../../shared/store/entities/withdrawal";
import type { Runtime } from "../../shared/current-runtime";

/** The key's lease in these tests: a retry after a crash is answered this long after the crashed claim at most. */
const LEASE_MS = 12_000;
const LIMITS = {
  MAX_WALLETS_PER_OWNER: "100",
  RATE_LIMIT_BURST: "100000",
  RATE_LIMIT_RPS: "10000",
  IDEMPOTENCY_LEASE_MS: String(LEASE_MS),
};

const app = createServiceApp();
let runtime: Runtime;
let alice: SignedIn;
let rpc: RpcProxy;
let dynamo: DynamoProxy;
let bus: InProcessBus;
const children: ServiceChild[] = [];

/** The devnet's chains with the bundler behind the proxy. */
function chainsThroughProxy(): string {
  const chains = JSON.parse(stackEnv().CHAINS!) as { chainId: number; bundlerUrl?: string }[];
  return JSON.stringify(chains.map((c) => (c.chainId === 31337 ? { ...c, bundlerUrl: rpc.url } : c)));
}

beforeAll(async () => {
  rpc = await startRpcProxy(devnet().bundlerUrl);
  dynamo = await startDynamoProxy(stackEnv().DYNAMODB_ENDPOINT!);
  runtime = await useTestRuntime({ ...LIMITS, CHAINS: chainsThroughProxy(), WITHDRAW_CONFIRM_WAIT_MS: "2000" });
  bus = setBus(withRunner(createInProcessBus()));
  alice = await signIn(app);
});

afterAll(async () => {
  for (const child of children) await child.kill();
  await bus?.idle();
  await rpc.close();
  await dynamo.close();
});

/** Another service process on this file's table, its DynamoDB requests through the proxy, killed by the test. */
async function otherProcess(): Promise<ServiceChild> {
  const child = await startServiceChild(runtime.config.tableName, {
    ...LIMITS,
    CHAINS: chainsThroughProxy(),
    DYNAMODB_ENDPOINT: dynamo.url,
  });
  children.push(child);
  return child;
}

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}, base?: string, env?: object) {
  const init = {
    method,
    headers: { ...alice.headers, ...headers, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  };
  const res = base ? await fetch(base + path, init) : await app.request(path, init, env);
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

let salt = 0;
async function newWallet(): Promise<Address> {
  const res = await call("POST", "/wallets", { salt: String(++salt) });
  expect(res.status).toBe(201);
  await setBalance(res.body.address, parseEther("1"));
  return res.body.address;
}

const someone = () => privateKeyToAccount(generatePrivateKey()).address;
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A wallet whose account is deployed (by a first withdrawal), so no operation waits for a deployment turn. */
async function deployedWallet(): Promise<Address> {
  const wallet = await newWallet();
  const first = await call("POST", `/wallets/${wallet}:withdraw`, { recipientAddress: someone(), amount: "1", token: "ETH" });
  expect(first.status, JSON.stringify(first.body)).toBe(200);
  await settled(wallet, first.body.id);
  return wallet;
}

/** Waits until `seen()` holds (a proxy received the request the test stops the process at). */
async function until(seen: () => boolean) {
  for (let i = 0; i < 1200 && !seen(); i++) await pause(50);
  expect(seen()).toBe(true);
}

/** GET of the withdrawal until it is no longer pending (a read follows it up at most every 5 s). */
async function settled(wallet: Address, id: string) {
  for (let i = 0; ; i++) {
    const read = await call("GET", `/wallets/${wallet}/withdrawals/${id}`);
    if (read.body.status !== "pending" || i >= 120) return read.body;
    await pause(500);
  }
}

const sendsSince = (from: number) => rpc.calls.slice(from).filter((c) => c.method === "eth_sendUserOperation");

describe(":withdraw killed with an Idempotency-Key in flight", () => {
  it(
    "after recording its operation: the retry answers 409 within the lease, then replays that withdrawal, sent once",
    { timeout: 120_000 },
    async () => {
      const wallet = await newWallet();
      const to = someone();
      const body = { recipientAddress: to, amount: "4242", token: "ETH" };
      const key = { "Idempotency-Key": "crash-after-record" };
      const other = await otherProcess();
      const from = rpc.calls.length;
      rpc.rules.faults = { eth_sendUserOperation: { kind: "hold" } };
      void call("POST", `/wallets/${wallet}:withdraw`, body, key, other.url).catch(() => undefined);
      await until(() => sendsSince(from).length > 0);
      await other.kill();
      rpc.rules.faults = {};
      const recorded = (await listWithdrawals(alice.owner, 31337, wallet, ["pending"], { limit: 10 })).items;
      expect(recorded).toHaveLength(1);

      const early = await call("POST", `/wallets/${wallet}:withdraw`, body, key);
      expect(early.status).toBe(409);
      expect(early.body.code).toBe("IDEMPOTENCY_IN_PROGRESS");

      await pause(LEASE_MS);
      const retry = await call("POST", `/wallets/${wallet}:withdraw`, body, key);
      expect(retry.status, JSON.stringify(retry.body)).toBe(200);
      expect(retry.headers.get("idempotency-replayed")).toBe("true");
      expect(retry.body.id).toBe(recorded[0]!.id);
      expect(await settled(wallet, retry.body.id)).toMatchObject({ status: "confirmed", userOpHash: recorded[0]!.userOpHash });
      const again = await call("POST", `/wallets/${wallet}:withdraw`, body, key);
      expect(again.body).toMatchObject({ id: retry.body.id, status: "confirmed" });
      expect(await includedOperations(wallet)).toHaveLength(1);
      expect(await devnet().client.getBalance({ address: to })).toBe(4242n);
      // the follow-up sent the very same operation again, never another
      expect(new Set(sendsSince(from).map((c) => JSON.stringify(c.params[0])))).toHaveProperty("size", 1);
      // the 409 said when to come back: when the lease ends
      expect(Number(early.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(Number(early.headers.get("retry-after"))).toBeLessThanOrEqual(LEASE_MS / 1000);
    },
  );

  it("before recording anything: the retry after the lease performs it under the same id, once", { timeout: 120_000 }, async () => {
    const wallet = await deployedWallet(); // (an undeployed one's crashed request would hold its deployment turn 60 s)
    const to = someone();
    const body = { recipientAddress: to, amount: "777", token: "ETH" };
    const key = { "Idempotency-Key": "crash-before-record" };
    const other = await otherProcess();
    const from = rpc.calls.length;
    rpc.rules.faults = { eth_estimateUserOperationGas: { kind: "hold" } };
    void call("POST", `/wallets/${wallet}:withdraw`, body, key, other.url).catch(() => undefined);
    await until(() => rpc.calls.slice(from).some((c) => c.method === "eth_estimateUserOperationGas"));
    await other.kill();
    rpc.rules.faults = {};

    await pause(LEASE_MS);
    const retry = await call("POST", `/wallets/${wallet}:withdraw`, body, key);
    expect(retry.status, JSON.stringify(retry.body)).toBe(200);
    expect(retry.headers.get("idempotency-replayed")).toBeNull();
    expect(await settled(wallet, retry.body.id)).toMatchObject({ status: "confirmed" });
    const again = await call("POST", `/wallets/${wallet}:withdraw`, body, key);
    expect(again.headers.get("idempotency-replayed")).toBe("true");
    expect(again.body.id).toBe(retry.body.id);
    expect((await listWithdrawals(alice.owner, 31337, wallet, [], { limit: 10 })).items).toHaveLength(2); // the deploying one and this
    expect(await includedOperations(wallet)).toHaveLength(2);
    expect(await devnet().client.getBalance({ address: to })).toBe(777n);
  });
});

describe(":withdraw against a silent bundler (item 6)", () => {
  it(
    "answers pending within withdraw_confirm_wait_ms of the record while the send hangs; the follow-up sends that operation",
    { timeout: 120_000 },
    async () => {
      const wallet = await newWallet();
      const to = someone();
      rpc.rules.faults = { eth_sendUserOperation: { kind: "hold", count: 1 } };
      const started = Date.now();
      const res = await call(
        "POST",
        `/wallets/${wallet}:withdraw`,
        { recipientAddress: to, amount: "31", token: "ETH" },
        { "Idempotency-Key": "silent" },
      );
      const took = Date.now() - started;
      rpc.rules.faults = {};
      expect(res.status).toBe(200);
      expect(res.body.status).toBe("pending");
      expect(took).toBeLessThan(2_000 + 4_000); // the wait (2 s) after the record, plus preflight and estimation
      expect(await settled(wallet, res.body.id)).toMatchObject({ status: "confirmed", userOpHash: res.body.userOpHash });
      expect(await devnet().client.getBalance({ address: to })).toBe(31n);
    },
  );

  it(
    "answers 503 UPSTREAM_UNAVAILABLE at its deadline when the estimation hangs: nothing recorded, the key free again",
    { timeout: 120_000 },
    async () => {
      const wallet = await deployedWallet();
      const to = someone();
      const body = { recipientAddress: to, amount: "55", token: "ETH" };
      const key = { "Idempotency-Key": "silent-estimation" };
      rpc.rules.faults = { eth_estimateUserOperationGas: { kind: "hold", count: 1 } };
      const started = Date.now();
      const res = await call("POST", `/wallets/${wallet}:withdraw`, body, key);
      const took = Date.now() - started;
      rpc.rules.faults = {};
      expect(res.status).toBe(503);
      expect(res.body.code).toBe("UPSTREAM_UNAVAILABLE");
      expect(took).toBeLessThan(LEASE_MS / 2 + 2_000); // recorded by half the lease, or not at all
      expect((await listWithdrawals(alice.owner, 31337, wallet, [], { limit: 10 })).items).toHaveLength(1); // the deploying one only
      const retry = await call("POST", `/wallets/${wallet}:withdraw`, body, key);
      expect(retry.status).toBe(200);
      expect(retry.headers.get("idempotency-replayed")).toBeNull();
      expect(await settled(wallet, retry.body.id)).toMatchObject({ status: "confirmed" });
      expect(await devnet().client.getBalance({ address: to })).toBe(55n);
    },
  );
});

describe(":withdraw on Lambda", () => {
  it(
    "keeps to the function's remaining time: a hanging estimation is answered 503 before the function would be ended",
    { timeout: 120_000 },
    async () => {
      const wallet = await deployedWallet();
      const body = { recipientAddress: someone(), amount: "9", token: "ETH" };
      // what hono/aws-lambda hands the app: 5 s left, so the record is due 3 s from now (before half the lease, 6 s)
      const lambda = { lambdaContext: { getRemainingTimeInMillis: () => 5_000 } };
      rpc.rules.faults = { eth_estimateUserOperationGas: { kind: "hold", count: 1 } };
      const started = Date.now();
      const res = await call("POST", `/wallets/${wallet}:withdraw`, body, { "Idempotency-Key": "lambda" }, undefined, lambda);
      const took = Date.now() - started;
      rpc.rules.faults = {};
      expect(res.status).toBe(503);
      expect(took).toBeLessThan(3_800);
      expect((await listWithdrawals(alice.owner, 31337, wallet, [], { limit: 10 })).items).toHaveLength(1); // the deploying one only
    },
  );
});

describe(":trigger killed with an Idempotency-Key in flight", () => {
  async function manualWorkflow(maxExecution = 5) {
    const wallet = (await call("POST", "/wallets", { salt: String(++salt) })).body.address;
    const res = await call("POST", "/workflows", { smartWalletAddress: wallet, ...manualDefinition({ maxExecution }) });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.id as string;
  }

  /** Triggers `workflowId` in another process with `key` and kills it once it sends the DynamoDB request `at` matches. */
  async function crashTrigger(workflowId: string, key: string, at: (r: { operation: string; body: Record<string, unknown> }) => boolean) {
    const other = await otherProcess();
    const before = dynamo.held;
    dynamo.hold = at;
    void call("POST", `/workflows/${workflowId}:trigger`, { triggerType: "manual" }, { "Idempotency-Key": key }, other.url).catch(
      () => undefined,
    );
    await until(() => dynamo.held > before);
    await other.kill();
    dynamo.hold = undefined;
  }

  const pkOf = (body: Record<string, unknown>, field: "Item" | "Key") => (body[field] as { pk?: { S?: string } } | undefined)?.pk?.S ?? "";

  async function executionsOf(workflowId: string) {
    await bus.idle();
    return (await call("GET", `/workflows/${workflowId}/executions`)).body.data as { id: string; index: number; status: string }[];
  }

  it(
    "after its count update: the retry replays the execution that index belongs to, written then; no second index",
    { timeout: 120_000 },
    async () => {
      const workflowId = await manualWorkflow();
      await crashTrigger(workflowId, "after-count", (r) => r.operation === "PutItem" && pkOf(r.body, "Item") === `WF#${workflowId}#EXEC`);
      expect((await call("GET", `/workflows/${workflowId}`)).body.executionCount).toBe(1);
      expect(await executionsOf(workflowId)).toHaveLength(0);

      const early = await call("POST", `/workflows/${workflowId}:trigger`, { triggerType: "manual" }, { "Idempotency-Key": "after-count" });
      expect(early.status).toBe(409);
      await pause(LEASE_MS);
      const retry = await call("POST", `/workflows/${workflowId}:trigger`, { triggerType: "manual" }, { "Idempotency-Key": "after-count" });
      expect(retry.status, JSON.stringify(retry.body)).toBe(202);
      expect(retry.headers.get("idempotency-replayed")).toBe("true");
      const executions = await executionsOf(workflowId);
      expect(executions.map((e) => [e.id, e.index])).toEqual([[retry.body.executionId, 0]]);
      expect((await call("GET", `/workflows/${workflowId}`)).body.executionCount).toBe(1);
      const again = await call("POST", `/workflows/${workflowId}:trigger`, { triggerType: "manual" }, { "Idempotency-Key": "after-count" });
      expect(again.body.executionId).toBe(retry.body.executionId);
      expect(early.headers.get("retry-after")).toMatch(/^\d+$/);
    },
  );

  it("before its count update: the retry after the lease claims the execution, once", { timeout: 120_000 }, async () => {
    const workflowId = await manualWorkflow();
    await crashTrigger(workflowId, "before-count", (r) => r.operation === "UpdateItem" && pkOf(r.body, "Key") === `WF#${workflowId}`);
    expect((await call("GET", `/workflows/${workflowId}`)).body.executionCount).toBe(0);

    await pause(LEASE_MS);
    const retry = await call("POST", `/workflows/${workflowId}:trigger`, { triggerType: "manual" }, { "Idempotency-Key": "before-count" });
    expect(retry.status, JSON.stringify(retry.body)).toBe(202);
    expect(retry.headers.get("idempotency-replayed")).toBeNull();
    const again = await call("POST", `/workflows/${workflowId}:trigger`, { triggerType: "manual" }, { "Idempotency-Key": "before-count" });
    expect(again.headers.get("idempotency-replayed")).toBe("true");
    expect(again.body.executionId).toBe(retry.body.executionId);
    const executions = await executionsOf(workflowId);
    expect(executions.map((e) => [e.id, e.index, e.status])).toEqual([[retry.body.executionId, 0, "success"]]);
    expect((await call("GET", `/workflows/${workflowId}`)).body.executionCount).toBe(1);
  });
});
