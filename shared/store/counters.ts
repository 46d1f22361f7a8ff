/**
 * Per-owner counters that guard caps (secrets, wallets per chain, active workflows; pattern 4). Each is changed
 * only inside the same transaction as the record it counts, so a cap holds under concurrency and a failed
 * or retried write never double-counts.
 */
import { defineEntity } from "./entity";
import { add, set, when } from "./expression";
import { Keys } from "./item-keys";

const Counter = defineEntity({
  type: "counter",
  version: 1,
  key: ({ owner, name }: { owner: string; name: string }) => Keys.counter(owner, name),
});

/** Transaction item: +1, only while the count is below `max`. */
export function incrementBelow(owner: string, name: string, max: number) {
  return Counter.tx.update({ owner, name }, [add("count", 1), set("type", Counter.type), set("v", Counter.version)], {
    if: when.or(when.notExists("count"), when.lt("count", max)),
  });
}

/** Transaction item: -1, never below zero. */
export function decrement(owner: string, name: string) {
  return Counter.tx.update({ owner, name }, [add("count", -1)], { if: when.gt("count", 0) });
}
