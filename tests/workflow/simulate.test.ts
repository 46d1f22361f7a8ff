/**
 * `:simulate` and `:estimateFees` (API.md §8.8.8-§8.8.9) over a real HTTP server on the devnet: a simulated
 * contractWrite and an ethTransfer balance check send nothing (balances, the wallet's nonce and the token's state
 * unchanged), the answer is an Execution stored nowhere, the runner must be the caller's, the run is cut at
 * simulate_timeout_ms, and the fee estimate has the contract's shape.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { privateKeyToAccount, generatePrivateKey } from "viem/accounts";
import { parseEther } from "viem";
import { useTestRuntime } from "../support/runtime";
import { startTestServer, type TestServer } from "../support/server";
import { startUpstream, type Upstream } from "../support/upstream";
import { jsonClient, type Json } from "../support/client";
import { deployTestToken, devnet, setBalance } from "../support/chain";
import { mintFunction } from "../support/abis";
import { createServiceApp } from "../../shared/service/app";

const TIMEOUT_MS = 8_000;
/** When the target saw the slow request's connection close (the cut-off aborts it). */
let slowClosedAt: number | undefined;
let server: TestServer;
const { call, ownerWithWallet } = jsonClient(() => server.url);
const newOwner = (salt = "3") => ownerWithWallet(salt);
let target: Upstream;

beforeAll(async () => {
  await useTestRuntime({ RATE_LIMIT_BURST: "100000", RATE_LIMIT_RPS: "10000", SIMULATE_TIMEOUT_MS: String(TIMEOUT_MS) });
  server = await startTestServer(createServiceApp());
  target = await startUpstream((req, res) => {
    const delay = req.url?.startsWith("/slow") ? TIMEOUT_MS + 4_000 : 0;
    if (req.url?.startsWith("/slow")) res.on("close", () => (slowClosedAt = Date.now()));
    setTimeout(() => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ price: 42 }));
    }, delay);
  });
});

afterAll(async () => {
  await server?.close();
  await target?.close();
});

const manual = { id: "t", name: "start", type: "manual", config: { data: { amount: "1000" } } };
const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

describe(":simulate", () => {
  it("simulates a contractWrite and an ethTransfer from the runner, really runs reads and JavaScript, and sends nothing", async () => {
    const alice = await newOwner();
    await setBalance(alice.wallet, parseEther("1"));
    const token = await deployTestToken();
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const nonceBefore = (await call(alice, "GET", `/wallets/${alice.wallet}:getNonce`)).body.nonce;

    const res = await call(alice, "POST", "/workflows:simulate", {
      trigger: manual,
      nodes: [
        { id: "price", name: "price", type: "restApi", config: { url: `${target.url}/price`, method: "GET" } },
        {
          id: "mint",
          name: "mint",
          type: "contractWrite",
          config: {
            contractAddress: token.address,
            contractAbi: [mintFunction],
            methodCalls: [{ methodName: "mint", methodParams: ["{{settings.runner}}", "{{start.data.amount}}"] }],
          },
        },
        { id: "pay", name: "pay", type: "ethTransfer", config: { destination: recipient, amount: "5000" } },
        { id: "sum", name: "sum", type: "customCode", config: { source: "return price.data.data.price + 1" } },
      ],
      inputVariables: { settings: { runner: alice.wallet } },
    });
    expect(res.status).toBe(200);
    const execution = res.body;
    expect(execution).toMatchObject({
      index: 0,
      status: "success",
      chainId: devnet().chainId,
      startAt: expect.any(Number),
      endAt: expect.any(Number),
    });
    expect(execution.id).toMatch(ULID);
    expect(execution.workflowId).toMatch(ULID);
    expect(execution.error).toBeUndefined();
    expect(execution.steps.map((s: Json) => [s.id, s.success])).toEqual([
      ["t", true],
      ["price", true],
      ["mint", true],
      ["pay", true],
      ["sum", true],
    ]);
    const byId = Object.fromEntries(execution.steps.map((s: Json) => [s.id, s]));
    expect(byId.mint.output.data).toEqual([expect.objectContaining({ methodName: "mint", success: true, isSimulated: true })]);
    expect(byId.mint.output.data[0].transactionHash).toBeUndefined();
    expect(byId.pay.output.data).toMatchObject({ to: recipient, value: "5000", isSimulated: true });
    expect(byId.pay.output.data.transactionHash).toBeUndefined();
    expect(byId.sum.output).toEqual({ data: 43 });
    expect(execution.cogs).toEqual([]);
    expect(execution.executionFee).toEqual({ amount: expect.any(String), unit: "USD" });
    expect(execution.valueFee).toMatchObject({ tier: "tier1", classificationMethod: "ruleBased" });

    // Nothing was sent: no balance moved, no token minted, the wallet's EntryPoint nonce did not move.
    expect(await devnet().client.getBalance({ address: recipient })).toBe(0n);
    expect(await devnet().client.getBalance({ address: alice.wallet })).toBe(parseEther("1"));
    expect(await token.balanceOf(alice.wallet)).toBe(0n);
    expect((await call(alice, "GET", `/wallets/${alice.wallet}:getNonce`)).body.nonce).toBe(nonceBefore);

    // Stored nowhere.
    const lookup = await call(alice, "GET", `/executions/${execution.id}?workflowId=${execution.workflowId}`);
    expect(lookup.status).toBe(404);
    expect((await call(alice, "GET", "/executions")).body.data).toEqual([]);
  });

  it("an ethTransfer above the runner's balance fails the step (INSUFFICIENT_BALANCE); status 200 whatever the execution status", async () => {
    const alice = await newOwner();
    await setBalance(alice.wallet, 1000n);
    const res = await call(alice, "POST", "/workflows:simulate", {
      trigger: manual,
      nodes: [
        {
          id: "pay",
          name: "pay",
          type: "ethTransfer",
          config: { destination: privateKeyToAccount(generatePrivateKey()).address, amount: "5000" },
        },
      ],
      inputVariables: { settings: { runner: alice.wallet } },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "failed", error: "1 of 1 steps failed: pay" });
    expect(res.body.steps[1]).toMatchObject({ success: false, errorCode: "INSUFFICIENT_BALANCE" });
  });

  it("secrets are the caller's user-scoped ones; triggerOutput replaces the config's data", async () => {
    const alice = await newOwner();
    expect((await call(alice, "PUT", "/secrets/TOKEN", { value: "hunter2-secret" })).status).toBe(201);
    const res = await call(alice, "POST", "/workflows:simulate", {
      trigger: manual,
      nodes: [
        {
          id: "c",
          name: "c",
          type: "customCode",
          config: { source: "return { s: secrets.TOKEN, len: secrets.TOKEN.length, d: start.data }" },
        },
      ],
      inputVariables: {},
      triggerOutput: { data: { amount: "7" } },
    });
    expect(res.status).toBe(200);
    expect(res.body.steps[1].output).toEqual({ data: { s: "***", len: 14, d: { amount: "7" } } });
    expect(res.body.steps[0].output).toEqual({ data: { amount: "7" }, headers: {}, pathParams: {} });
  });

  it("refuses a runner that is not the caller's (WALLET_NOT_OWNED) and a write without a runner; validates like create", async () => {
    const alice = await newOwner();
    const bob = await newOwner();
    const write = { id: "pay", name: "pay", type: "ethTransfer", config: { destination: bob.wallet, amount: "1" } };
    const foreign = await call(alice, "POST", "/workflows:simulate", {
      trigger: manual,
      nodes: [write],
      inputVariables: { settings: { runner: bob.wallet } },
    });
    expect(foreign.status).toBe(400);
    expect(foreign.body).toMatchObject({ code: "WALLET_NOT_OWNED", errors: [{ path: "body.inputVariables.settings.runner" }] });

    const none = await call(alice, "POST", "/workflows:simulate", { trigger: manual, nodes: [write], inputVariables: {} });
    expect(none.status).toBe(400);
    expect(none.body).toMatchObject({ code: "VALIDATION_FAILED", errors: [{ path: "body.inputVariables.settings.runner" }] });

    const missing = await call(alice, "POST", "/workflows:simulate", { trigger: manual, nodes: [write] });
    expect(missing.status).toBe(400);
    expect(missing.body.errors.map((e: Json) => e.path)).toContain("body.inputVariables");

    const cycle = await call(alice, "POST", "/workflows:simulate", {
      trigger: manual,
      nodes: [
        { id: "a", name: "a", type: "customCode", config: { source: "return 1" } },
        { id: "b", name: "b", type: "customCode", config: { source: "return 1" } },
      ],
      edges: [
        { id: "e0", source: "t", target: "a" },
        { id: "e1", source: "a", target: "b" },
        { id: "e2", source: "b", target: "a" },
      ],
      inputVariables: {},
    });
    expect(cycle.status).toBe(400);
    expect(cycle.body.code).toBe("WORKFLOW_GRAPH_INVALID");
  });

  it('is cut at simulate_timeout_ms: status error "simulation timed out"', async () => {
    const alice = await newOwner();
    const started = Date.now();
    const res = await call(alice, "POST", "/workflows:simulate", {
      trigger: manual,
      nodes: [
        { id: "slow", name: "slow", type: "restApi", config: { url: `${target.url}/slow`, method: "GET" } },
        { id: "next", name: "next", type: "customCode", config: { source: "return 1" } },
      ],
      inputVariables: {},
    });
    const took = Date.now() - started;
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "error", error: "simulation timed out", endAt: expect.any(Number) });
    // The request in flight at the cap is stopped and recorded (API.md §18.1); the next node never starts.
    expect(res.body.steps.map((s: Json) => s.id)).toEqual(["t", "slow"]);
    expect(res.body.steps[1]).toMatchObject({
      success: false,
      errorCode: "NETWORK_ERROR",
      error: `simulation time limit of ${TIMEOUT_MS} ms reached`,
    });
    expect(took).toBeGreaterThanOrEqual(TIMEOUT_MS - 100);
    expect(took).toBeLessThan(TIMEOUT_MS + 2_000);
    // Stopped, not left running: the request's connection was closed at the cap.
    await vi.waitFor(() => expect(slowClosedAt).toBeDefined(), { timeout: 1_000 });
    expect(slowClosedAt! - started).toBeLessThan(TIMEOUT_MS + 2_000);
  });
});

describe(":estimateFees", () => {
  const body = (nodes: Json[], extra: Json = {}) => ({
    trigger: manual,
    nodes,
    createdAt: Date.now(),
    expireAt: Date.now() + 86_400_000,
    maxExecution: 10,
    ...extra,
  });

  it("prices one execution: a gas element per sending node, the runner's creation when undeployed, the value fee", async () => {
    const alice = await newOwner();
    const res = await call(
      alice,
      "POST",
      "/workflows:estimateFees",
      body([{ id: "pay", name: "pay", type: "ethTransfer", config: { destination: alice.wallet, amount: "1" } }], {
        runner: privateKeyToAccount(generatePrivateKey()).address,
      }),
    );
    expect(res.status).toBe(200);
    const d = devnet();
    expect(res.body).toMatchObject({
      chainId: d.chainId,
      nativeToken: { symbol: "ETH", decimals: 18 },
      executionFee: { amount: expect.stringMatching(/^\d+(\.\d+)?$/), unit: "USD" },
      valueFee: {
        fee: { amount: "0.03", unit: "PERCENTAGE" },
        tier: "tier1",
        valueBase: "input_token_value",
        classificationMethod: "ruleBased",
        confidence: 1,
      },
      discounts: [],
      pricingModel: "tiered_value_v1",
    });
    const costs = res.body.cogs as Json[];
    expect(costs.map((c) => [c.nodeId, c.costType])).toEqual(
      expect.arrayContaining([
        ["pay", "gas"],
        ["_wallet_creation", "walletCreation"],
      ]),
    );
    for (const c of costs) {
      expect(c).toEqual({
        nodeId: expect.any(String),
        costType: expect.any(String),
        fee: { amount: expect.stringMatching(/^\d+$/), unit: "WEI" },
        gasUnits: expect.stringMatching(/^\d+$/),
        chainId: d.chainId,
      });
    }
  });

  it("an off-chain workflow costs nothing on chain; bad definitions are 400", async () => {
    const alice = await newOwner();
    const res = await call(
      alice,
      "POST",
      "/workflows:estimateFees",
      body([{ id: "c", name: "c", type: "customCode", config: { source: "return 1" } }]),
    );
    expect(res.status).toBe(200);
    expect(res.body.cogs).toEqual([]);
    expect(res.body.valueFee).toMatchObject({ tier: "unspecified", fee: { amount: "0", unit: "PERCENTAGE" } });

    const bad = await call(alice, "POST", "/workflows:estimateFees", { trigger: manual, nodes: [] });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe("VALIDATION_FAILED");
    const chain = await call(
      alice,
      "POST",
      "/workflows:estimateFees",
      body([{ id: "c", name: "c", type: "customCode", config: { source: "return 1" } }], { chainId: 999_999 }),
    );
    expect(chain.status).toBe(400);
    expect(chain.body.code).toBe("UNSUPPORTED_CHAIN");
  });
});
