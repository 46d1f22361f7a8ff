/**
 * Watch entry of a block/event workflow (store pattern 19; shared/workflow/watch-registry.ts): beside the workflow
 * record, `pk = WF#<id>`, `sk = WATCH`, listed per chain on the sparse gsi2 `CHAIN#<chainId>#WATCH`; and the
 * trigger item beside it (`sk = WATCH#TRIGGER`, not indexed) holding a trigger too large for the entry. Writes that
 * replace or remove an entry are conditioned on its `since` (so they never touch the entry of a resume that
 * happened meanwhile), and `lastFiredAt` only moves forward on an entry that exists.
 *
 * Await watch entry of a chain-event wait (pattern 19b; API.md §17.1, shared/watch/chain-waits.ts): beside the
 * execution's steps, `pk = EXEC#<executionId>`, `sk = AWAIT#<nodeId>`, listed on the same gsi2 partition as the
 * chain's watch entries (`gsi2sk = await#<executionId>#<nodeId>`), so one Query a pass lists both; queries too large
 * for the entry lie in an item beside it (`sk = AWAIT#<nodeId>#QUERIES`, not indexed).
 */
import { defineEntity } from "../entity";
import { queryOnce, queryPages } from "../query";
import { set, when } from "../expression";
import { Keys } from "../item-keys";
import { Index, isConditionFailure } from "../table";

type Item = Record<string, unknown>;

const WatchEntryItem = defineEntity({ type: "watch", version: 3, key: (workflowId: string) => Keys.watch(workflowId) });
const TRIGGER_SK = "WATCH#TRIGGER";
/** A trigger too large for its entry: the entry's `since`, the trigger's JSON text. */
interface TriggerItem {
  since: number;
  trigger: string;
}
const WatchTriggerItem = defineEntity<TriggerItem, string>({
  type: "watchTrigger",
  version: 1,
  key: (workflowId) => ({ pk: Keys.watch(workflowId).pk, sk: TRIGGER_SK }),
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

/** Whether any workflow or chain-event wait watches `chainId` (one gsi2 Query of at most one item of either kind). */
export async function anyWatchEntry(chainId: number): Promise<boolean> {
  const page = await queryOnce({ index: Index.gsi2, pk: Keys.watchByChain(chainId, "").gsi2pk, limit: 1 });
  return page.items.length > 0;
}

/**
 * Every watch entry and every await watch entry of `chainId`: one eventually consistent gsi2 Query (every page)
 * lists both. Await entries are read into `ListedAwait`s (their queries, or `queries` absent when they lie in
 * their own item: `readAwaitQueries`).
 */
export async function chainWatchItems(chainId: number): Promise<{ watches: Item[]; awaits: ListedAwait[] }> {
  const watches: Item[] = [];
  const awaits: ListedAwait[] = [];
  for await (const page of queryPages({ index: Index.gsi2, pk: Keys.watchByChain(chainId, "").gsi2pk })) {
    for (const item of page.items) {
      if (item.type === WatchEntryItem.type) watches.push(item);
      else if (item.type === AwaitWatchItem.type) awaits.push(listedAwait(item));
    }
  }
  return { watches, awaits };
}

/**
 * The trigger items of up to 100 workflows (one BatchGetItem, then one per round of unprocessed keys, at most 5):
 * workflow id → the trigger's JSON text, for those read.
 */
export async function readWatchTriggers(workflowIds: readonly string[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  let keys = workflowIds.map((id) => WatchTriggerItem.key(id));
  for (let attempt = 0; keys.length > 0 && attempt < 5; attempt++) {
    const out = await WatchTriggerItem.batchGet(keys);
    for (const item of out.items) found.set(item.pk.slice("WF#".length), item.trigger);
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

// ---------------------------------------------------------------------------------------------------------
// Await watch entries (pattern 19b)

/** A chain-event wait the chain watcher ends (API.md §17.1): its first matching log mined after `afterBlock`. */
export interface AwaitWatch {
  workflowId: string;
  executionId: string;
  nodeId: string;
  /** The execution's owner: the wait's requests are that owner's (API.md §18.4). */
  owner: string;
  chainId: number;
  /** The node's `chainEvent.queries` (EventQuery[] of §8.3.5), stored as JSON text. */
  queries: unknown[];
  /** The head when the wait began: only logs of later blocks end it. */
  afterBlock: number;
  /** ms: when the wait times out. */
  deadline: number;
}

/** An await watch entry as listed: `queries` absent when they lie in their own item (`readAwaitQueries`). */
export type ListedAwait = Omit<AwaitWatch, "queries"> & { queries?: unknown[] };

interface AwaitId {
  executionId: string;
  nodeId: string;
}

const AwaitWatchItem = defineEntity({ type: "awaitWatch", version: 1, key: (id: AwaitId) => Keys.awaitWatch(id.executionId, id.nodeId) });
/** Queries too large for their entry (JSON text). */
interface QueriesItem extends AwaitId {
  queries: string;
  expiresAt: number;
}
const AwaitQueriesItem = defineEntity<QueriesItem, AwaitId>({
  type: "awaitQueries",
  version: 1,
  key: (id) => {
    const { pk, sk } = Keys.awaitWatch(id.executionId, id.nodeId);
    return { pk, sk: `${sk}#QUERIES` };
  },
});
/** Queries up to this many bytes of JSON stay inside the entry (listed every pass); larger ones get their own item. */
const INLINE_AWAIT_QUERIES_BYTES = 2048;
/** Clean-up only (the watcher drops an entry 10 minutes after its deadline): a day after the deadline. */
const AWAIT_TTL_AFTER_DEADLINE_S = 24 * 3600;

/**
 * Records a chain-event wait for the chain watcher (its queries' item first when they are large, so an entry never
 * names an item not yet written). Writing the same wait again is harmless.
 *
 * @public the await node's runner (shared/execution) calls it when a `chainEvent` wait begins.
 */
export async function putAwaitWatch(w: AwaitWatch): Promise<void> {
  const id = { executionId: w.executionId, nodeId: w.nodeId };
  const text = JSON.stringify(w.queries);
  const separate = Buffer.byteLength(text) > INLINE_AWAIT_QUERIES_BYTES;
  const expiresAt = Math.ceil(w.deadline / 1000) + AWAIT_TTL_AFTER_DEADLINE_S;
  if (separate) await AwaitQueriesItem.put(id, { ...id, queries: text, expiresAt });
  await AwaitWatchItem.put(id, {
    ...Keys.awaitWatchByChain(w.chainId, w.executionId, w.nodeId),
    workflowId: w.workflowId,
    executionId: w.executionId,
    nodeId: w.nodeId,
    owner: w.owner.toLowerCase(),
    chainId: w.chainId,
    afterBlock: w.afterBlock,
    deadline: w.deadline,
    expiresAt,
    ...(separate ? { queriesStored: true } : { queries: text }),
  });
}

/**
 * Removes a chain-event wait's entry (and its queries' item); nothing when there is none.
 *
 * @public the await node's runner (shared/execution) calls it when the wait ends otherwise (signal, timeout); the
 * chain watcher, once it has ended the wait by its log.
 */
export async function deleteAwaitWatch(executionId: string, nodeId: string): Promise<void> {
  const old = await AwaitWatchItem.delete({ executionId, nodeId }, { returnOld: true });
  if (old?.queriesStored) await AwaitQueriesItem.delete({ executionId, nodeId });
}

function listedAwait(item: Item): ListedAwait {
  return {
    workflowId: item.workflowId as string,
    executionId: item.executionId as string,
    nodeId: item.nodeId as string,
    owner: item.owner as string,
    chainId: item.chainId as number,
    afterBlock: item.afterBlock as number,
    deadline: item.deadline as number,
    ...(item.queriesStored ? {} : { queries: parsedQueries(item.queries) }),
  };
}

/** The stored JSON text of a wait's queries; anything unreadable as an empty list (the watcher drops such a wait). */
function parsedQueries(text: unknown): unknown[] {
  try {
    const queries: unknown = typeof text === "string" ? JSON.parse(text) : undefined;
    return Array.isArray(queries) ? queries : [];
  } catch {
    return [];
  }
}

/**
 * The queries' items of up to 100 waits (one BatchGetItem, then one per round of unprocessed keys, at most 5):
 * `<executionId>#<nodeId>` → the queries, for those read.
 */
export async function readAwaitQueries(ids: readonly AwaitId[]): Promise<Map<string, unknown[]>> {
  const found = new Map<string, unknown[]>();
  let keys = ids.map((id) => AwaitQueriesItem.key(id));
  for (let attempt = 0; keys.length > 0 && attempt < 5; attempt++) {
    const out = await AwaitQueriesItem.batchGet(keys);
    for (const item of out.items) found.set(`${item.executionId}#${item.nodeId}`, parsedQueries(item.queries));
    keys = out.unprocessed;
  }
  return found;
}
