/**
 * API.md §18.4, the watcher against a provider that refuses: requests over N addresses, ranges over M blocks and
 * answers over K results are refused the way hosted providers refuse them (tests/support/rpc-proxy.ts in front of
 * the devnet); the watcher halves ranges and splits requests, and every fire is still delivered exactly once. A
 * request that always fails delays only the workflows whose queries it carries (its other queries are split away
 * from it), is retried with backoff, and is logged once per backoff step, not once per pass.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createPublicClient, http, pad, parseAbiItem, zeroAddress, type Address, type PublicClient } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { TRANSFER } from "../support/chain";
import { burstFunction } from "../support/abis";
import { useTestRuntime } from "../support/runtime";
import { startTestServer, type TestServer } from "../support/server";
import { jsonClient, type Json, type Owner } from "../support/client";
import { compileContract, deployTestToken, devnet, fundedAccount } from "../support/chain";
import { startRpcProxy, type RpcProxy } from "../support/rpc-proxy";
import { createServiceApp } from "../../shared/service/app";
import { setBus } from "../../shared/execution/bus/install";
import { type EventBus } from "../../shared/execution/bus/event-bus";
import { log } from "../../shared/log";
import { release } from "../../shared/watch/checkpoint";
import { watchChain } from "../../shared/watch/pass";
import { type PassOptions, type PassResult } from "../../shared/watch/types";

const CHAIN = 31337;
let server: TestServer;
const proxies: RpcProxy[] = [];
const { call, ownerWithWallet, createWorkflow } = jsonClient(() => server.url);

beforeAll(async () => {
  await useTestRuntime({ MIN_BLOCK_INTERVAL_S: "0", RATE_LIMIT_BURST: "100000", RATE_LIMIT_RPS: "10000" });
  // Executions are claimed (and listed) but not run: what is checked here is which fires were claimed.
  const quiet: EventBus = { publish: async () => undefined, subscribe: () => () => undefined };
  setBus(quiet);
  server = await startTestServer(createServiceApp());
});

afterAll(async () => {
  for (const p of proxies) await p.close();
  await server?.close();
});

const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const transfersTo = (contract: Address, to: Address) => ({
  id: "watch",
  name: "watch",
  type: "event",
  config: { queries: [{ addresses: [contract], topics: [TRANSFER, null, pad(to)] }] },
});

const BURSTS = `// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;
contract Bursts {
    event Transfer(address indexed from, address indexed to, uint256 value);
    function burst(address to, uint256 n) external { for (uint256 i = 1; i <= n; i++) emit Transfer(address(0), to, i); }
    function burst2(address a, address b, uint256 n) external {
        for (uint256 i = 1; i <= n; i++) { emit Transfer(address(0), a, 100 + i); emit Transfer(address(0), b, 200 + i); }
    }
}`;
const burstsAbi = [burstFunction, parseAbiItem("function burst2(address a, address b, uint256 n)")] as const;

async function executionsOf(owner: Owner, id: string): Promise<Json[]> {
  const res = await call(owner, "GET", `/workflows/${id}/executions?limit=200`);
  expect(res.status).toBe(200);
  return res.body.data as Json[];
}

const clientFor = (proxy: RpcProxy) => createPublicClient({ transport: http(proxy.url) }) as PublicClient;
const firedFor = (passes: PassResult[], id: string) => passes.flatMap((p) => p.fired.filter((f) => f.workflowId === id));

describe("a provider that refuses", () => {
  it("requests over 2 addresses, ranges over 4 blocks and answers over 10 results are refused: ranges halved, requests split, every fire delivered exactly once", async () => {
    const proxy = await startRpcProxy(devnet().rpcUrl, { maxAddresses: 2, maxRange: 4, maxResults: 10 });
    proxies.push(proxy);
    const options: PassOptions = { holder: "refusals", client: clientFor(proxy) };
    const c = await ownerWithWallet();
    const tokens = [await deployTestToken(), await deployTestToken(), await deployTestToken(), await deployTestToken()];
    const { wallet } = await fundedAccount();
    const bursts = (
      await devnet().client.waitForTransactionReceipt({
        hash: await wallet.deployContract({ abi: burstsAbi, bytecode: compileContract("Bursts", BURSTS) }),
      })
    ).contractAddress!;
    const w = randomAddress();
    const w1 = randomAddress();
    const w2 = randomAddress();
    // The token workflows: one shape (an address, topics 0 and 2 set), packed into one request of 4 addresses until
    // the provider says 2. The Bursts workflows set topic 1 as well (another shape): one request of theirs, one address.
    const onTokens = [];
    for (const t of tokens) onTokens.push((await createWorkflow(c, { trigger: transfersTo(t.address, w) })).id);
    const mintsTo = (to: Address) => ({
      id: "watch",
      name: "watch",
      type: "event",
      config: { queries: [{ addresses: [bursts], topics: [TRANSFER, pad(zeroAddress), pad(to)] }] },
    });
    const toW1 = (await createWorkflow(c, { trigger: mintsTo(w1) })).id;
    const toW2 = (await createWorkflow(c, { trigger: mintsTo(w2) })).id;
    expect((await watchChain(CHAIN, options)).status).toBe("started");
    try {
      // No pass while more than 4 blocks are mined: 4 mints, 2 blocks of 6 logs each (12 over 2 blocks), then one
      // block of 14 logs for the two Bursts workflows (one request of theirs: more than 10 even for one block).
      for (const t of tokens) await t.mint(w, 3n);
      const send = async (fn: "burst" | "burst2", args: readonly unknown[]) =>
        devnet().client.waitForTransactionReceipt({
          hash: await wallet.writeContract({ address: bursts, abi: burstsAbi, functionName: fn, args: args as never }),
        });
      await send("burst", [w1, 6n]);
      await send("burst", [w2, 6n]);
      await devnet().testClient.mine({ blocks: 2 });
      await send("burst2", [w1, w2, 7n]);

      const passes: PassResult[] = [];
      for (let i = 0; i < 40; i++) {
        const r = await watchChain(CHAIN, options);
        passes.push(r);
        if (r.status === "idle" || (r.requests.length === 0 && r.carried === 0 && r.waiting === 0 && i > 0)) break;
      }
      const outcomes = proxy.getLogs.map((g) => g.outcome);
      console.log(
        `${passes.length} passes; eth_getLogs answered: ${["ok", "addresses", "range", "results"].map((o) => `${o} ${outcomes.filter((x) => x === o).length}`).join(", ")}`,
      );
      expect(outcomes).toContain("addresses");
      expect(outcomes).toContain("range");
      expect(outcomes).toContain("results");
      // A single block refused for its results: the two queries asked apart afterwards.
      const single = proxy.getLogs.find((g) => g.outcome === "results" && g.from === g.to);
      expect(single).toBeDefined();
      expect(proxy.getLogs.some((g) => g.outcome === "ok" && g.from <= single!.from && g.to >= single!.from && g.results === 7)).toBe(true);
      for (const g of proxy.getLogs.filter((x) => x.outcome === "ok")) {
        expect(g.addresses.length).toBeLessThanOrEqual(2);
        expect(g.to - g.from + 1).toBeLessThanOrEqual(4);
      }

      // Exactly once: one fire per mint, 6 + 7 per Bursts workflow, each fire id once, each claimed once.
      for (const id of onTokens) expect(firedFor(passes, id)).toHaveLength(1);
      for (const id of [toW1, toW2]) expect(firedFor(passes, id)).toHaveLength(13);
      const ids = passes.flatMap((p) => p.fired.map((f) => f.fireId));
      expect(new Set(ids).size).toBe(ids.length);
      for (const id of onTokens) expect(await executionsOf(c, id)).toHaveLength(1);
      for (const id of [toW1, toW2]) expect(await executionsOf(c, id)).toHaveLength(13);

      // Nothing more to do: another pass claims nothing again.
      await devnet().testClient.mine({ blocks: 1 });
      const again = await watchChain(CHAIN, options);
      expect(again.fired).toEqual([]);
      expect(again.duplicates).toEqual([]);
    } finally {
      await release(CHAIN, options.holder);
    }
    for (const id of [...onTokens, toW1, toW2]) expect((await call(c, "DELETE", `/workflows/${id}`)).status).toBe(204);
  }, 180_000);

  it("a request that always fails delays only its own workflow (its other query is split away), retried with backoff and logged once per attempt, not per pass; recovered, its missed match fires once", async () => {
    const bad = await deployTestToken();
    const good = await deployTestToken();
    const other = await deployTestToken();
    const proxy = await startRpcProxy(devnet().rpcUrl, { failAddresses: new Set([bad.address.toLowerCase()]) });
    proxies.push(proxy);
    const options: PassOptions = { holder: "failing", client: clientFor(proxy), limits: { backoffBaseMs: 200 } };
    const d = await ownerWithWallet();
    const b = await ownerWithWallet();
    const w = randomAddress();
    const wb = randomAddress();
    const dBad = (await createWorkflow(d, { trigger: transfersTo(bad.address, w) })).id;
    const dGood = (await createWorkflow(d, { trigger: transfersTo(good.address, w) })).id; // same shape and topics: one request with dBad's
    const bId = (await createWorkflow(b, { trigger: transfersTo(other.address, wb) })).id;
    try {
      const warn = vi.spyOn(log, "warn");
      let warnings: Parameters<typeof log.warn>[] = [];
      const passes: PassResult[] = [];
      try {
        passes.push(await watchChain(CHAIN, options)); // at the head (the checkpoint is the previous test's)
        await bad.mint(w, 1n);
        await good.mint(w, 2n);
        await other.mint(wb, 3n);
        const began = Date.now();
        while (Date.now() - began < 4_000) {
          passes.push(await watchChain(CHAIN, options));
          await sleep(100);
        }
      } finally {
        warnings = [...warn.mock.calls];
        warn.mockRestore();
      }
      const failedRequests = proxy.getLogs.filter((g) => g.outcome === "failed").length;
      const failureLogs = warnings.filter(([message]) => message.startsWith("watcher request failed"));
      console.log(
        `${passes.length} passes in 4 s; ${failedRequests} failed requests; ${failureLogs.length} warnings: attempts ${failureLogs.map(([, f]) => `${f!.attempt}(+${f!.retryInMs} ms)`).join(" ")}`,
      );
      // B: fired in the first pass after its mint; dGood: once its query was split from dBad's; dBad: not yet.
      expect(firedFor(passes.slice(0, 2), bId)).toHaveLength(1);
      expect(firedFor(passes, dGood)).toHaveLength(1);
      expect(firedFor(passes, dBad)).toHaveLength(0);
      // One warning per failed attempt, a handful in 4 s while the passes were dozens; no other warning at all.
      expect(failureLogs).toHaveLength(failedRequests);
      expect(warnings).toHaveLength(failedRequests);
      expect(passes.length).toBeGreaterThanOrEqual(20);
      expect(failedRequests).toBeGreaterThanOrEqual(3);
      expect(failedRequests).toBeLessThanOrEqual(10);
      // The backoff grows: each failure of one group waits twice as long as the one before.
      const waits = failureLogs.map(([, f]) => f!.retryInMs as number);
      expect(Math.max(...waits)).toBeGreaterThanOrEqual(800);
      // Short lines: the provider's words, never the request.
      for (const [, fields] of failureLogs) expect(JSON.stringify(fields).length).toBeLessThan(1000);

      // The provider recovers: dBad's missed match fires, once.
      proxy.rules.failAddresses = undefined;
      const after: PassResult[] = [];
      for (let i = 0; i < 60 && firedFor(after, dBad).length === 0; i++) {
        after.push(await watchChain(CHAIN, options));
        await sleep(100);
      }
      expect(firedFor(after, dBad)).toHaveLength(1);
      await devnet().testClient.mine({ blocks: 1 });
      after.push(await watchChain(CHAIN, options));
      expect(firedFor(after, dBad)).toHaveLength(1);
      for (const id of [dBad, dGood]) expect(await executionsOf(d, id)).toHaveLength(1);
      expect(await executionsOf(b, bId)).toHaveLength(1);
    } finally {
      await release(CHAIN, options.holder);
    }
  }, 120_000);
});
