/**
 * Sponsored-gas budgets (API.md §18.5). A chain's paymaster sponsors an owner's user operations up to
 * `sponsored_gas_per_owner_per_day` and all owners' together up to `sponsored_gas_per_chain_per_day`, each over the
 * last 24 hours, counted at the gas limits the operation is sponsored for. prepareOperation (operation.ts) reserves
 * an operation's gas here before the paymaster signs it; an operation that is then never sent gives it back.
 *
 * Storage: one item per counter (Keys.sponsoredGasOwner, Keys.sponsoredGasChain) holding the hourly buckets of the
 * last 24 hours as a map `hours` (hour number → gas) and `latest`, the newest hour written. A reservation reads the
 * item (consistent read), takes the hour h = max(its clock's hour, latest), sums the buckets of h-23..h, and, when
 * the amount fits, adds it to bucket h with one conditional update:
 *
 *   latest = <latest as read>  AND  (bucket h absent OR bucket h <= cap - <the other 23 buckets as read> - amount)
 *   [starting a newer hour h: AND bucket <latest> = <its value as read>]
 *
 * Why that never overspends, whatever runs concurrently in how many processes:
 *   - Only bucket h can grow. A write to an older bucket j needs `latest = j` at the moment it lands (its own
 *     condition), so once anyone wrote hour h no bucket before h grows again; and a write for h made from a read that
 *     saw an older `latest` fails on `latest` and reads again. Until then bucket `latest` (older than h) may still
 *     grow, by writers whose clock is on that hour: a write that starts hour h therefore also pins that bucket to its
 *     value as read. Give-backs and pruning only lower the other buckets.
 *     So the 23 other buckets as read are an upper bound of their value when the write lands.
 *   - Bucket h itself is checked by DynamoDB at the moment of the write, against the value it has then.
 *   Hence after every successful write, the buckets of h-23..h sum to at most the cap. (With 24 separate bucket
 *   items this would not hold at an hour boundary: a writer still on hour h-1, or delayed, can add to bucket h-1
 *   after a writer on hour h read it, and the two checks together allow more than the cap. Keeping the buckets in
 *   one item lets one condition pin them.) Clocks that disagree only move the window: a process whose clock is
 *   behind writes into `latest`; one ahead starts the next hour a little early for everyone.
 *   A failed condition means either that no room was left at that instant or that the hour moved on; the loop reads
 *   again, so concurrent reservations fill a budget exactly (20 asking, room for 10: exactly 10 succeed).
 *
 * The chain's counter would be one item written by every operation of every owner: a hot item. It is split into
 * shards (chainShards(cap): one per 250,000,000 gas of the cap, at most 16, so 16 for the default 5,000,000,000),
 * each its own partition and counter with an exact share of the cap (the shares sum to the cap). A reservation tries
 * a random shard first and, only when that one has no room, the others (one batch read, most room first). Each shard
 * respects its share, so the shards together respect the cap exactly; the price is that near exhaustion up to one
 * operation's gas per shard may stay unused (a share too full for this operation while another has a little left).
 * Writes spread evenly, so a chain takes about 16 times one item's write rate. Changing the cap changes the shares
 * from then on (lowering the shard count stops counting the dropped shards' use of the last 24 hours).
 *
 * The owner's counter is reserved first (an owner past its budget never touches the chain's shards), then the
 * chain's; if the chain refuses, the owner's reservation is given back. A budget of 0 refuses without reading
 * anything; `unlimited` (Infinity) grants without reading or writing anything.
 */
import { countMetric } from "../metrics";
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { getAddress, type Address } from "viem";
import {
  addToBucket,
  readCounter,
  readCounters,
  SponsoredGas,
  takeFromBucket,
  type CounterId,
  type CounterItem,
} from "../store/entities/sponsored-gas";
import { log } from "../log";
import { useRuntime } from "../current-runtime";
import type { UserOperationV07 } from "../chain/userop-signer";

const HOUR_MS = 3_600_000;
const WINDOW_HOURS = 24;
/** Reads and conditional writes per counter before a reservation gives up (refused: built unsponsored). */
const ATTEMPTS = 6;
/** Gas per shard of the chain's counter: far above any one operation's limits, so a shard with room takes one. */
export const CHAIN_SHARD_GAS = 250_000_000;
const MAX_CHAIN_SHARDS = 16;

/** Where the counters live: the runtime's table by default; tests pass other clients and clocks. */
export interface BudgetStore {
  db: DynamoDBDocumentClient;
  tableName: string;
  now(): number;
}

export interface Budgets {
  /** Gas per owner per chain over the last 24 hours; 0 = never sponsor, Infinity = unlimited. */
  perOwner: number;
  /** Gas for all owners together per chain over the last 24 hours; 0 = never sponsor, Infinity = unlimited. */
  perChain: number;
  /** Shards of the chain's counter (default chainShards(perChain)). */
  chainShards?: number;
}

/** A granted reservation: the operation may be sponsored. `giveBack` returns the gas when it is never sent. */
export interface Sponsorship {
  /** The gas counted. */
  readonly gas: number;
  /** Returns the reserved gas to every counter it was taken from; once; never throws (a failed return stays counted). */
  giveBack(): Promise<void>;
}

interface Held {
  id: CounterId;
  hour: number;
  gas: number;
}

/** The runtime's budgets (API.md §18.5 settings). */
function configuredBudgets(): Budgets {
  const { sponsoredGasPerOwnerPerDay, sponsoredGasPerChainPerDay } = useRuntime().config.limits;
  return { perOwner: sponsoredGasPerOwnerPerDay, perChain: sponsoredGasPerChainPerDay };
}

/** False when either budget is 0: nothing is ever sponsored, so there is nothing to estimate or reserve. */
export const maySponsor = (budgets: Budgets = configuredBudgets()) => budgets.perOwner > 0 && budgets.perChain > 0;

/** The gas an operation is sponsored for: every gas limit it carries (the paymaster's included). */
export function sponsoredGasOf(
  gas: Pick<
    UserOperationV07,
    "callGasLimit" | "verificationGasLimit" | "preVerificationGas" | "paymasterVerificationGasLimit" | "paymasterPostOpGasLimit"
  >,
): bigint {
  return (
    gas.callGasLimit +
    gas.verificationGasLimit +
    gas.preVerificationGas +
    (gas.paymasterVerificationGasLimit ?? 0n) +
    (gas.paymasterPostOpGasLimit ?? 0n)
  );
}

/** Shards of a chain counter with this cap: one per CHAIN_SHARD_GAS, at least 1, at most MAX_CHAIN_SHARDS. */
export function chainShards(cap: number): number {
  if (!Number.isFinite(cap)) return 1;
  return Math.max(1, Math.min(MAX_CHAIN_SHARDS, Math.floor(cap / CHAIN_SHARD_GAS)));
}

/** Shard `shard`'s share of `cap`: as even as possible, the shares summing to `cap` exactly. */
export function shardCap(cap: number, shards: number, shard: number): number {
  return Math.floor(cap / shards) + (shard < cap % shards ? 1 : 0);
}

const runtimeStore = (): BudgetStore => {
  const runtime = useRuntime();
  return { db: runtime.db, tableName: runtime.config.tableName, now: runtime.now };
};

/**
 * Reserves `gas` of `owner`'s budget and of the chain's on `chainId`. Undefined when either budget cannot take it
 * (the operation is then built unsponsored); throws only when the table cannot be used.
 */
export async function reserveSponsoredGas(
  request: { chainId: number; owner: Address; gas: bigint },
  options: { budgets?: Budgets; store?: BudgetStore } = {},
): Promise<Sponsorship | undefined> {
  const budgets = options.budgets ?? configuredBudgets();
  if (!maySponsor(budgets)) return undefined;
  if (request.gas < 0n || request.gas > BigInt(Number.MAX_SAFE_INTEGER)) return undefined;
  const gas = Number(request.gas);
  if (gas > budgets.perOwner || gas > budgets.perChain) return refused(gas > budgets.perOwner ? "owner" : "chain");
  const ownerCounted = Number.isFinite(budgets.perOwner);
  const chainCounted = Number.isFinite(budgets.perChain);
  if (!ownerCounted && !chainCounted) return { gas, giveBack: async () => {} };

  const store = options.store ?? runtimeStore();
  const held: Held[] = [];
  try {
    if (ownerCounted) {
      const own = await reserveOn(store, { chainId: request.chainId, owner: getAddress(request.owner) }, budgets.perOwner, gas);
      if (!own) return refused("owner");
      held.push(own);
    }
    if (chainCounted) {
      const shards = budgets.chainShards ?? chainShards(budgets.perChain);
      const shared = await reserveOnChain(store, request.chainId, budgets.perChain, shards, gas);
      if (!shared) {
        await giveBackAll(store, held);
        return refused("chain");
      }
      held.push(shared);
    }
  } catch (err) {
    await giveBackAll(store, held);
    throw err;
  }
  let returned = false;
  return {
    gas,
    giveBack: async () => {
      if (returned) return;
      returned = true;
      await giveBackAll(store, held);
    },
  };
}

/** A budget that would be passed: the operation is built unsponsored, and operators see how often. */
function refused(budget: "owner" | "chain"): undefined {
  countMetric("SponsorshipRefused", { Budget: budget });
  return undefined;
}

/** One counter: read, check, conditional add (see the header for why the condition is enough). */
async function reserveOn(
  store: BudgetStore,
  id: CounterId,
  cap: number,
  gas: number,
  firstRead?: CounterItem | null,
): Promise<Held | undefined> {
  let read = firstRead;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const item = read !== undefined ? read : await readCounter(store, id);
    read = undefined;
    const clockHour = Math.floor(store.now() / HOUR_MS);
    const latest = item?.latest;
    const hour = latest !== undefined && latest > clockHour ? latest : clockHour;
    const { used, current, stale } = tally(item, hour);
    if (used + gas > cap) return undefined;
    const room = cap - (used - current) - gas;
    const expiresAt = (hour + WINDOW_HOURS + 1) * 3600;
    const seenGas = latest !== undefined ? item?.hours?.[String(latest)] : undefined;
    if (await addToBucket(store, id, { hour, gas, seen: latest, seenGas, room, stale, expiresAt })) return { id, hour, gas };
    // No room at that instant, or the hour moved on (or the item appeared): read again.
  }
  return undefined;
}

/** The chain's counter: a random shard first, then (only if it had no room) the others, most room first. */
async function reserveOnChain(store: BudgetStore, chainId: number, cap: number, shards: number, gas: number): Promise<Held | undefined> {
  const first = Math.floor(Math.random() * shards);
  const share = (s: number) => shardCap(cap, shards, s);
  const held = await reserveOn(store, { chainId, shard: first }, share(first), gas);
  if (held || shards === 1) return held;

  const others = Array.from({ length: shards - 1 }, (_, i) => (first + 1 + i) % shards);
  const items = await readCounters(
    store,
    others.map((shard) => ({ chainId, shard })),
  );
  const hour = Math.floor(store.now() / HOUR_MS);
  const candidates = others
    .map((s, i) => ({ s, item: items[i], room: share(s) - tally(items[i], Math.max(hour, items[i]?.latest ?? hour)).used }))
    .filter((c) => c.item === undefined || c.room >= gas)
    .sort((a, b) => b.room - a.room);
  for (const c of candidates) {
    const got = await reserveOn(store, { chainId, shard: c.s }, share(c.s), gas, c.item);
    if (got) return got;
  }
  return undefined;
}

/** Gas of the window ending at `hour` (`used`), of bucket `hour` itself (`current`), and the buckets out of the window. */
function tally(item: CounterItem | null | undefined, hour: number) {
  let used = 0;
  const stale: string[] = [];
  for (const [h, gas] of Object.entries(item?.hours ?? {})) {
    if (Number(h) > hour - WINDOW_HOURS) used += Number(gas);
    else stale.push(h);
  }
  return { used, current: Number(item?.hours?.[String(hour)] ?? 0), stale };
}

async function giveBackAll(store: BudgetStore, held: Held[]) {
  await Promise.all(held.map((h) => giveBack(store, h)));
}

/** Takes `gas` off the bucket it was added to; a bucket already out of the window (pruned) is left alone. */
async function giveBack(store: BudgetStore, { id, hour, gas }: Held) {
  try {
    await takeFromBucket(store, id, hour, gas);
  } catch (err) {
    const pk = SponsoredGas.key(id).pk;
    log.warn("sponsored gas not given back", { pk, hour, gas, error: err instanceof Error ? err.message : String(err) });
  }
}
