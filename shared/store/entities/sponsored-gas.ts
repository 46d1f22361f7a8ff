/**
 * Sponsored-gas counters (API.md §18.5; shared/wallet/sponsorship.ts explains why the condition is enough): one
 * item per counter, an owner's per chain or one shard of a chain's, holding the hourly buckets of the last 24 hours
 * (`hours`: hour → gas) and `latest`, the newest hour written. Owned here: a bucket grows only while `latest` is
 * as read and the bucket stays within the room left, and a give-back never takes a bucket below zero. Every
 * operation takes the store it works on (tests give other clients and clocks).
 */
import { defineEntity } from "../entity";
import type { EntityStore } from "../query";
import { add, remove, set, when, type UpdateAction } from "../expression";
import { Keys } from "../item-keys";
import { isConditionFailure, TTL_ATTRIBUTE } from "../table";

/** An owner's counter on a chain, or one shard of the chain's counter. */
export type CounterId = { chainId: number; owner: string } | { chainId: number; shard: number };

export interface CounterItem {
  latest?: number;
  hours?: Record<string, number>;
}

export const SponsoredGas = defineEntity<CounterItem, CounterId>({
  type: "sponsoredGas",
  version: 1,
  key: (id) => ("owner" in id ? Keys.sponsoredGasOwner(id.chainId, id.owner) : Keys.sponsoredGasChain(id.chainId, id.shard)),
});

const on = (store: EntityStore) => defineEntity<CounterItem, CounterId>(SponsoredGas, () => store);

/** The counter as stored, or null (strongly consistent). */
export async function readCounter(store: EntityStore, id: CounterId): Promise<CounterItem | null> {
  return (await on(store).get(id, { consistent: true })) ?? null;
}

/** Several counters in one batch read: null for an absent item, undefined for one the batch left unread. */
export async function readCounters(store: EntityStore, ids: CounterId[]): Promise<(CounterItem | null | undefined)[]> {
  const keys = ids.map((id) => SponsoredGas.key(id));
  const out = await on(store).batchGet(keys, { consistent: true });
  const found = new Map<string, CounterItem>();
  for (const item of out.items) found.set(item.pk, item);
  const unread = new Set(out.unprocessed.map((k) => k.pk));
  return keys.map((k) => (unread.has(k.pk) ? undefined : (found.get(k.pk) ?? null)));
}

/**
 * Adds `gas` to bucket `hour` and prunes the `stale` buckets, only while `latest` is still `seen` and the bucket
 * holds at most `room` (the first write of a counter: only while it has no `latest`). A write that starts a newer
 * hour also needs bucket `seen` as it was read (`seenGas`, undefined: absent), since `room` counted it and a writer
 * still on that hour may add to it meanwhile. False when refused.
 */
export async function addToBucket(
  store: EntityStore,
  id: CounterId,
  w: {
    hour: number;
    gas: number;
    seen: number | undefined;
    seenGas: number | undefined;
    room: number;
    stale: readonly string[];
    expiresAt: number;
  },
): Promise<boolean> {
  const stamp: UpdateAction[] = [
    set("latest", w.hour),
    set(TTL_ATTRIBUTE, w.expiresAt),
    set("type", SponsoredGas.type),
    set("v", SponsoredGas.version),
  ];
  const bucket = ["hours", String(w.hour)];
  const [actions, condition] =
    w.seen === undefined
      ? [[set("hours", { [String(w.hour)]: w.gas }), ...stamp], when.notExists("latest")]
      : [
          [add(bucket, w.gas), ...stamp, ...w.stale.map((h) => remove(["hours", h]))],
          when.and(
            when.eq("latest", w.seen),
            when.or(when.notExists(bucket), when.le(bucket, w.room)),
            w.hour !== w.seen &&
              (w.seenGas === undefined ? when.notExists(["hours", String(w.seen)]) : when.eq(["hours", String(w.seen)], w.seenGas)),
          ),
        ];
  try {
    await on(store).update(id, actions, { if: condition });
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

/** Takes `gas` off bucket `hour`; false when the bucket holds less (pruned meanwhile: nothing to give back). */
export async function takeFromBucket(store: EntityStore, id: CounterId, hour: number, gas: number): Promise<boolean> {
  const bucket = ["hours", String(hour)];
  try {
    // The condition holds only when the bucket exists, so `add` is bucket − gas.
    await on(store).update(id, [add(bucket, -gas)], { if: when.ge(bucket, gas) });
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}
