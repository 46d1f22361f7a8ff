/** Sharded due keys (shared/store/README.md, "Sharded due keys"): where items land and how readers take shards in turn. */
import { describe, expect, it } from "vitest";
import { DuePartition, Keys } from "../../shared/store/item-keys";
import { fromShards } from "../../shared/store/query";

const ids = Array.from({ length: 800 }, (_, i) => `01J${String(i).padStart(23, "0")}`);

describe("sharded due keys", () => {
  it("puts an id on one shard of 8 for life, and spreads ids over all of them", () => {
    const shards = ids.map((id) => Keys.pendingExecution(1, id).gsi3pk);
    expect(new Set(shards)).toEqual(new Set(Keys.dueShards(DuePartition.pendingExecution).slice(0, 8)));
    expect(ids.map((id) => Keys.pendingExecution(2, id).gsi3pk)).toEqual(shards);
    expect(Keys.waitingExecution(3, ids[0]!).gsi3pk).toBe(shards[0]!.replace("pending", "waiting"));
    const counts = [...new Set(shards)].map((shard) => shards.filter((s) => s === shard).length);
    expect(Math.max(...counts)).toBeLessThan(2 * (ids.length / 8));
  });

  it("lists every shard and, last, the unsharded partition items written before lie in", () => {
    expect(Keys.dueShards("EXPIRY#due")).toEqual([...Array.from({ length: 8 }, (_, n) => `EXPIRY#due#${n}`), "EXPIRY#due"]);
  });

  it("reads every shard and takes their items in turn up to max, so a full shard crowds out no other", async () => {
    const items: Record<string, string[]> = { a: ["a1", "a2", "a3", "a4"], b: ["b1"], c: [], d: ["d1", "d2"] };
    const read: string[] = [];
    const taken = await fromShards(Object.keys(items), 5, async (pk) => (read.push(pk), items[pk]!));
    expect(read.sort()).toEqual(["a", "b", "c", "d"]);
    expect(taken).toEqual(["a1", "b1", "d1", "a2", "d2"]);
    expect(await fromShards(Object.keys(items), 100, async (pk) => items[pk]!)).toHaveLength(7);
  });
});
