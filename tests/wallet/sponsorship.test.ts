/**
 * Sponsored-gas budgets (API.md §18.5, shared/wallet/sponsorship.ts) against DynamoDB Local: concurrent reservations
 * from one and from two clients fill a budget exactly, hour boundaries and disagreeing clocks never let more through,
 * the 24-hour window, give-backs, the chain's shards, 0 and `unlimited`.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { ScanCommand } from "@aws-sdk/lib-dynamodb";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { Address } from "viem";
import { useTestRuntime } from "../support/runtime";
import { createRuntime } from "../../shared/runtime";
import { Keys } from "../../shared/store/item-keys";
import {
  CHAIN_SHARD_GAS,
  chainShards,
  reserveSponsoredGas,
  shardCap,
  sponsoredGasOf,
  type BudgetStore,
  type Budgets,
  type Sponsorship,
} from "../../shared/wallet/sponsorship";
import { type Runtime } from "../../shared/current-runtime";

const HOUR = 3_600_000;
const T0 = 480_000 * HOUR + 17 * 60_000; // some hour, 17 minutes in
let runtime: Runtime;
let other: Runtime; // a second client on the same table, as another process would have

beforeAll(async () => {
  runtime = await useTestRuntime();
  other = createRuntime({ config: runtime.config });
});

let chainCounter = 1000;
const newChain = () => ++chainCounter; // each test its own chain id, so counters never meet
const newOwner = (): Address => privateKeyToAccount(generatePrivateKey()).address;

function store(at: number | (() => number) = T0, client: Runtime = runtime): BudgetStore {
  return { db: client.db, tableName: client.config.tableName, now: typeof at === "number" ? () => at : at };
}

async function items(prefix: string) {
  const out = await runtime.db.send(new ScanCommand({ TableName: runtime.config.tableName, ConsistentRead: true }));
  return (out.Items ?? []).filter((i) => String(i.pk).startsWith(prefix));
}

/** Gas counted in every bucket of the counters under `prefix`. */
async function counted(prefix: string) {
  let total = 0;
  for (const item of await items(prefix)) for (const gas of Object.values(item.hours ?? {})) total += Number(gas);
  return total;
}

const ownerOnly = (perOwner: number): Budgets => ({ perOwner, perChain: Infinity });
const chainOnly = (perChain: number, chainShards?: number): Budgets => ({
  perOwner: Infinity,
  perChain,
  ...(chainShards ? { chainShards } : {}),
});

describe("one owner's budget", () => {
  it("grants exactly 10 of 20 concurrent reservations when the budget fits 10", async () => {
    const chainId = newChain();
    const owner = newOwner();
    const results = await Promise.all(
      Array.from({ length: 20 }, () => reserveSponsoredGas({ chainId, owner, gas: 1000n }, { budgets: ownerOnly(10_000), store: store() })),
    );
    expect(results.filter(Boolean)).toHaveLength(10);
    expect(await counted(`SPONSOR#${chainId}#`)).toBe(10_000);
    const [item] = await items(Keys.sponsoredGasOwner(chainId, owner).pk);
    expect(item).toMatchObject({
      sk: "GAS",
      type: "sponsoredGas",
      latest: Math.floor(T0 / HOUR),
      hours: { [Math.floor(T0 / HOUR)]: 10_000 },
    });
  });

  it("grants exactly 10 of 20 when the reservations come from two clients", async () => {
    const chainId = newChain();
    const owner = newOwner();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        reserveSponsoredGas({ chainId, owner, gas: 1000n }, { budgets: ownerOnly(10_000), store: store(T0, i % 2 ? other : runtime) }),
      ),
    );
    expect(results.filter(Boolean)).toHaveLength(10);
    expect(await counted(`SPONSOR#${chainId}#`)).toBe(10_000);
  });

  it("never lets more through at an hour boundary, with clocks on both sides of it", async () => {
    const chainId = newChain();
    const owner = newOwner();
    const boundary = Math.ceil(T0 / HOUR) * HOUR;
    // half the clients still in the old hour, half in the new one, all at once; then the same again
    for (let round = 0; round < 2; round++) {
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          reserveSponsoredGas(
            { chainId, owner, gas: 1000n },
            { budgets: ownerOnly(10_000), store: store(i % 2 ? boundary - 1 : boundary, i % 4 < 2 ? runtime : other) },
          ),
        ),
      );
      expect(results.filter(Boolean)).toHaveLength(round === 0 ? 10 : 0);
    }
    expect(await counted(`SPONSOR#${chainId}#`)).toBe(10_000);
  });

  it("a write that starts a new hour fails when the older bucket it counted grew after its read (no overspend)", async () => {
    const chainId = newChain();
    const owner = newOwner();
    const budgets = ownerOnly(3000);
    expect(await reserveSponsoredGas({ chainId, owner, gas: 1000n }, { budgets, store: store(T0 - HOUR) })).toBeDefined(); // h-1: 1000
    // B, on hour h, reads (1000 used: 2000 fits); before its write lands, A, still on hour h-1, adds 1000 to h-1.
    let written = false;
    const late: Runtime = {
      ...runtime,
      db: {
        send: async (command: object) => {
          if (!written && command.constructor.name === "UpdateCommand") {
            written = true;
            expect(await reserveSponsoredGas({ chainId, owner, gas: 1000n }, { budgets, store: store(T0 - HOUR) })).toBeDefined();
          }
          return runtime.db.send(command as never);
        },
      } as unknown as Runtime["db"],
    };
    expect(await reserveSponsoredGas({ chainId, owner, gas: 2000n }, { budgets, store: store(T0, late) })).toBeUndefined();
    expect(written).toBe(true);
    expect(await counted(`SPONSOR#${chainId}#`)).toBe(2000);
  });

  it("a clock behind the newest hour counts in it, so an older bucket never grows once a newer one exists", async () => {
    const chainId = newChain();
    const owner = newOwner();
    const budgets = ownerOnly(3000);
    const h = Math.floor(T0 / HOUR);
    expect(await reserveSponsoredGas({ chainId, owner, gas: 1000n }, { budgets, store: store(T0 - HOUR) })).toBeDefined(); // hour h-1
    expect(await reserveSponsoredGas({ chainId, owner, gas: 1000n }, { budgets, store: store(T0) })).toBeDefined(); // hour h
    expect(await reserveSponsoredGas({ chainId, owner, gas: 1000n }, { budgets, store: store(T0 - HOUR) })).toBeDefined(); // late: into h
    expect(await reserveSponsoredGas({ chainId, owner, gas: 1n }, { budgets, store: store(T0 - HOUR) })).toBeUndefined();
    const [item] = await items(Keys.sponsoredGasOwner(chainId, owner).pk);
    expect(item!.hours).toEqual({ [h - 1]: 1000, [h]: 2000 });
  });

  it("counts the last 24 hours: full for 23 hours more, room again in the 25th, old buckets pruned", async () => {
    const chainId = newChain();
    const owner = newOwner();
    const budgets = ownerOnly(5000);
    expect(await reserveSponsoredGas({ chainId, owner, gas: 5000n }, { budgets, store: store(T0) })).toBeDefined();
    expect(await reserveSponsoredGas({ chainId, owner, gas: 1n }, { budgets, store: store(T0 + 23 * HOUR) })).toBeUndefined();
    const later = T0 + 24 * HOUR;
    expect(await reserveSponsoredGas({ chainId, owner, gas: 4000n }, { budgets, store: store(later) })).toBeDefined();
    const [item] = await items(Keys.sponsoredGasOwner(chainId, owner).pk);
    expect(item!.hours).toEqual({ [Math.floor(later / HOUR)]: 4000 });
    expect(item!.expiresAt).toBe((Math.floor(later / HOUR) + 25) * 3600);
  });

  it("an operation larger than the budget is refused without a write", async () => {
    const chainId = newChain();
    expect(
      await reserveSponsoredGas({ chainId, owner: newOwner(), gas: 10_001n }, { budgets: ownerOnly(10_000), store: store() }),
    ).toBeUndefined();
    expect(await items(`SPONSOR#${chainId}#`)).toEqual([]);
  });
});

describe("giving back", () => {
  it("returns the gas once, making room for another operation", async () => {
    const chainId = newChain();
    const owner = newOwner();
    const budgets = { perOwner: 3000, perChain: 3000 };
    const held: Sponsorship[] = [];
    for (let i = 0; i < 3; i++) held.push((await reserveSponsoredGas({ chainId, owner, gas: 1000n }, { budgets, store: store() }))!);
    expect(held.every(Boolean)).toBe(true);
    expect(await reserveSponsoredGas({ chainId, owner, gas: 1000n }, { budgets, store: store() })).toBeUndefined();
    await held[0]!.giveBack();
    await held[0]!.giveBack(); // a second call returns nothing more
    expect(await counted(Keys.sponsoredGasOwner(chainId, owner).pk)).toBe(2000);
    expect(await counted(`SPONSOR#${chainId}#SHARD#`)).toBe(2000);
    expect(await reserveSponsoredGas({ chainId, owner, gas: 1000n }, { budgets, store: store() })).toBeDefined();
    expect(await reserveSponsoredGas({ chainId, owner, gas: 1000n }, { budgets, store: store() })).toBeUndefined();
  });

  it("gives back into the bucket it came from, and leaves a bucket already out of the window alone", async () => {
    const chainId = newChain();
    const owner = newOwner();
    const budgets = ownerOnly(10_000);
    const first = (await reserveSponsoredGas({ chainId, owner, gas: 1000n }, { budgets, store: store(T0) }))!;
    const second = (await reserveSponsoredGas({ chainId, owner, gas: 2000n }, { budgets, store: store(T0 + HOUR) }))!;
    await first.giveBack();
    const [item] = await items(Keys.sponsoredGasOwner(chainId, owner).pk);
    expect(item!.hours).toEqual({ [Math.floor(T0 / HOUR)]: 0, [Math.floor(T0 / HOUR) + 1]: 2000 });
    await reserveSponsoredGas({ chainId, owner, gas: 1n }, { budgets, store: store(T0 + 26 * HOUR) }); // prunes both
    await second.giveBack();
    const [after] = await items(Keys.sponsoredGasOwner(chainId, owner).pk);
    expect(after!.hours).toEqual({ [Math.floor(T0 / HOUR) + 26]: 1 });
  });

  it("an owner's reservation is given back when the chain refuses, and an owner past its budget never touches the chain", async () => {
    const chainId = newChain();
    const owner = newOwner();
    // the chain is full
    expect(
      await reserveSponsoredGas(
        { chainId, owner: newOwner(), gas: 5000n },
        { budgets: { perOwner: 5000, perChain: 5000 }, store: store() },
      ),
    ).toBeDefined();
    expect(
      await reserveSponsoredGas({ chainId, owner, gas: 1000n }, { budgets: { perOwner: 5000, perChain: 5000 }, store: store() }),
    ).toBeUndefined();
    expect(await counted(Keys.sponsoredGasOwner(chainId, owner).pk)).toBe(0);
    // an owner past its own budget: the chain's counter is not read or written
    const chain2 = newChain();
    expect(
      await reserveSponsoredGas({ chainId: chain2, owner, gas: 1000n }, { budgets: { perOwner: 1000, perChain: 10_000 }, store: store() }),
    ).toBeDefined();
    const shardsBefore = await items(`SPONSOR#${chain2}#SHARD#`);
    expect(
      await reserveSponsoredGas({ chainId: chain2, owner, gas: 1000n }, { budgets: { perOwner: 1000, perChain: 10_000 }, store: store() }),
    ).toBeUndefined();
    expect(await items(`SPONSOR#${chain2}#SHARD#`)).toEqual(shardsBefore);
  });
});

describe("the chain's budget, in shards", () => {
  it("splits the cap exactly, one shard per 250,000,000 gas, at most 16", () => {
    expect(chainShards(5_000_000_000)).toBe(16);
    expect(chainShards(CHAIN_SHARD_GAS * 3 + 1)).toBe(3);
    expect(chainShards(1_000_000)).toBe(1);
    expect(chainShards(Infinity)).toBe(1);
    for (const [cap, shards] of [
      [5_000_000_000, 16],
      [10_007, 5],
      [3, 5],
    ] as const) {
      const shares = Array.from({ length: shards }, (_, s) => shardCap(cap, shards, s));
      expect(shares.reduce((a, b) => a + b)).toBe(cap);
      expect(Math.max(...shares) - Math.min(...shares)).toBeLessThanOrEqual(1);
    }
  });

  it("grants exactly 10 of 20 concurrent reservations of different owners, from two clients, spread over the shards", async () => {
    const chainId = newChain();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        reserveSponsoredGas(
          { chainId, owner: newOwner(), gas: 1000n },
          { budgets: chainOnly(10_000, 5), store: store(T0, i % 2 ? other : runtime) },
        ),
      ),
    );
    expect(results.filter(Boolean)).toHaveLength(10);
    const shards = await items(`SPONSOR#${chainId}#SHARD#`);
    expect(shards.map((s) => s.pk).sort()).toEqual([0, 1, 2, 3, 4].map((s) => Keys.sponsoredGasChain(chainId, s).pk));
    for (const shard of shards) expect(Object.values(shard.hours)).toEqual([2000]);
    expect(await items(`SPONSOR#${chainId}#OWNER#`)).toEqual([]); // unlimited per owner: no owner counters
  });

  it("fills every shard before refusing: a full shard sends the reservation to one with room", async () => {
    const chainId = newChain();
    const budgets = chainOnly(4000, 4);
    const granted: Sponsorship[] = [];
    for (let i = 0; i < 4; i++)
      granted.push((await reserveSponsoredGas({ chainId, owner: newOwner(), gas: 1000n }, { budgets, store: store() }))!);
    expect(granted.every(Boolean)).toBe(true);
    expect(await reserveSponsoredGas({ chainId, owner: newOwner(), gas: 1000n }, { budgets, store: store() })).toBeUndefined();
    await granted[2]!.giveBack();
    expect(await reserveSponsoredGas({ chainId, owner: newOwner(), gas: 1000n }, { budgets, store: store() })).toBeDefined();
  });
});

describe("0 and unlimited", () => {
  it("0 per owner or per chain: never granted, nothing read or written", async () => {
    const chainId = newChain();
    const owner = newOwner();
    for (const budgets of [
      { perOwner: 0, perChain: Infinity },
      { perOwner: Infinity, perChain: 0 },
      { perOwner: 0, perChain: 10_000 },
      { perOwner: 10_000, perChain: 0 },
    ]) {
      expect(await reserveSponsoredGas({ chainId, owner, gas: 1n }, { budgets, store: store() })).toBeUndefined();
    }
    expect(await items(`SPONSOR#${chainId}#`)).toEqual([]);
  });

  it("unlimited on both: always granted without a table write", async () => {
    const chainId = newChain();
    const owner = newOwner();
    const unlimited = { perOwner: Infinity, perChain: Infinity };
    const results = await Promise.all(
      Array.from({ length: 20 }, () => reserveSponsoredGas({ chainId, owner, gas: 50_000_000n }, { budgets: unlimited, store: store() })),
    );
    expect(results.every(Boolean)).toBe(true);
    await results[0]!.giveBack();
    expect(await items(`SPONSOR#${chainId}#`)).toEqual([]);
  });
});

describe("the amount", () => {
  it("is every gas limit of the operation, the paymaster's included", () => {
    expect(
      sponsoredGasOf({
        callGasLimit: 1n,
        verificationGasLimit: 20n,
        preVerificationGas: 300n,
        paymasterVerificationGasLimit: 4000n,
        paymasterPostOpGasLimit: 50_000n,
      }),
    ).toBe(54_321n);
  });
});
