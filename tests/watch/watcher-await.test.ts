/**
 * Chain-event waits in the chain watcher (API.md §17.1, shared/watch/chain-waits.ts): an await watch entry (store
 * pattern 19b) written as the await node's run writes it, the watcher's passes driven directly on the devnet, and
 * `endWaitByEvent` (shared/execution/waits.ts) mocked at its boundary. A workflow with the same event query, whose
 * fires are caught at `fireExecution`, shows the output an event trigger would carry for the same log. The devnet
 * also mines for the other test files running in parallel, so expectations name the blocks of the test's own logs.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { randomBytes } from "node:crypto";
import { GetCommand } from "@aws-sdk/lib-dynamodb";
import { ulid } from "ulid";
import { getAddress, pad, parseAbiItem, type Address, type Hex } from "viem";
import { compileContract, devnet, fundedAccount, TRANSFER, transferEvent } from "../support/chain";
import { burstFunction } from "../support/abis";
import { useTestRuntime } from "../support/runtime";
import { unwatch, watch, type ChainTrigger } from "../../shared/workflow/watch-registry";
import { chainWatchItems, deleteAwaitWatch, putAwaitWatch, type AwaitWatch } from "../../shared/store/entities/watch";
import { readCheckpoint } from "../../shared/store/entities/checkpoint";
import { release } from "../../shared/watch/checkpoint";
import { watchChain } from "../../shared/watch/pass";
import { watchedChains } from "../../shared/watch/loop";
import { type PassOptions, type PassResult } from "../../shared/watch/types";
import type { Runtime } from "../../shared/current-runtime";

const mocks = vi.hoisted(() => ({
  ended: [] as { workflowId: string; executionId: string; nodeId: string; output: Record<string, unknown> }[],
  open: true,
  /** Calls to fail before answering. */
  failures: 0,
  fired: [] as { workflowId: string; fireId: string; output: Record<string, unknown> }[],
}));

vi.mock(import("../../shared/execution/waits"), () => ({
  endWaitByEvent: vi.fn(async (workflowId: string, executionId: string, nodeId: string, output: Record<string, unknown>) => {
    if (mocks.failures > 0) {
      mocks.failures--;
      throw new Error("the execution layer failed");
    }
    mocks.ended.push({ workflowId, executionId, nodeId, output });
    return mocks.open;
  }),
}));
vi.mock(import("../../shared/watch/fire"), async (importOriginal) => ({
  ...(await importOriginal()),
  fireExecution: vi.fn(async (workflowId: string, fireId: string, output: Record<string, unknown>) => {
    mocks.fired.push({ workflowId, fireId, output });
    return { kind: "fired" as const, executionId: ulid() };
  }),
}));

const CHAIN = 31337;
const HOLDER = "watcher-await";

let runtime: Runtime;

beforeAll(async () => {
  runtime = await useTestRuntime({ MIN_BLOCK_INTERVAL_S: "0" });
});

afterAll(async () => {
  await release(CHAIN, HOLDER);
});

beforeEach(() => {
  mocks.ended.length = 0;
  mocks.fired.length = 0;
  mocks.open = true;
  mocks.failures = 0;
});

const randomAddress = () => `0x${randomBytes(20).toString("hex")}` as Address;
const randomTopic = () => `0x${randomBytes(32).toString("hex")}` as Hex;
const pass = (options: Partial<PassOptions> = {}): Promise<PassResult> => watchChain(CHAIN, { holder: HOLDER, ...options });
const head = async () => Number(await devnet().client.getBlockNumber({ cacheTime: 0 }));
const listedWaits = async () => (await chainWatchItems(CHAIN)).awaits.map((w) => `${w.executionId}:${w.nodeId}`);

const BURST = `// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;
contract CountedBurst {
    event Transfer(address indexed from, address indexed to, uint256 value);
    uint256 public total;
    function burst(address to, uint256 n) external { for (uint256 i = 1; i <= n; i++) { total += i; emit Transfer(address(0), to, i); } }
}`;
const totalFunction = parseAbiItem("function total() view returns (uint256)");
const burstAbi = [burstFunction] as const;

/** A new CountedBurst: `burst(to, n)` emits Transfer logs of values 1…n to `to` in one transaction (its block, logs). */
async function deployBurst() {
  const { wallet } = await fundedAccount();
  const hash = await wallet.deployContract({ abi: burstAbi, bytecode: compileContract("CountedBurst", BURST) });
  const contract = (await devnet().client.waitForTransactionReceipt({ hash })).contractAddress!;
  const burst = async (to: Address, n: bigint) => {
    const tx = await wallet.writeContract({ address: contract, abi: burstAbi, functionName: "burst", args: [to, n] });
    const receipt = await devnet().client.waitForTransactionReceipt({ hash: tx });
    return { block: Number(receipt.blockNumber), logs: receipt.logs };
  };
  return { contract, burst };
}

const newWait = (owner: string, queries: unknown[], afterBlock: number, extra: Partial<AwaitWatch> = {}): AwaitWatch => ({
  workflowId: ulid(),
  executionId: ulid(),
  nodeId: "wait",
  owner,
  chainId: CHAIN,
  queries,
  afterBlock,
  deadline: Date.now() + 3_600_000,
  ...extra,
});

/** A first pass only sets the checkpoint at the head: every test but the first starts with one there. */
async function withCheckpoint(): Promise<void> {
  if ((await readCheckpoint(CHAIN))?.block === undefined) expect((await pass()).status).toBe("started");
}

/** Passes until `done` holds for a pass's result (at most `n` passes); every result. */
async function passUntil(done: (r: PassResult) => boolean, options: Partial<PassOptions> = {}, n = 10): Promise<PassResult[]> {
  const results: PassResult[] = [];
  for (let i = 0; i < n; i++) {
    const r = await pass(options);
    results.push(r);
    if (done(r)) break;
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  return results;
}

describe("chain-event waits", () => {
  it("an await entry alone keeps its chain watched: passes ask the chain for it, and its removal makes the chain idle", async () => {
    expect(await watchedChains()).not.toContain(CHAIN);
    const owner = randomAddress().toLowerCase();
    const w = newWait(owner, [{ addresses: [randomAddress()], topics: [TRANSFER] }], await head());
    await putAwaitWatch(w);
    expect(await watchedChains()).toContain(CHAIN);

    expect((await pass()).status).toBe("started");
    await devnet().testClient.mine({ blocks: 2 });
    const r = await pass();
    expect(r.status).toBe("processed");
    expect(r.requests.length).toBeGreaterThan(0);
    expect(r.requests.every((q) => q.owner === owner && q.from === w.afterBlock + 1)).toBe(true);
    // Its cursor is kept under its own key, even at the head.
    const behind = (await readCheckpoint(CHAIN))!.behind as Record<string, number>;
    expect(behind[`await:${w.executionId}:wait`]).toBe(r.to);

    await deleteAwaitWatch(w.executionId, w.nodeId);
    expect(await watchedChains()).not.toContain(CHAIN);
    await devnet().testClient.mine({ blocks: 1 });
    expect((await pass()).status).toBe("idle");
    expect(mocks.ended).toEqual([]);
  });

  it("a wait ends once with the first matching log after afterBlock (not one at afterBlock), with the event trigger's output, and its entry goes", async () => {
    await withCheckpoint();
    const owner = randomAddress().toLowerCase();
    const watched = randomAddress();
    const { contract, burst } = await deployBurst();
    const query = {
      addresses: [contract],
      topics: [TRANSFER, null, pad(watched)],
      contractAbi: [transferEvent, totalFunction],
      methodCalls: [{ methodName: "total", methodParams: [] }],
    };
    // The same query as an event workflow of the same owner: its requests are the wait's (one group).
    const workflowId = ulid();
    const trigger = { id: "watch", name: "watch", type: "event", config: { queries: [query] } } as unknown as ChainTrigger;
    await watch({ id: workflowId, chainId: CHAIN, owner, trigger }, 0);
    await pass();

    const first = await burst(watched, 1n);
    const w = newWait(owner, [query], first.block);
    await putAwaitWatch(w);
    const r1 = await pass();
    expect(r1.status).toBe("processed");
    expect(r1.from!).toBeLessThanOrEqual(first.block);
    expect(new Set(r1.requests.map((q) => q.group)).size).toBe(1);
    // The workflow fires on the log at afterBlock; the wait does not end with it.
    expect(mocks.fired.map((f) => f.output.data)).toEqual([expect.objectContaining({ blockNumber: first.block })]);
    expect(r1.waitsEnded).toEqual([]);
    expect(mocks.ended).toEqual([]);
    expect(await listedWaits()).toContain(`${w.executionId}:wait`);

    const second = await burst(watched, 3n);
    const third = await burst(watched, 2n);
    const results = await passUntil((r) => (r.to ?? 0) >= third.block);
    const ended = results.flatMap((r) => r.waitsEnded);
    expect(ended).toEqual([
      {
        workflowId: w.workflowId,
        executionId: w.executionId,
        nodeId: "wait",
        blockNumber: second.block,
        logIndex: second.logs[0]!.logIndex,
        open: true,
      },
    ]);
    expect(mocks.ended).toHaveLength(1);
    const call = mocks.ended[0]!;
    expect([call.workflowId, call.executionId, call.nodeId]).toEqual([w.workflowId, w.executionId, "wait"]);
    // Exactly what the event trigger's fire carries for that log: the first of the transaction's three.
    const fire = mocks.fired.find(
      (f) =>
        (f.output.data as { blockNumber: number; logIndex: number }).blockNumber === second.block &&
        (f.output.data as { logIndex: number }).logIndex === second.logs[0]!.logIndex,
    );
    expect(fire).toBeDefined();
    expect(call.output).toEqual(fire!.output);
    expect(call.output.data).toMatchObject({
      address: getAddress(contract),
      eventName: "Transfer",
      args: { value: "1" },
      methodResults: [{ methodName: "total", success: true, value: "10" }],
    });
    expect(await listedWaits()).not.toContain(`${w.executionId}:wait`);

    // Later logs end nothing more; the ended wait's cursor leaves the checkpoint.
    await burst(watched, 1n);
    const after = await passUntil((r) => r.status === "processed" && (r.to ?? 0) > third.block);
    expect(after.flatMap((r) => r.waitsEnded)).toEqual([]);
    expect(mocks.ended).toHaveLength(1);
    await pass();
    expect(Object.keys((await readCheckpoint(CHAIN))!.behind as object)).not.toContain(`await:${w.executionId}:wait`);
    await unwatch(workflowId);
  });

  it("a wait starts after its afterBlock even when the checkpoint is past it; a restart resumes it where it stood; an answer of false still removes the entry", async () => {
    await withCheckpoint();
    const owner = randomAddress().toLowerCase();
    const watched = randomAddress();
    const { contract, burst } = await deployBurst();
    const query = { addresses: [contract], topics: [TRANSFER, null, pad(watched)] };

    // The log is mined, the checkpoint moves past it, then the wait (begun just before it) is written.
    const early = await burst(watched, 1n);
    await passUntil((r) => (r.to ?? 0) >= early.block || r.status === "idle");
    expect((await readCheckpoint(CHAIN))!.block as number).toBeGreaterThanOrEqual(early.block);
    const late = newWait(owner, [query], early.block - 1);
    await putAwaitWatch(late);
    const r = await pass();
    expect(r.waitsEnded.map((e) => [e.executionId, e.blockNumber])).toEqual([[late.executionId, early.block]]);

    // A wait served by one holder, its cursor written; that holder stops; another (a restart) resumes it.
    const w = newWait(owner, [query], await head());
    await putAwaitWatch(w);
    await devnet().testClient.mine({ blocks: 1 });
    const before = await pass();
    const behind = (await readCheckpoint(CHAIN))!.behind as Record<string, number>;
    expect(behind[`await:${w.executionId}:wait`]).toBe(before.to);
    await release(CHAIN, HOLDER);

    mocks.open = false;
    const log = await burst(watched, 2n);
    const restarted = await passUntil((x) => (x.to ?? 0) >= log.block, { holder: `${HOLDER}-restarted` });
    await release(CHAIN, `${HOLDER}-restarted`);
    expect(restarted[0]!.from).toBe(before.to! + 1);
    const ended = restarted.flatMap((x) => x.waitsEnded);
    expect(ended.map((e) => [e.executionId, e.blockNumber, e.logIndex, e.open])).toEqual([
      [w.executionId, log.block, log.logs[0]!.logIndex, false],
    ]);
    expect(mocks.ended.map((e) => e.executionId)).toEqual([late.executionId, w.executionId]);
    expect(await listedWaits()).toEqual([]);
  });

  it("a wait whose queries lie in two request groups ends with the earliest log of either; a failed ending stays before its log and is found again after a restart", async () => {
    await withCheckpoint();
    const owner = randomAddress().toLowerCase();
    const x = await deployBurst();
    const y = await deployBurst();
    const [watched0, watched1] = [randomAddress(), randomAddress()];
    // Two shapes (with and without addresses): two request groups of the same owner.
    const w = newWait(
      owner,
      [{ addresses: [x.contract], topics: [TRANSFER, null, pad(watched0)] }, { topics: [TRANSFER, null, pad(watched1)] }],
      await head(),
    );
    await putAwaitWatch(w);
    const earlier = await y.burst(watched1, 1n); // matches the second query
    const later = await x.burst(watched0, 1n); // matches the first, in a later block
    expect(later.block).toBeGreaterThan(earlier.block);
    const limits = { requestsPerPass: 1 };

    // One request per pass: the first query's group answers first, with the later log; the wait must not end with it.
    const r1 = await pass({ limits });
    expect(r1.requests).toHaveLength(1);
    expect(r1.requests[0]!.filter.address).toEqual([x.contract.toLowerCase()]);
    expect(r1.waitsEnded).toEqual([]);
    expect(mocks.ended).toEqual([]);

    // The second group finds the earlier log: now final, but its ending fails; the cursor stays before that log.
    mocks.failures = 1;
    const r2 = await pass({ limits });
    expect(r2.requests.map((q) => q.filter.address)).toEqual([undefined]);
    expect(r2.waitsEnded).toEqual([]);
    expect(mocks.failures).toBe(0);
    const behind = (await readCheckpoint(CHAIN))!.behind as Record<string, number>;
    expect(behind[`await:${w.executionId}:wait`]).toBe(earlier.block - 1);
    await release(CHAIN, HOLDER);

    const restarted = await passUntil((r) => r.waitsEnded.length > 0, { holder: `${HOLDER}-again` });
    await release(CHAIN, `${HOLDER}-again`);
    expect(restarted.flatMap((r) => r.waitsEnded).map((e) => [e.executionId, e.blockNumber])).toEqual([[w.executionId, earlier.block]]);
    expect(mocks.ended).toHaveLength(1);
    expect(mocks.ended[0]!.output.data).toMatchObject({ address: getAddress(y.contract), blockNumber: earlier.block });
    expect(await listedWaits()).toEqual([]);
  });

  it("queries too large for the entry lie in an item of their own, read by the watcher and removed with the entry; a wait 10 minutes past its deadline is dropped", async () => {
    await withCheckpoint();
    const owner = randomAddress().toLowerCase();
    const watched = randomAddress();
    const { contract, burst } = await deployBurst();
    const addresses = [...Array.from({ length: 99 }, randomAddress), contract];
    const big = newWait(owner, [{ addresses, topics: [TRANSFER, null, pad(watched)] }], await head());
    const stale = newWait(owner, [{ addresses: [contract], topics: [TRANSFER, null, pad(watched)] }], await head(), {
      deadline: Date.now() - 11 * 60_000,
    });
    await putAwaitWatch(big);
    await putAwaitWatch(stale);
    const listed = (await chainWatchItems(CHAIN)).awaits;
    expect(listed.find((w) => w.executionId === big.executionId)!.queries).toBeUndefined();
    expect(listed.find((w) => w.executionId === stale.executionId)!.queries).toEqual(stale.queries);
    const queriesItem = { pk: `EXEC#${big.executionId}`, sk: "AWAIT#wait#QUERIES" };
    expect((await runtime.db.send(new GetCommand({ TableName: runtime.config.tableName, Key: queriesItem }))).Item).toBeDefined();

    const log = await burst(watched, 1n);
    const results = await passUntil((r) => r.waitsEnded.length > 0);
    expect(results.flatMap((r) => r.waitsEnded).map((e) => [e.executionId, e.blockNumber])).toEqual([[big.executionId, log.block]]);
    expect(mocks.ended.map((e) => e.executionId)).toEqual([big.executionId]);
    expect(await listedWaits()).toEqual([]);
    expect((await runtime.db.send(new GetCommand({ TableName: runtime.config.tableName, Key: queriesItem }))).Item).toBeUndefined();
  });

  it("two owners' waits are served fairly: one owner's many request groups never delay the other's wait", async () => {
    await withCheckpoint();
    const a = randomAddress().toLowerCase();
    const b = randomAddress().toLowerCase();
    const limits = { requestsPerPass: 2, maxTopicValues: 1 };
    const start = await head();
    // Owner A: 10 waits whose queries cannot share a request (one topic value per position), so 10 groups.
    const aWaits = Array.from({ length: 10 }, () =>
      newWait(a, [{ addresses: [randomAddress()], topics: [TRANSFER, null, randomTopic()] }], start),
    );
    for (const w of aWaits) await putAwaitWatch(w);
    const watched = randomAddress();
    const { contract, burst } = await deployBurst();
    const bWait = newWait(b, [{ addresses: [contract], topics: [TRANSFER, null, pad(watched)] }], start);
    await putAwaitWatch(bWait);

    const log = await burst(watched, 1n);
    const passes = await passUntil((r) => r.waitsEnded.length > 0, { limits }, 20);
    const endedIn = passes.findIndex((r) => r.waitsEnded.some((e) => e.executionId === bWait.executionId));
    expect(endedIn, "B's wait ended").toBeGreaterThanOrEqual(0);
    // B's wait ended in the first pass that covered its log, while A's groups were still being asked.
    expect(passes.findIndex((r) => (r.to ?? 0) >= log.block)).toBe(endedIn);
    const aAsked = new Set(passes.slice(0, endedIn + 1).flatMap((r) => r.requests.filter((q) => q.owner === a).map((q) => q.group)));
    expect(aAsked.size).toBeLessThan(10);
    for (const r of passes) expect(r.requests.length).toBeLessThanOrEqual(2);

    // A's groups are all asked over later passes, within the same budget.
    const more = await passUntil(() => false, { limits }, 12);
    const allA = new Set([...passes, ...more].flatMap((r) => r.requests.filter((q) => q.owner === a).map((q) => q.group)));
    expect(allA.size).toBe(10);
    for (const w of aWaits) await deleteAwaitWatch(w.executionId, w.nodeId);
    expect(mocks.ended.map((e) => e.executionId)).toEqual([bWait.executionId]);
  });
});
