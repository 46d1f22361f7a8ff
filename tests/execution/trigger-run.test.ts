/**
 * `POST /triggers:run` (API.md §17.3) over a real HTTP server on the devnet, its chain reached through a proxy that
 * refuses block ranges over 100 blocks and fails requests naming a chosen address (tests/support/rpc-proxy.ts):
 * an event trigger answers the most recent matching log (conditions applied) in bounded `eth_getLogs` requests
 * within `max_catchup_blocks`, `NO_MATCH` when none, `RPC_ERROR` when the chain fails; a block trigger the latest
 * multiple of its interval; cron and fixedTime the next fire and `nextFires`; manual its data with `triggerInput`
 * overriding; validation as at create (frequency floors); the reference client's `client.triggers.run`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@avaprotocol/sdk-js";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { getAddress, pad, type Address } from "viem";
import { stackEnv, useTestRuntime } from "../support/runtime";
import { startTestServer, type TestServer } from "../support/server";
import { jsonClient, type Json } from "../support/client";
import { deployTestToken, devnet, TRANSFER, transferEvent } from "../support/chain";
import { startRpcProxy, type RpcProxy } from "../support/rpc-proxy";
import { balanceOfFunction } from "../support/abis";
import { createServiceApp } from "../../shared/service/app";

const CATCHUP = 1_000;
const MAX_RANGE = 100;
let server: TestServer;
let proxy: RpcProxy;
const { call, ownerWithWallet } = jsonClient(() => server.url);
const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;

beforeAll(async () => {
  proxy = await startRpcProxy(devnet().rpcUrl, { maxRange: MAX_RANGE, failAddresses: new Set() });
  const chains = (JSON.parse(stackEnv().CHAINS ?? "[]") as Json[]).map((c) =>
    c.chainId === devnet().chainId ? { ...c, rpcUrl: proxy.url } : c,
  );
  await useTestRuntime({
    RATE_LIMIT_BURST: "100000",
    RATE_LIMIT_RPS: "10000",
    MAX_CATCHUP_BLOCKS: String(CATCHUP),
    CHAINS: JSON.stringify(chains),
  });
  server = await startTestServer(createServiceApp());
});

afterAll(async () => {
  await server?.close();
  await proxy?.close();
});

const transfersTo = (token: Address, to: Address, conditions?: Json[]) => ({
  id: "watch",
  name: "watch",
  type: "event",
  config: {
    queries: [
      {
        addresses: [token],
        topics: [TRANSFER, null, pad(to.toLowerCase() as Address)],
        contractAbi: [transferEvent],
        ...(conditions ? { conditions } : {}),
      },
    ],
  },
});

describe("POST /triggers:run", () => {
  it("event: the most recent matching log, conditions applied, as a fire would carry it, in bounded requests", async () => {
    const alice = await ownerWithWallet("201");
    const token = await deployTestToken();
    const to = randomAddress();
    await token.mint(to, 5n);
    await token.mint(randomAddress(), 6n);
    await token.mint(to, 7n);

    proxy.getLogs.length = 0;
    const res = await call(alice, "POST", "/triggers:run", { trigger: transfersTo(token.address, to) });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.success).toBe(true);
    const data = res.body.output.data as Json;
    expect(data).toMatchObject({
      address: getAddress(token.address),
      eventName: "Transfer",
      args: { from: "0x0000000000000000000000000000000000000000", to: getAddress(to), value: "7" },
      topics: [TRANSFER, expect.any(String), pad(to.toLowerCase() as Address)],
    });
    const receipt = await devnet().client.getTransactionReceipt({ hash: data.transactionHash });
    expect(data.blockNumber).toBe(Number(receipt.blockNumber));
    expect(data.logIndex).toBe(receipt.logs[0]!.logIndex);
    const block = await devnet().client.getBlock({ blockNumber: receipt.blockNumber });
    expect(data.timestamp).toBe(Number(block.timestamp) * 1000);
    expect(data.blockHash).toBe(block.hash);
    // Found in the newest window: the range refusal halved it once, nothing wider than the provider takes followed.
    expect(proxy.getLogs.filter((r) => r.outcome === "ok").every((r) => r.to - r.from + 1 <= MAX_RANGE)).toBe(true);

    const earlier = await call(alice, "POST", "/triggers:run", {
      trigger: transfersTo(token.address, to, [{ fieldName: "value", operator: "lt", value: "6" }]),
    });
    expect(earlier.body).toMatchObject({ success: true, output: { data: { args: { value: "5" } } } });

    const withCalls = transfersTo(token.address, to);
    Object.assign(withCalls.config.queries[0]!, {
      contractAbi: [transferEvent, balanceOfFunction],
      methodCalls: [{ methodName: "balanceOf", methodParams: [to] }],
    });
    const called = await call(alice, "POST", "/triggers:run", { trigger: withCalls });
    expect(called.body.output.data.methodResults).toEqual([
      { methodName: "balanceOf", contractAddress: getAddress(token.address), success: true, value: "12" },
    ]);
  });

  it("event with no match: NO_MATCH and {data: null} after scanning max_catchup_blocks in bounded requests", async () => {
    const alice = await ownerWithWallet("202");
    const token = await deployTestToken();
    proxy.getLogs.length = 0;
    const res = await call(alice, "POST", "/triggers:run", { trigger: transfersTo(token.address, randomAddress()) });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ success: false, errorCode: "NO_MATCH", output: { data: null } });
    const answered = proxy.getLogs.filter((r) => r.outcome === "ok");
    expect(answered.every((r) => r.to - r.from + 1 <= MAX_RANGE)).toBe(true);
    // The head at the scan (other files may mine meanwhile), back to max_catchup_blocks behind it, each block once.
    const head = Math.max(...answered.map((r) => r.to));
    expect(head).toBeLessThanOrEqual(Number(await devnet().client.getBlockNumber()));
    const covered = answered.reduce((n, r) => n + (r.to - r.from + 1), 0);
    expect(covered).toBe(Math.min(CATCHUP, head + 1));
    expect(Math.min(...answered.map((r) => r.from))).toBe(Math.max(0, head - CATCHUP + 1));
    // Ranges halved on the refusals (500 → 250 → 125 → 62 blocks), then windows of that span.
    expect(proxy.getLogs.length).toBeLessThanOrEqual(Math.ceil(CATCHUP / (MAX_RANGE / 2)) + 4);
  });

  it("event on a failing chain: RPC_ERROR", async () => {
    const alice = await ownerWithWallet("203");
    const bad = randomAddress();
    proxy.rules.failAddresses!.add(bad.toLowerCase());
    const res = await call(alice, "POST", "/triggers:run", { trigger: transfersTo(bad, randomAddress()) });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ success: false, errorCode: "RPC_ERROR", output: { data: null } });
  });

  it("block: the latest block whose number is a multiple of interval; floors as at create", async () => {
    const alice = await ownerWithWallet("204");
    const res = await call(alice, "POST", "/triggers:run", { trigger: { id: "b", name: "b", type: "block", config: { interval: 100 } } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const data = res.body.output.data as Json;
    const head = Number(await devnet().client.getBlockNumber());
    expect(data.blockNumber % 100).toBe(0);
    expect(data.blockNumber).toBe(Math.floor(head / 100) * 100);
    const block = await devnet().client.getBlock({ blockNumber: BigInt(data.blockNumber) });
    expect(data).toMatchObject({ blockHash: block.hash, parentHash: block.parentHash, timestamp: Number(block.timestamp) * 1000 });

    const often = await call(alice, "POST", "/triggers:run", { trigger: { id: "b", name: "b", type: "block", config: { interval: 1 } } });
    expect(often.status).toBe(400);
    expect(often.body).toMatchObject({ code: "TRIGGER_TOO_FREQUENT", errors: [{ path: "body.trigger.config.interval" }] });
    const elsewhere = await call(alice, "POST", "/triggers:run", {
      trigger: { id: "b", name: "b", type: "block", config: { interval: 100, chainId: 999_999 } },
    });
    expect(elsewhere.body).toMatchObject({ code: "UNSUPPORTED_CHAIN", errors: [{ path: "body.trigger.config.chainId" }] });
  });

  it("cron and fixedTime: the next fire's output and nextFires (at most 5, after now)", async () => {
    const alice = await ownerWithWallet("205");
    const before = Date.now();
    const cron = await call(alice, "POST", "/triggers:run", {
      trigger: { id: "c", name: "c", type: "cron", config: { schedules: ["0 * * * *"] } },
    });
    expect(cron.status, JSON.stringify(cron.body)).toBe(200);
    const fires = cron.body.nextFires as number[];
    expect(fires).toHaveLength(5);
    expect(fires[0]).toBeGreaterThan(before);
    expect(fires[0]! % 3_600_000).toBe(0);
    expect(fires.slice(1).map((f, i) => f - fires[i]!)).toEqual([3_600_000, 3_600_000, 3_600_000, 3_600_000]);
    expect(cron.body).toEqual({
      success: true,
      output: { data: { timestamp: fires[0], timestampIso: new Date(fires[0]!).toISOString() } },
      nextFires: fires,
      executionContext: { is_simulated: false, provider: "sandbox", chain_id: null },
    });
    const often = await call(alice, "POST", "/triggers:run", {
      trigger: { id: "c", name: "c", type: "cron", config: { schedules: ["* * * * *"] } },
    });
    expect(often.body.code).toBe("TRIGGER_TOO_FREQUENT");

    const h = 3_600_000;
    const epochs = [before + 3 * h, before + h, before - h, before + 2 * h];
    const fixed = await call(alice, "POST", "/triggers:run", { trigger: { id: "f", name: "f", type: "fixedTime", config: { epochs } } });
    expect(fixed.body).toEqual({
      success: true,
      output: { data: { timestamp: before + h, timestampIso: new Date(before + h).toISOString() } },
      nextFires: [before + h, before + 2 * h, before + 3 * h],
      executionContext: { is_simulated: false, provider: "sandbox", chain_id: null },
    });
    const past = await call(alice, "POST", "/triggers:run", {
      trigger: { id: "f", name: "f", type: "fixedTime", config: { epochs: [before - h] } },
    });
    expect(past.status).toBe(400);
    expect(past.body).toMatchObject({ code: "VALIDATION_FAILED", errors: [{ path: "body.trigger.config.epochs" }] });
  });

  it("manual: its data, triggerInput overriding; triggerInput only for manual; unknown members refused", async () => {
    const alice = await ownerWithWallet("206");
    const trigger = { id: "m", name: "m", type: "manual", config: { data: { a: 1 }, headers: { "X-A": "1" } } };
    const plain = await call(alice, "POST", "/triggers:run", { trigger });
    const computed = { is_simulated: false, provider: "sandbox", chain_id: null };
    expect(plain.body).toEqual({
      success: true,
      output: { data: { a: 1 }, headers: { "X-A": "1" }, pathParams: {} },
      executionContext: computed,
    });
    const over = await call(alice, "POST", "/triggers:run", { trigger, triggerInput: { data: { b: 2 }, pathParams: { id: "7" } } });
    expect(over.body).toEqual({
      success: true,
      output: { data: { b: 2 }, headers: { "X-A": "1" }, pathParams: { id: "7" } },
      executionContext: computed,
    });

    const cases: [unknown, string][] = [
      [{ trigger, triggerInput: { other: 1 } }, "body.triggerInput.other"],
      [
        { trigger: { id: "c", name: "c", type: "cron", config: { schedules: ["0 * * * *"] } }, triggerInput: { data: 1 } },
        "body.triggerInput",
      ],
      [{ trigger, extra: true }, "body.extra"],
      [{}, "body.trigger"],
      [{ trigger: { id: "m", name: "m", type: "nope", config: {} } }, "body.trigger.type"],
    ];
    for (const [body, path] of cases) {
      const res = await call(alice, "POST", "/triggers:run", body);
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.code).toBe("VALIDATION_FAILED");
      expect(res.body.errors.map((e: Json) => e.path)).toContain(path);
    }
  });

  it("answers the reference client's client.triggers.run", async () => {
    const client = new Client({ baseUrl: server.url });
    await client.auth.exchangeWithKey(generatePrivateKey(), {
      uri: "https://app.example.com",
      chainId: devnet().chainId,
      version: "0.1.0",
    });
    const res = await client.triggers.run({
      trigger: { id: "m", name: "m", type: "manual", config: { data: { hello: "world" } } },
    } as never);
    expect(res).toMatchObject({ success: true, output: { data: { hello: "world" } } });
  });
});
