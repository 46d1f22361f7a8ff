/**
 * API.md §18.4, event triggers: one owner's queries cannot stop or delay another owner's fires.
 *
 * Owner A's 1,000 event workflows name 1,000,000 addresses (10 queries of 100 each, the most a trigger may name,
 * §8.3.5; 1,000 active workflows is the per-owner cap, §4.1): watch entries written through the registry, as
 * create does. Owner B has one event workflow, created over HTTP. The watcher runs as the polling loop does (a
 * pass, then the poll interval); B's mint must fire within a few blocks while A's 1,000 bounded requests are
 * spread over passes. And the packing rules themselves (plan.ts): bounds, shapes, owners.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import { ulid } from "ulid";
import { pad, type Address, type Hex } from "viem";
import { TRANSFER } from "../support/chain";
import { useTestRuntime } from "../support/runtime";
import { startTestServer, type TestServer } from "../support/server";
import { jsonClient, type Json, type Owner } from "../support/client";
import { deployTestToken, devnet } from "../support/chain";
import { createServiceApp } from "../../shared/service/app";
import { setBus } from "../../shared/execution/bus/install";
import { createInProcessBus, type InProcessBus } from "../../shared/execution/bus/in-process";
import { withRunner } from "../../shared/execution/runner";
import { watch, watchersOf, type ChainTrigger, type WatchEntry } from "../../shared/workflow/watch-registry";
import { planOwner } from "../../shared/watch/plan";
import { watchChain } from "../../shared/watch/pass";
import { type PassResult } from "../../shared/watch/types";

const CHAIN = 31337;
const HOLDER = "watcher-isolation";
const POLL_MS = 500;
let server: TestServer;
let bus: InProcessBus;
const { call, ownerWithWallet } = jsonClient(() => server.url);

beforeAll(async () => {
  await useTestRuntime({ MIN_BLOCK_INTERVAL_S: "0", RATE_LIMIT_BURST: "100000", RATE_LIMIT_RPS: "10000" });
  bus = setBus(withRunner(createInProcessBus()));
  server = await startTestServer(createServiceApp());
});

afterAll(async () => {
  await bus?.idle();
  await server?.close();
});

const randomAddress = () => `0x${randomBytes(20).toString("hex")}` as Address;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const code = { id: "after", name: "after", type: "customCode", config: { source: "return 1" } };

async function forEachLimited<T>(items: readonly T[], limit: number, run: (item: T) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) await run(items[next++]!);
    }),
  );
}

/** The filter bounds of §18.4 hold for a request. */
function withinBounds(filter: { address?: Hex[]; topics?: (Hex[] | null)[] }) {
  return (
    (filter.address?.length ?? 0) <= 1000 &&
    (filter.topics?.length ?? 0) <= 4 &&
    (filter.topics ?? []).every((t) => t === null || (t.length >= 1 && t.length <= 10))
  );
}

describe("one owner's million addresses", () => {
  it("owner A's 1,000 workflows naming 1,000,000 addresses get their bounded requests over many passes; owner B's event workflow fires within a few blocks", async () => {
    const b: Owner = await ownerWithWallet();
    const token = await deployTestToken();
    const watched = randomAddress();
    const created = await call(b, "POST", "/workflows", {
      smartWalletAddress: b.wallet,
      trigger: {
        id: "watch",
        name: "watch",
        type: "event",
        config: { queries: [{ addresses: [token.address], topics: [TRANSFER, null, pad(watched)] }] },
      },
      nodes: [code],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const bWorkflow = created.body.id as string;

    // Owner A: 1,000 entries × 10 queries × 100 addresses, all distinct.
    const ownerA = randomAddress().toLowerCase();
    const writeStart = performance.now();
    const ids = Array.from({ length: 1000 }, () => ulid());
    await forEachLimited(ids, 16, async (id) => {
      const queries = Array.from({ length: 10 }, () => ({ addresses: Array.from({ length: 100 }, randomAddress), topics: [TRANSFER] }));
      await watch(
        {
          id,
          chainId: CHAIN,
          owner: ownerA,
          trigger: { id: "e", name: "e", type: "event", config: { queries } } as unknown as ChainTrigger,
        },
        Date.now(),
      );
    });
    const writeMs = performance.now() - writeStart;
    const entries = await watchersOf(CHAIN);
    expect(entries).toHaveLength(1001);
    expect(
      entries
        .filter((e) => e.owner === ownerA)
        .flatMap((e) => (e.trigger.type === "event" ? e.trigger.config.queries : []))
        .reduce((n, q) => n + (q.addresses?.length ?? 0), 0),
    ).toBe(1_000_000);

    expect((await watchChain(CHAIN, { holder: HOLDER })).status).toBe("started");

    // The polling loop: a pass (waiting at most the poll interval for its answers), then the poll interval.
    const passes: { began: number; ms: number; r: PassResult }[] = [];
    let stop = false;
    const loop = (async () => {
      while (!stop) {
        const began = performance.now();
        const r = await watchChain(CHAIN, { holder: HOLDER, waitMs: POLL_MS });
        passes.push({ began, ms: performance.now() - began, r });
        await sleep(POLL_MS);
      }
    })();
    const firedB = () => passes.find((p) => p.r.fired.some((f) => f.workflowId === bWorkflow));
    const aGroups = new Set<string>();
    const aRequested = () => {
      aGroups.clear();
      for (const p of passes) for (const q of p.r.requests) if (q.owner === ownerA) aGroups.add(q.group);
      return aGroups.size;
    };
    try {
      // A's queries are packed in the background: wait until its requests have started.
      for (let i = 0; i < 120 && aRequested() === 0; i++) await sleep(250);
      expect(aRequested()).toBeGreaterThan(0);

      await token.mint(watched, 42n);
      const mintedAt = performance.now();
      const mintBlock = Number(await devnet().client.getBlockNumber({ cacheTime: 0 }));
      for (let i = 0; i < 100 && !firedB(); i++) await sleep(100);
      const fired = firedB();
      expect(fired, "B's fire").toBeDefined();
      const latencyMs = fired!.began + fired!.ms - mintedAt;
      const blocksLater = fired!.r.to! - mintBlock;
      console.log(
        `B fired ${latencyMs.toFixed(0)} ms after its mint, ${blocksLater} block(s) later (poll ${POLL_MS} ms, anvil block time 2 s)`,
      );
      expect(blocksLater).toBeLessThanOrEqual(3);
      expect(latencyMs).toBeLessThan(2000 + POLL_MS + 2500);

      // Keep going until every one of A's groups has been asked once.
      for (let i = 0; i < 600 && aRequested() < 1000; i++) await sleep(250);
    } finally {
      stop = true;
      await loop;
    }

    const processed = passes.filter((p) => p.r.status === "processed");
    const aPerPass = processed.map((p) => p.r.requests.filter((q) => q.owner === ownerA).length);
    const passesWithA = aPerPass.filter((n) => n > 0).length;
    const durations = processed.map((p) => p.ms).sort((x, y) => x - y);
    console.log(
      `entries written in ${writeMs.toFixed(0)} ms; A: ${aRequested()} groups asked over ${passesWithA} passes (at most ${Math.max(...aPerPass)} per pass); ` +
        `pass time p50 ${durations[Math.floor(durations.length / 2)]!.toFixed(0)} ms, max ${durations[durations.length - 1]!.toFixed(0)} ms over ${processed.length} passes`,
    );
    expect(aRequested()).toBeGreaterThanOrEqual(1000);
    // More passes, not longer passes: at most the per-pass budget, B's request never crowded out.
    expect(Math.max(...aPerPass)).toBeLessThanOrEqual(32);
    expect(passesWithA).toBeGreaterThanOrEqual(30);
    for (const p of processed) for (const q of p.r.requests) expect(withinBounds(q.filter)).toBe(true);
    // A's requests never carry B's query, and B's never A's.
    for (const p of processed)
      for (const q of p.r.requests) if (q.owner === ownerA) expect(q.filter.address).not.toContain(token.address.toLowerCase());
    const runs = await call(b, "GET", `/workflows/${bWorkflow}/executions`);
    await bus.idle();
    expect((runs.body.data as Json[]).length).toBe(1);
  }, 240_000);
});

describe("request groups (plan.ts)", () => {
  const entry = (owner: string, queries: Json[]): WatchEntry => ({
    workflowId: ulid(),
    chainId: CHAIN,
    owner,
    since: 0,
    v: 3,
    trigger: { id: "t", name: "t", type: "event", config: { queries } } as unknown as ChainTrigger,
  });
  const limits = { maxAddresses: 1000, maxTopicValues: 10 };
  const topic = () => `0x${randomBytes(32).toString("hex")}`;

  it("at most 1,000 addresses and 10 values per topic position per request; queries without addresses never share a request with queries that have some", async () => {
    const many = Array.from({ length: 25 }, () =>
      entry(
        "0xa",
        Array.from({ length: 10 }, () => ({ addresses: Array.from({ length: 100 }, randomAddress), topics: [TRANSFER] })),
      ),
    );
    const topicOnly = Array.from({ length: 3 }, () => entry("0xa", [{ topics: [TRANSFER] }, { topics: [topic(), null, topic()] }]));
    const distinctTopics = Array.from({ length: 25 }, () =>
      entry("0xa", [{ addresses: [randomAddress()], topics: [TRANSFER, null, topic()] }]),
    );
    const plan = await planOwner("0xa", [...many, ...topicOnly, ...distinctTopics], limits, new Set(), new Map());

    for (const g of plan.groups) expect(withinBounds(g.filter as never)).toBe(true);
    const addressed = plan.groups.filter((g) => g.filter.address);
    const open = plan.groups.filter((g) => !g.filter.address);
    // 25,000 addresses of one shape: 25 full requests; 25 distinct third topics: 3 requests of at most 10.
    expect(addressed.filter((g) => g.filter.topics?.length === 1).map((g) => g.addressCount)).toEqual(Array(25).fill(1000));
    expect(
      addressed
        .filter((g) => g.filter.topics?.length === 3)
        .map((g) => g.filter.topics![2]!.length)
        .sort(),
    ).toEqual([10, 10, 5]);
    // Topic-only queries: never merged into an addressed request; two shapes, two requests.
    expect(open).toHaveLength(2);
    for (const g of open) expect(g.members.every((m) => m.addresses === undefined)).toBe(true);
    for (const g of addressed) expect(g.members.every((m) => m.addresses !== undefined)).toBe(true);
    expect(open.find((g) => g.filter.topics!.length === 1)!.filter.topics).toEqual([[TRANSFER.toLowerCase()]]);
    // Every query is a member of exactly one group.
    const keys = plan.groups.flatMap((g) => g.members.map((m) => m.key));
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys).toHaveLength(250 + 6 + 25);
  });

  it("a provider's lower address bound cuts a query into parts; a group refused for one block is cut in halves", async () => {
    const big = entry("0xb", [{ addresses: Array.from({ length: 100 }, randomAddress), topics: [TRANSFER] }]);
    const plan = await planOwner("0xb", [big], { maxAddresses: 30, maxTopicValues: 10 }, new Set(), new Map());
    expect(plan.groups.map((g) => g.addressCount)).toEqual([30, 30, 30, 10]);
    expect(plan.members.get(big.workflowId)!.map((m) => m.key)).toEqual([0, 1, 2, 3].map((p) => `${big.workflowId}:0:${p}`));

    const four = Array.from({ length: 4 }, () => entry("0xb", [{ addresses: [randomAddress()], topics: [TRANSFER] }]));
    const whole = await planOwner("0xb", four, limits, new Set(), new Map());
    expect(whole.groups).toHaveLength(1);
    const halves = await planOwner("0xb", four, limits, new Set([whole.groups[0]!.key]), new Map());
    expect(halves.groups.map((g) => g.members.length)).toEqual([2, 2]);
  });
});
