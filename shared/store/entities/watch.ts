/**
 * Watch entry of a block/event workflow (store pattern 19; shared/workflow/watch-registry.ts): beside the workflow
 * record, `pk = WF#<id>`, `sk = WATCH`, listed per chain on the sparse gsi2 `CHAIN#<chainId>#WATCH`; and the
 * trigger item beside it (`sk = WATCH#TRIGGER`, not indexed) holding a trigger too large for the entry. Writes that
 * replace or remove an entry are conditioned on its `since` (so they never touch the entry of a resume that
 * happened meanwhile), and `lastFiredAt` only moves forward on an entry that exists.
 */
import { batchGetOnce, defineEntity, queryPartition, queryPartitionPages } from "../entity";
import { set, when } from "../expression";
import { Keys } from "../keys";
import { Index, isConditionFailure } from "../table";

type Item = Record<string, unknown>;

const WatchEntryItem = defineEntity({ type: "watch", version: 3, key: (workflowId: string) => Keys.watch(workflowId) });
const TRIGGER_SK = "WATCH#TRIGGER";
const WatchTriggerItem = defineEntity({
  type: "watchTrigger",
  version: 1,
  key: (workflowId: string) => ({ pk: Keys.watch(workflowId).pk, sk: TRIGGER_SK }),
});

/** The trigger item of the entry that starts watching at `since` (`trigger`: its JSON text). */
export async function putWatchTrigger(workflowId: string, since: number, trigger: string): Promise<void> {
  await WatchTriggerItem.put(workflowId, { since, trigger });
}

/**
 * Writes the entry (`attributes`: everything but keys, `type` and `v`). `replacingSince`: only over the entry that
 * is there with that `since`, else false.
 */
export async function putWatchEntry(
  workflowId: string,
  chainId: number,
  attributes: Item,
  options: { replacingSince?: number } = {},
): Promise<boolean> {
  const item = { ...Keys.watchByChain(chainId, workflowId), ...attributes };
  const replacing = options.replacingSince;
  try {
    await WatchEntryItem.put(workflowId, item, replacing !== undefined ? { if: when.eq("since", replacing) } : {});
    return true;
  } catch (err) {
    if (replacing !== undefined && isConditionFailure(err)) return false;
    throw err;
  }
}

/** Deletes the entry (`since` given: only the one that started then); the item removed, if any. */
export async function deleteWatchEntry(workflowId: string, since?: number): Promise<Item | undefined> {
  try {
    return await WatchEntryItem.delete(workflowId, { returnOld: true, ...(since !== undefined ? { if: when.eq("since", since) } : {}) });
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
    return undefined;
  }
}

/** Deletes the trigger item written for the entry that started at `since` (one of a later entry stays). */
export async function deleteWatchTrigger(workflowId: string, since: unknown): Promise<void> {
  try {
    await WatchTriggerItem.delete(workflowId, { if: when.eq("since", since) });
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
}

/** Whether any workflow watches `chainId` (one gsi2 Query of at most one item). */
export async function anyWatchEntry(chainId: number): Promise<boolean> {
  const page = await queryPartition({ index: Index.gsi2, partition: ["gsi2pk", Keys.watchByChain(chainId, "").gsi2pk], limit: 1 });
  return page.items.length > 0;
}

/** Every watch entry of `chainId` (eventually consistent gsi2 Query, every page). */
export async function watchEntriesOf(chainId: number): Promise<Item[]> {
  const items: Item[] = [];
  for await (const page of queryPartitionPages({ index: Index.gsi2, partition: ["gsi2pk", Keys.watchByChain(chainId, "").gsi2pk] })) {
    for (const item of page.items) if (item.type === WatchEntryItem.type) items.push(item);
  }
  return items;
}

/**
 * The trigger items of up to 100 workflows (one BatchGetItem, then one per round of unprocessed keys, at most 5):
 * workflow id → the trigger's JSON text, for those read.
 */
export async function readWatchTriggers(workflowIds: readonly string[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  let keys = workflowIds.map((id) => WatchTriggerItem.key(id));
  for (let attempt = 0; keys.length > 0 && attempt < 5; attempt++) {
    const out = await batchGetOnce(keys);
    for (const item of out.items) found.set((item.pk as string).slice("WF#".length), item.trigger as string);
    keys = out.unprocessed;
  }
  return found;
}

/** Records the chain time of a fire (cooldown): only on an existing entry, and only forward. */
export async function noteWatchFired(workflowId: string, at: number): Promise<void> {
  try {
    await WatchEntryItem.update(workflowId, [set("lastFiredAt", at)], {
      if: when.and(when.exists(), when.or(when.notExists("lastFiredAt"), when.lt("lastFiredAt", at))),
    });
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
}
