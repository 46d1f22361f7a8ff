/**
 * `executionContext` (API.md §21.3) on `POST /nodes:run` and `POST /triggers:run` over a real server on the devnet:
 * for every node kind and every trigger kind, whether anything was sent, what the work went through and the chain
 * it used (shared/execution/execution-context.ts), also on a failed step, and read by the reference client's
 * `client.nodes.run` and `client.triggers.run`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@avaprotocol/sdk-js";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { erc20Abi } from "viem";
import { startService, type TestService } from "../support/service";
import { jsonClient, type Json, type Owner } from "../support/client";
import { deployTestToken, devnet, TRANSFER, transferEvent } from "../support/chain";
import { startUpstream, type Upstream } from "../support/upstream";

let service: TestService;
let upstream: Upstream;
let alice: Owner;
let token: `0x${string}`;
const { call, ownerWithWallet } = jsonClient(() => service.url);
const chainId = () => devnet().chainId;
const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;

beforeAll(async () => {
  service = await startService({ ALLOW_PRIVATE_NETWORK: "true" });
  upstream = await startUpstream((req, res) => {
    res.setHeader("Content-Type", "application/json");
    res.end(JSON.stringify({ data: { ok: true } }));
  });
  alice = await ownerWithWallet("1");
  token = (await deployTestToken()).address;
});

afterAll(async () => {
  await service?.close();
  await upstream?.close();
});

const sandbox = { is_simulated: false, provider: "sandbox", chain_id: null };
const http = { is_simulated: false, provider: "http", chain_id: null };
const rpc = () => ({ is_simulated: false, provider: "chain_rpc", chain_id: chainId() });
const bundler = () => ({ is_simulated: true, provider: "bundler", chain_id: chainId() });

const read = { type: "contractRead", config: { contractAddress: "", contractAbi: erc20Abi, methodCalls: [{ methodName: "decimals" }] } };
const readOf = (address: string) => ({ ...read, config: { ...read.config, contractAddress: address } });

async function runNode(node: Json, extra: Json = {}) {
  const res = await call(alice, "POST", "/nodes:run", { node: { id: "n", name: "n", ...node }, ...extra });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

describe("POST /nodes:run answers executionContext", () => {
  it("chain reads: chain_rpc on the node's chain, nothing simulated", async () => {
    const contractRead = await runNode(readOf(token));
    expect(contractRead).toMatchObject({ success: true, executionContext: rpc() });
    const balance = await runNode({ type: "balance", config: { address: alice.wallet } }, { chainId: chainId() });
    expect(balance).toMatchObject({ success: true, executionContext: rpc() });
  });

  it("writes: bundler and is_simulated true, since /nodes:run never sends (API.md §17.2)", async () => {
    const settings = { inputVariables: { settings: { runner: alice.wallet } } };
    const transfer = await runNode({ type: "ethTransfer", config: { destination: randomAddress(), amount: "1000" } }, settings);
    expect(transfer.executionContext).toEqual(bundler());
    const write = await runNode(
      {
        type: "contractWrite",
        config: {
          contractAddress: token,
          contractAbi: erc20Abi,
          methodCalls: [{ methodName: "approve", methodParams: [randomAddress(), "1"] }],
        },
      },
      settings,
    );
    expect(write.executionContext).toEqual(bundler());
  });

  it("JavaScript parts: sandbox with no chain", async () => {
    expect((await runNode({ type: "customCode", config: { source: "return 1" } })).executionContext).toEqual(sandbox);
    const branch = await runNode({ type: "branch", config: { conditions: [{ id: "yes", expression: "1 > 0" }] } });
    expect(branch.executionContext).toEqual(sandbox);
    const filter = await runNode(
      { type: "filter", config: { inputVariable: "{{list}}", expression: "value > 1" } },
      { inputVariables: { list: [1, 2, 3] } },
    );
    expect(filter).toMatchObject({ success: true, output: { data: [2, 3] }, executionContext: sandbox });
  });

  it("HTTP parts: http with no chain", async () => {
    const rest = await runNode({ type: "restApi", config: { url: `${upstream.url}/x`, method: "GET" } });
    expect(rest).toMatchObject({ success: true, executionContext: http });
    const graphql = await runNode({ type: "graphqlQuery", config: { url: `${upstream.url}/graphql`, query: "{ ok }" } });
    expect(graphql).toMatchObject({ success: true, executionContext: http });
  });

  it("a loop is its runner's kind", async () => {
    const loop = (runner: Json) =>
      runNode({ type: "loop", config: { inputVariable: "{{items}}", runner } }, { inputVariables: { items: [1, 2] } });
    expect((await loop(readOf(token))).executionContext).toEqual(rpc());
    expect((await loop({ type: "customCode", config: { source: "return value * 2" } })).executionContext).toEqual(sandbox);
    expect((await loop({ type: "restApi", config: { url: `${upstream.url}/x`, method: "GET" } })).executionContext).toEqual(http);
  });

  it("is answered on a failed step too", async () => {
    const failed = await runNode(readOf(randomAddress()));
    expect(failed).toMatchObject({ success: false, executionContext: rpc() });
    expect(await runNode({ type: "customCode", config: { source: "throw new Error('no')" } })).toMatchObject({
      success: false,
      executionContext: sandbox,
    });
  });
});

describe("POST /triggers:run answers executionContext", () => {
  const runTrigger = async (trigger: Json) => {
    const res = await call(alice, "POST", "/triggers:run", { trigger: { id: "t", name: "t", ...trigger } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  };

  it("block and event: chain_rpc on the trigger's chain", async () => {
    expect((await runTrigger({ type: "block", config: { interval: 100 } })).executionContext).toEqual(rpc());
    const event = await runTrigger({
      type: "event",
      config: { queries: [{ addresses: [token], topics: [TRANSFER], contractAbi: [transferEvent] }] },
    });
    expect(event.executionContext).toEqual(rpc());
  });

  it("manual, cron and fixedTime: sandbox (computed by the service alone), no chain", async () => {
    expect((await runTrigger({ type: "manual", config: { data: { a: 1 } } })).executionContext).toEqual(sandbox);
    expect((await runTrigger({ type: "cron", config: { schedules: ["0 * * * *"] } })).executionContext).toEqual(sandbox);
    const epochs = [Date.now() + 3_600_000];
    expect((await runTrigger({ type: "fixedTime", config: { epochs } })).executionContext).toEqual(sandbox);
  });
});

describe("the reference client reads executionContext", () => {
  it("from client.nodes.run and client.triggers.run", async () => {
    const client = new Client({ baseUrl: service.url });
    await client.auth.exchangeWithKey(generatePrivateKey(), { uri: "https://app.example.com", chainId: chainId(), version: "0.1.0" });
    const node = await client.nodes.run({ node: { id: "r", name: "r", ...readOf(token) } } as never);
    expect(node.executionContext).toEqual(rpc());
    const trigger = await client.triggers.run({ trigger: { id: "m", name: "m", type: "manual", config: { data: { a: 1 } } } } as never);
    expect((trigger as { executionContext?: unknown }).executionContext).toEqual(sandbox);
  });
});
