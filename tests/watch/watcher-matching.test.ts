/**
 * API.md §18.4: matching logs against queries never blocks request handling. Owner A's event workflows (topic-only
 * queries with an ABI and a condition, so every log is decoded and tested) match 10,000 logs emitted in one block
 * by one transaction; meanwhile owner B's requests over the real server (`GET /health` and an authenticated
 * `GET /workflows/{id}`) are timed back to back, and B's own event workflow must still fire. The watcher runs as
 * `npm start` runs it (startWatching in the server's process). The bus records hand-overs without running them, so
 * what is measured is the watcher (runs are the runner's budget, §18.4's third bullet).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { encodeEventTopics, pad, type Address, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { TRANSFER } from "../support/chain";
import { useTestRuntime } from "../support/runtime";
import { startTestServer, type TestServer } from "../support/server";
import { jsonClient } from "../support/client";
import { compileContract, deployTestToken, devnet, fundedAccount } from "../support/chain";
import { createServiceApp } from "../../shared/service/app";
import { setBus } from "../../shared/execution/bus/install";
import { type BusEvent, type EventBus } from "../../shared/execution/bus/event-bus";
import { readCheckpoint } from "../../shared/store/entities/checkpoint";
import { waitFor } from "../support/wait";
import { startWatching } from "../../shared/watch/loop";

let server: TestServer;
const published: { event: BusEvent; at: number }[] = [];
const { ownerWithWallet, createWorkflow } = jsonClient(() => server.url);

beforeAll(async () => {
  await useTestRuntime({ MIN_BLOCK_INTERVAL_S: "0", RATE_LIMIT_BURST: "100000", RATE_LIMIT_RPS: "10000" });
  const recording: EventBus = {
    publish: async (event) => void published.push({ event, at: performance.now() }),
    subscribe: () => () => undefined,
  };
  setBus(recording);
  server = await startTestServer(createServiceApp());
});

afterAll(async () => {
  await server?.close();
});

const PINGS = `// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;
contract Pings {
    event Ping(uint256 indexed id, uint256 value);
    function burst(uint256 n) external { for (uint256 i = 0; i < n; i++) emit Ping(i, i); }
}`;
const pingEvent = {
  type: "event",
  name: "Ping",
  inputs: [
    { name: "id", type: "uint256", indexed: true },
    { name: "value", type: "uint256", indexed: false },
  ],
} as const;
const burstAbi = [
  { type: "function", name: "burst", stateMutability: "nonpayable", inputs: [{ name: "n", type: "uint256" }], outputs: [] },
] as const;
const PING = encodeEventTopics({ abi: [pingEvent], eventName: "Ping" })[0];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

describe("matching 10,000 logs of one block", () => {
  it("owner A's topic-only queries match 10,000 logs in one block while owner B's requests keep their latency (p95 ≤ 300 ms, none over 1 s) and B's fire still happens", async () => {
    const a = await ownerWithWallet();
    const b = await ownerWithWallet();
    const { wallet } = await fundedAccount();
    const deployed = await devnet().client.waitForTransactionReceipt({
      hash: await wallet.deployContract({ abi: burstAbi, bytecode: compileContract("Pings", PINGS) }),
    });
    const pings = deployed.contractAddress!;
    const token = await deployTestToken();
    const watched = privateKeyToAccount(generatePrivateKey()).address;

    // A: three workflows, each a query with no address: every Ping log is fetched, decoded and tested.
    const aIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      aIds.push(
        (
          await createWorkflow(a, {
            trigger: {
              id: "pings",
              name: "pings",
              type: "event",
              config: {
                queries: [{ topics: [PING], contractAbi: [pingEvent], conditions: [{ fieldName: "value", operator: "gte", value: "0" }] }],
              },
            },
          })
        ).id,
      );
    }
    const bId = (
      await createWorkflow(b, {
        trigger: {
          id: "watch",
          name: "watch",
          type: "event",
          config: { queries: [{ addresses: [token.address], topics: [TRANSFER, null, pad(watched)] }] },
        },
      })
    ).id;

    const watcher = startWatching({ holder: "watcher-matching", pollMs: 500 });
    const samples: { at: number; ms: number; path: string }[] = [];
    let probing = true;
    const probe = (async () => {
      const paths = ["/health", `/workflows/${bId}`];
      for (let i = 0; probing; i++) {
        const path = paths[i % 2]!;
        const began = performance.now();
        const res = await fetch(server.url + path, { headers: path === "/health" ? {} : b.headers });
        await res.arrayBuffer();
        expect(res.status).toBe(200);
        samples.push({ at: began, ms: performance.now() - began, path });
        await sleep(20);
      }
    })();
    try {
      // The watcher's first pass sets the checkpoint at the head (B's requests sampled meanwhile); then passes follow it.
      const head = await devnet().client.getBlockNumber({ cacheTime: 0 });
      const atHead = async () => samples.length > 0 && Number((await readCheckpoint(devnet().chainId))?.block ?? -1) >= Number(head);
      await waitFor("the watcher's first pass", atHead);
      const loopDelay = monitorEventLoopDelay({ resolution: 5 });
      loopDelay.enable();
      const burstAt = performance.now();
      const hash = await wallet.writeContract({ address: pings, abi: burstAbi, functionName: "burst", args: [10_000n], gas: 25_000_000n });
      // The receipt holds 10,000 logs: only its block number is read here (eth_getTransactionByHash).
      let burstBlock: number | undefined;
      for (let i = 0; i < 200 && burstBlock === undefined; i++) {
        const tx = (await devnet().client.request({ method: "eth_getTransactionByHash", params: [hash] })) as {
          blockNumber: Hex | null;
        } | null;
        if (tx?.blockNumber) burstBlock = parseInt(tx.blockNumber, 16);
        else await sleep(50);
      }
      expect(burstBlock).toBeDefined();
      await token.mint(watched, 5n);

      const firesOf = (ids: string[]) => published.filter((p) => ids.includes(p.event.workflowId));
      for (let i = 0; i < 600 && (firesOf(aIds).length < 300 || firesOf([bId]).length < 1); i++) await sleep(100);
      const doneAt = performance.now();
      loopDelay.disable();
      await sleep(500);
      probing = false;
      await probe;

      expect(firesOf([bId])).toHaveLength(1);
      // maxEventsPerBlock (default 100) of 10,000 matches, per workflow.
      expect(firesOf(aIds)).toHaveLength(300);
      const before = samples
        .filter((s) => s.at < burstAt)
        .map((s) => s.ms)
        .sort((x, y) => x - y);
      const during = samples
        .filter((s) => s.at >= burstAt && s.at <= doneAt)
        .map((s) => s.ms)
        .sort((x, y) => x - y);
      console.log(
        `B's requests before the burst: ${before.length}, p50 ${quantile(before, 0.5).toFixed(1)} ms, max ${before[before.length - 1]!.toFixed(1)} ms; ` +
          `while A's 10,000 logs were matched and fired (${((doneAt - burstAt) / 1000).toFixed(1)} s): ${during.length}, p50 ${quantile(during, 0.5).toFixed(1)} ms, ` +
          `p99 ${quantile(during, 0.99).toFixed(1)} ms, max ${during[during.length - 1]!.toFixed(1)} ms; B fired ${(firesOf([bId])[0]!.at - burstAt).toFixed(0)} ms after the burst was sent; ` +
          `event loop delay of this process (server, watcher, test) meanwhile: p99 ${(loopDelay.percentile(99) / 1e6).toFixed(1)} ms, max ${(loopDelay.max / 1e6).toFixed(1)} ms`,
      );
      expect(during.length).toBeGreaterThan(20);
      // p95, not the worst: on this 2-core machine under the whole suite, one request in a hundred or two takes
      // 250-340 ms with no burst at all (the samples before it); a service the burst froze answers in seconds.
      expect(quantile(during, 0.95)).toBeLessThanOrEqual(300);
      expect(during[during.length - 1]!).toBeLessThanOrEqual(1_000);
    } finally {
      probing = false;
      await probe.catch(() => undefined);
      await watcher.stop();
    }
    // The burst block holds the 10,000 logs A's queries matched.
    const logs = (await devnet().client.request({
      method: "eth_getLogs",
      params: [{ address: pings as Address, topics: [PING] as Hex[], fromBlock: "earliest", toBlock: "latest" }],
    })) as unknown[];
    expect(logs.length).toBe(10_000);
  }, 180_000);
});
