/**
 * The chain watcher (API.md §8.3.4-§8.3.7) on the devnet: workflows created, paused and deleted over the real
 * HTTP server; passes of the watcher driven directly (as the polling loop does), blocks mined with the test
 * client; executions read back over HTTP. The devnet also mines for the other test files running in parallel,
 * so every expectation is stated over the range a pass reports it processed.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DeleteCommand, GetCommand, PutCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import {
  createPublicClient,
  custom,
  encodeAbiParameters,
  encodeEventTopics,
  getAddress,
  pad,
  zeroAddress,
  type Address,
  type Hex,
  type PublicClient,
} from "viem";
import { privateKeyToAccount, generatePrivateKey } from "viem/accounts";
import { TRANSFER, transferEvent } from "../support/chain";
import { balanceOfFunction, burstFunction } from "../support/abis";
import { useTestRuntime } from "../support/runtime";
import { startTestServer, type TestServer } from "../support/server";
import { jsonClient, type Json, type Owner } from "../support/client";
import { compileContract, deployTestToken, devnet, fundedAccount } from "../support/chain";
import { createServiceApp } from "../../shared/service/app";
import { setBus } from "../../shared/execution/bus/install";
import { createInProcessBus, type InProcessBus } from "../../shared/execution/bus/in-process";
import { withRunner } from "../../shared/execution/runner";
import { Keys } from "../../shared/store/item-keys";
import { watchersOf } from "../../shared/workflow/watch-registry";
import { fireExecution } from "../../shared/watch/fire";
import { holds, matchLog, mergedFilter } from "../../shared/watch/match";
import { release } from "../../shared/watch/checkpoint";
import { watchChain } from "../../shared/watch/pass";
import { type PassResult } from "../../shared/watch/types";
import type { Runtime } from "../../shared/current-runtime";

const CHAIN = 31337;
const HOLDER = "watcher-test";
let runtime: Runtime;
let server: TestServer;
let bus: InProcessBus;
let owner: Owner;
const { call, ownerWithWallet, createWorkflow } = jsonClient(() => server.url);

beforeAll(async () => {
  runtime = await useTestRuntime({ MIN_BLOCK_INTERVAL_S: "0", RATE_LIMIT_BURST: "100000", RATE_LIMIT_RPS: "10000" });
  bus = setBus(withRunner(createInProcessBus()));
  server = await startTestServer(createServiceApp());
  owner = await ownerWithWallet();
});

afterAll(async () => {
  await bus?.idle();
  await server?.close();
});

const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const code = { id: "after", name: "after", type: "customCode", config: { source: "return 1" } };

const remove = async (id: string) => expect((await call(owner, "DELETE", `/workflows/${id}`)).status).toBe(204);

const BURST = `// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;
contract Burst {
    event Transfer(address indexed from, address indexed to, uint256 value);
    function burst(address to, uint256 n) external { for (uint256 i = 1; i <= n; i++) emit Transfer(address(0), to, i); }
}`;
const burstAbi = [burstFunction] as const;

/** A new Burst contract from a funded account: `burst(to, n)` emits Transfer logs of values 1…n to `to` in one transaction, mined; answers its hash. */
async function deployBurst() {
  const { wallet } = await fundedAccount();
  const hash = await wallet.deployContract({ abi: burstAbi, bytecode: compileContract("Burst", BURST) });
  const contract = (await devnet().client.waitForTransactionReceipt({ hash })).contractAddress!;
  const burst = async (to: Address, n: bigint) => {
    const tx = await wallet.writeContract({ address: contract, abi: burstAbi, functionName: "burst", args: [to, n] });
    await devnet().client.waitForTransactionReceipt({ hash: tx });
    return tx;
  };
  return { contract, burst };
}

const eventTrigger = (query: Json, extra: Json = {}) => ({
  id: "watch",
  name: "watch",
  type: "event",
  config: { queries: [query], ...extra },
});
const transfersTo = (token: Address, to: Address, extra: Json = {}) => ({
  addresses: [token],
  topics: [TRANSFER, null, pad(to)],
  ...extra,
});

/** Executions of a workflow after every run handed over so far has finished, oldest first. */
async function executions(id: string): Promise<Json[]> {
  await bus.idle();
  const res = await call(owner, "GET", `/workflows/${id}/executions?limit=200`);
  expect(res.status).toBe(200);
  return (res.body.data as Json[]).reverse();
}
const triggerData = (e: Json) => e.steps[0].output.data as Json;

const pass = (client?: PublicClient): Promise<PassResult> => watchChain(CHAIN, { holder: HOLDER, ...(client ? { client } : {}) });
const firedFor = (r: PassResult, id: string) => r.fired.filter((f) => f.workflowId === id);
/** Moves the checkpoint back, as if a second invocation processed the range again. */
const rewindTo = (block: number) =>
  runtime.db.send(
    new UpdateCommand({
      TableName: runtime.config.tableName,
      Key: Keys.chainCheckpoint(CHAIN),
      UpdateExpression: "SET #b = :b",
      ExpressionAttributeNames: { "#b": "block" },
      ExpressionAttributeValues: { ":b": block },
    }),
  );
const multiplesIn = (from: number, to: number, k: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i).filter((n) => n % k === 0);

describe("chain watcher", () => {
  it("a first pass only sets the checkpoint at the head; a block trigger with interval 3 fires on the multiples of 3 only, once each", async () => {
    const id = (await createWorkflow(owner, { trigger: { id: "blocks", name: "blocks", type: "block", config: { interval: 3 } } })).id;
    expect((await watchersOf(CHAIN)).map((w) => w.workflowId)).toEqual([id]);
    const first = await pass();
    expect(first.status).toBe("started");
    expect(first.fired).toEqual([]);

    await devnet().testClient.mine({ blocks: 7 });
    const r = await pass();
    expect(r.status).toBe("processed");
    const expected = multiplesIn(r.from!, r.to!, 3);
    expect(expected.length).toBeGreaterThanOrEqual(2);
    expect(firedFor(r, id).map((f) => f.fireId)).toEqual(expected.map((n) => `${id}:blocks:block:${n}`));

    const runs = await executions(id);
    expect(runs.map((e) => triggerData(e).blockNumber)).toEqual(expected);
    const block = await devnet().client.getBlock({ blockNumber: BigInt(expected[0]!) });
    expect(triggerData(runs[0]!)).toEqual({
      blockNumber: expected[0],
      blockHash: block.hash,
      parentHash: block.parentHash,
      timestamp: Number(block.timestamp) * 1000,
      gasLimit: block.gasLimit.toString(),
      gasUsed: block.gasUsed.toString(),
    });
    expect(runs.every((e) => e.status === "success")).toBe(true);

    // Paused: its entry is gone, so the watcher no longer reads anything for it, and nothing fires.
    expect((await call(owner, "POST", `/workflows/${id}:pause`)).status).toBe(200);
    expect(await watchersOf(CHAIN)).toEqual([]);
    await devnet().testClient.mine({ blocks: 4 });
    const paused = await pass();
    expect(paused.status).toBe("idle");
    expect(await executions(id)).toHaveLength(expected.length);
    await remove(id);
  });

  it("an ERC-20 Transfer to a watched address with a gte condition fires once with decoded fields; a lower one does not; a repeated range or delivery makes no second execution", async () => {
    const token = await deployTestToken();
    const watched = randomAddress();
    const id = (
      await createWorkflow(owner, {
        trigger: eventTrigger(
          transfersTo(token.address, watched, {
            contractAbi: [transferEvent, balanceOfFunction],
            conditions: [{ fieldName: "Transfer.value", operator: "gte", value: "1000" }],
            methodCalls: [{ methodName: "balanceOf", methodParams: [watched] }],
          }),
        ),
      })
    ).id;
    await pass();
    await token.mint(watched, 1500n);
    await token.mint(watched, 999n);
    await token.mint(randomAddress(), 5000n);
    const r = await pass();
    expect(r.status).toBe("processed");
    const fired = firedFor(r, id);
    expect(fired).toHaveLength(1);

    const [run] = await executions(id);
    const data = triggerData(run!);
    expect(data).toMatchObject({
      address: getAddress(token.address),
      eventName: "Transfer",
      args: { from: zeroAddress, to: getAddress(watched), value: "1500" },
      topics: [TRANSFER, pad(zeroAddress), pad(watched).toLowerCase()],
      methodResults: [{ methodName: "balanceOf", contractAddress: getAddress(token.address), success: true, value: "2499" }],
    });
    const receipt = await devnet().client.getTransactionReceipt({ hash: data.transactionHash });
    expect(data.blockNumber).toBe(Number(receipt.blockNumber));
    expect(data.blockHash).toBe(receipt.blockHash);
    expect(data.logIndex).toBe(receipt.logs[0]!.logIndex);
    expect(fired[0]!.fireId).toBe(`${id}:watch:log:${data.transactionHash}:0`);
    expect(run!.status).toBe("success");

    // The same range once more (a second invocation, a pass that died before its checkpoint): no new execution.
    await rewindTo(r.from! - 1);
    const again = await pass();
    expect(firedFor(again, id)).toEqual([]);
    expect(again.duplicates).toContain(fired[0]!.fireId);
    // The same fire delivered directly once more: a no-op.
    expect(await fireExecution(id, fired[0]!.fireId, { data: data })).toEqual({ kind: "duplicate" });
    expect(await executions(id)).toHaveLength(1);
    await remove(id);
  });

  it("cooldownSeconds: a second match within the cooldown does not fire", async () => {
    const token = await deployTestToken();
    const watched = randomAddress();
    const id = (await createWorkflow(owner, { trigger: eventTrigger(transfersTo(token.address, watched), { cooldownSeconds: 3600 }) })).id;
    await pass();
    await token.mint(watched, 1n);
    await token.mint(watched, 2n);
    const r = await pass();
    expect(firedFor(r, id)).toHaveLength(1);
    await token.mint(watched, 3n);
    expect(firedFor(await pass(), id)).toHaveLength(0);
    const runs = await executions(id);
    expect(runs.map((e) => triggerData(e).data)).toEqual([pad("0x1")]);
    await remove(id);
  });

  it("stopped for 20 blocks, then restarted: every missed match fires exactly once", async () => {
    const token = await deployTestToken();
    const watched = randomAddress();
    const events = (await createWorkflow(owner, { trigger: eventTrigger(transfersTo(token.address, watched)) })).id;
    const blocks = (await createWorkflow(owner, { trigger: { id: "blocks", name: "blocks", type: "block", config: { interval: 4 } } })).id;
    await pass();
    // No pass while 20+ blocks are mined, five of them with a matching transfer.
    for (let i = 1; i <= 5; i++) {
      await token.mint(watched, BigInt(i));
      await devnet().testClient.mine({ blocks: 3 });
    }
    const r = await pass();
    expect(r.to! - r.from! + 1).toBeGreaterThanOrEqual(20);
    expect(firedFor(r, events)).toHaveLength(5);
    expect(firedFor(r, blocks).map((f) => f.fireId)).toEqual(multiplesIn(r.from!, r.to!, 4).map((n) => `${blocks}:blocks:block:${n}`));
    const runs = await executions(events);
    expect(runs.map((e) => BigInt(triggerData(e).data))).toEqual([1n, 2n, 3n, 4n, 5n]);

    // Restarted from an older checkpoint again: nothing fires twice.
    await rewindTo(r.from! - 1);
    const again = await pass();
    expect(firedFor(again, events)).toEqual([]);
    expect(firedFor(again, blocks).filter((f) => Number(f.fireId.split(":").pop()) <= r.to!)).toEqual([]);
    expect(await executions(events)).toHaveLength(5);
    await remove(events);
    await remove(blocks);
    // Deleted: their entries went with them, so the watcher reads nothing for them.
    expect(await watchersOf(CHAIN)).toEqual([]);
  });

  it("a workflow that reaches maxExecution completes and stops being watched", async () => {
    const res = await call(owner, "POST", "/workflows", {
      smartWalletAddress: owner.wallet,
      trigger: { id: "blocks", name: "blocks", type: "block", config: { interval: 1 } },
      nodes: [code],
      maxExecution: 2,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const id = res.body.id as string;
    // The devnet also mines on its own (and for other test files), so the first pass may already fire one.
    const first = await pass();
    await devnet().testClient.mine({ blocks: 4 });
    const r = await pass();
    expect([...firedFor(first, id), ...firedFor(r, id)]).toHaveLength(2);
    expect(await watchersOf(CHAIN)).toEqual([]);
    const workflow = await call(owner, "GET", `/workflows/${id}`);
    expect(workflow.body).toMatchObject({ status: "completed", completionReason: "MAX_EXECUTIONS_REACHED", executionCount: 2 });
    await devnet().testClient.mine({ blocks: 2 });
    expect(firedFor(await pass(), id)).toEqual([]);
    expect(await executions(id)).toHaveLength(2);
    await remove(id);
  });

  it("RPC calls per pass grow only with the bounded requests: 10 workflows on one token share one eth_getLogs, 20 need two (at most 10 values per topic position)", async () => {
    const token = await deployTestToken();
    const d = devnet();
    const counting = () => {
      const calls: string[] = [];
      const client = createPublicClient({
        transport: custom({ request: ({ method, params }) => (calls.push(method), d.client.request({ method, params } as never)) }),
      }) as PublicClient;
      return { calls, client };
    };
    const measure = async (target: Address) => {
      await pass();
      await token.mint(target, 7n);
      const { calls, client } = counting();
      const r = await pass(client);
      return { calls: [...calls].sort(), fired: r.fired.length, requests: r.requests };
    };
    const logsCalls = (calls: string[]) => calls.filter((m) => m === "eth_getLogs").length;
    const others = (calls: string[]) => calls.filter((m) => m !== "eth_getLogs");

    const targets = Array.from({ length: 20 }, randomAddress);
    const ids = [(await createWorkflow(owner, { trigger: eventTrigger(transfersTo(token.address, targets[0]!)) })).id];
    const one = await measure(targets[0]!);
    for (const target of targets.slice(1, 10))
      ids.push((await createWorkflow(owner, { trigger: eventTrigger(transfersTo(token.address, target)) })).id);
    const ten = await measure(targets[7]!);
    for (const target of targets.slice(10))
      ids.push((await createWorkflow(owner, { trigger: eventTrigger(transfersTo(token.address, target)) })).id);
    const twenty = await measure(targets[15]!);

    expect([one.fired, ten.fired, twenty.fired]).toEqual([1, 1, 1]);
    expect([logsCalls(one.calls), logsCalls(ten.calls), logsCalls(twenty.calls)]).toEqual([1, 1, 2]);
    expect(others(ten.calls)).toEqual(others(one.calls));
    expect(others(twenty.calls)).toEqual(others(one.calls));
    expect(twenty.requests.every((r) => r.addresses === 1)).toBe(true);
    for (const id of ids) await remove(id);
  });

  it("maxEventsPerBlock keeps the first matching logs of a block; each log's fire id is its transaction hash and its position in that transaction", async () => {
    const { contract, burst } = await deployBurst();
    const watched = randomAddress();
    const id = (
      await createWorkflow(owner, {
        trigger: eventTrigger(transfersTo(contract, watched, { maxEventsPerBlock: 3, contractAbi: [transferEvent] })),
      })
    ).id;
    await pass();
    const tx = await burst(watched, 5n);
    const r = await pass();
    expect(firedFor(r, id).map((f) => f.fireId)).toEqual([0, 1, 2].map((i) => `${id}:watch:log:${tx}:${i}`));
    const runs = await executions(id);
    expect(runs.map((e) => triggerData(e).args.value)).toEqual(["1", "2", "3"]);
    await remove(id);
  });

  it("fires beyond an owner's budget for a pass wait for the next pass; a restart in between loses none and claims none twice", async () => {
    const { contract, burst } = await deployBurst();
    const watched = randomAddress();
    const id = (await createWorkflow(owner, { trigger: eventTrigger(transfersTo(contract, watched)) })).id;
    await pass();
    const tx = await burst(watched, 13n);

    const limits = { firesPerOwnerPerPass: 5 };
    const first = await watchChain(CHAIN, { holder: HOLDER, limits });
    expect(firedFor(first, id).map((f) => f.fireId)).toEqual([0, 1, 2, 3, 4].map((i) => `${id}:watch:log:${tx}:${i}`));
    expect(first.carried).toBe(8);
    // Another invocation takes the chain with nothing in memory: it asks from the workflow's cursor again.
    await release(CHAIN, HOLDER);
    const again = await watchChain(CHAIN, { holder: "restarted", limits });
    expect(firedFor(again, id)).toEqual([]);
    expect(again.duplicates).toEqual(first.fired.map((f) => f.fireId));
    const rest: PassResult[] = [];
    for (let i = 0; i < 4; i++) rest.push(await watchChain(CHAIN, { holder: "restarted", limits }));
    expect(rest.map((r) => firedFor(r, id).length)).toEqual([5, 3, 0, 0]);
    expect(rest[1]!.carried).toBe(0);
    const runs = await executions(id);
    expect(runs.map((e) => BigInt(triggerData(e).data))).toEqual(Array.from({ length: 13 }, (_, i) => BigInt(i + 1)));
    await release(CHAIN, "restarted");
    await remove(id);
  });

  it("entries stay small (a large trigger in its own item); an entry written before owners were recorded (version 2) is upgraded once by the watcher and keeps firing; delete removes both items", async () => {
    const token = await deployTestToken();
    const watched = randomAddress();
    const addresses = [token.address, ...Array.from({ length: 60 }, randomAddress)];
    const id = (await createWorkflow(owner, { trigger: eventTrigger(transfersTo(token.address, watched, { addresses })) })).id;
    const TableName = runtime.config.tableName;
    const read = async (sk: string) =>
      (await runtime.db.send(new GetCommand({ TableName, Key: { pk: `WF#${id}`, sk }, ConsistentRead: true }))).Item;
    const entry = await read("WATCH");
    expect(entry).toMatchObject({ v: 3, owner: owner.owner.toLowerCase(), triggerStored: true, triggerType: "event" });
    expect(entry!.trigger).toBeUndefined();
    expect(JSON.stringify(entry).length).toBeLessThan(600);
    const trigger = (await watchersOf(CHAIN)).find((w) => w.workflowId === id)!.trigger;
    expect(trigger.type === "event" && trigger.config.queries[0]!.addresses!.map((a) => a.toLowerCase())).toEqual(
      addresses.map((a) => a.toLowerCase()),
    );

    // As version 2 wrote it: no owner, the trigger inline.
    await runtime.db.send(new DeleteCommand({ TableName, Key: { pk: `WF#${id}`, sk: "WATCH#TRIGGER" } }));
    await runtime.db.send(
      new PutCommand({
        TableName,
        Item: {
          ...Keys.watch(id),
          ...Keys.watchByChain(CHAIN, id),
          type: "watch",
          v: 2,
          workflowId: id,
          chainId: CHAIN,
          trigger: JSON.stringify(trigger),
          since: entry!.since,
        },
      }),
    );
    const legacy = (await watchersOf(CHAIN)).find((w) => w.workflowId === id)!;
    expect(legacy.owner).toBeUndefined();
    expect(legacy.trigger).toEqual(trigger);

    await pass();
    await token.mint(watched, 9n);
    const r = await pass();
    expect(firedFor(r, id)).toHaveLength(1);
    expect(await read("WATCH")).toMatchObject({ v: 3, owner: owner.owner.toLowerCase(), triggerStored: true, since: entry!.since });
    expect((await read("WATCH#TRIGGER"))?.trigger).toBe(JSON.stringify(trigger));
    await remove(id);
    expect(await read("WATCH")).toBeUndefined();
    expect(await read("WATCH#TRIGGER")).toBeUndefined();
  });

  it("the lease: while one invocation holds a chain, another's pass does nothing; released, it proceeds", async () => {
    const id = (await createWorkflow(owner, { trigger: { id: "blocks", name: "blocks", type: "block", config: { interval: 1 } } })).id;
    await release(CHAIN, HOLDER); // the passes above held it
    expect((await watchChain(CHAIN, { holder: "first" })).status).not.toBe("leased");
    await devnet().testClient.mine({ blocks: 2 });
    expect(await watchChain(CHAIN, { holder: "second" })).toMatchObject({ status: "leased", fired: [] });
    await release(CHAIN, "first");
    const r = await watchChain(CHAIN, { holder: "second" });
    expect(r.status).toBe("processed");
    expect(firedFor(r, id).length).toBe(r.to! - r.from! + 1);
    await release(CHAIN, "second");
    await remove(id);
  });
});

describe("event matching (§8.3.5)", () => {
  const abi = [
    {
      type: "event",
      name: "Swap",
      inputs: [
        { name: "who", type: "address", indexed: true },
        { name: "amount", type: "int256", indexed: false },
        { name: "ok", type: "bool", indexed: false },
        { name: "memo", type: "string", indexed: false },
        { name: "", type: "uint8", indexed: false },
      ],
    },
  ];
  const who = randomAddress();
  const log = {
    address: "0x00000000000000000000000000000000000000aa" as Hex,
    topics: [...encodeEventTopics({ abi, eventName: "Swap", args: { who } })] as Hex[],
    data: encodeAbiParameters([{ type: "int256" }, { type: "bool" }, { type: "string" }, { type: "uint8" }], [-5n, true, "hello world", 7]),
  };
  const decoded = matchLog({ maxEventsPerBlock: 100, contractAbi: abi }, log)!;
  const check = (fieldName: string, operator: string, value: string, fieldType?: string) =>
    holds({ fieldName, operator: operator as never, value, ...(fieldType ? { fieldType } : {}) }, decoded, abi);

  it("decodes arguments by name (unnamed ones as argN), integers as decimal strings, addresses EIP-55", () => {
    expect(decoded).toEqual({ eventName: "Swap", args: { who: getAddress(who), amount: "-5", ok: true, memo: "hello world", arg4: "7" } });
  });

  it("compares integers as big integers, addresses case-insensitively (eq/ne only), booleans, strings, contains", () => {
    // integers, and a field named through its event (another event's name matches nothing)
    expect([check("amount", "lt", "0"), check("amount", "gte", "-5"), check("amount", "gt", "-5")]).toEqual([true, true, false]);
    expect([check("Swap.arg4", "eq", "7"), check("Other.amount", "lt", "0")]).toEqual([true, false]);
    expect([
      check("who", "eq", who.toLowerCase()),
      check("who", "ne", who.toUpperCase().replace("0X", "0x")),
      check("who", "gt", "0x0"),
    ]).toEqual([true, false, false]);
    expect([check("ok", "eq", "true"), check("ok", "ne", "true")]).toEqual([true, false]);
    expect([check("memo", "contains", "lo wo"), check("memo", "eq", "hello"), check("memo", "gt", "hello")]).toEqual([true, false, true]);
    expect([check("arg4", "lt", "10"), check("arg4", "lt", "10", "string"), check("missing", "eq", "1")]).toEqual([true, false, false]);
  });

  it("a query matches by address and topics with wildcards; the merged filter is a superset of every query", () => {
    expect(
      matchLog({ maxEventsPerBlock: 100, addresses: ["0x00000000000000000000000000000000000000AA"], topics: [log.topics[0]!, null] }, log),
    ).toEqual({});
    expect(matchLog({ maxEventsPerBlock: 100, topics: [null, pad(randomAddress())] }, log)).toBeUndefined();
    expect(matchLog({ maxEventsPerBlock: 100, addresses: [randomAddress()] }, log)).toBeUndefined();
    const a = randomAddress();
    expect(
      mergedFilter([
        { maxEventsPerBlock: 1, addresses: [a], topics: [TRANSFER, null, pad(a)] },
        { maxEventsPerBlock: 1, addresses: [a], topics: [TRANSFER] },
      ]),
    ).toEqual({
      address: [a.toLowerCase()],
      topics: [[TRANSFER.toLowerCase()]],
    });
    expect(
      mergedFilter([
        { maxEventsPerBlock: 1, topics: [TRANSFER] },
        { maxEventsPerBlock: 1, addresses: [a], topics: ["", pad(a)] },
      ]),
    ).toEqual({});
  });
});
