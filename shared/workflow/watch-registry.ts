/**
 * Which workflows a chain's watcher serves (store pattern 19): one watch entry per enabled workflow with a block or
 * event trigger, `pk = WF#<id>`, `sk = WATCH`, listed per chain through the sparse gsi2 `CHAIN#<chainId>#WATCH`.
 * The workflow record cannot carry that index itself (its gsi2 is the wallet list, pattern 12), so the entry is a
 * small item of its own holding a copy of what the watcher needs: the owner (whose queries are served together,
 * API.md §18.4), the trigger, `startAt`/`expiredAt`, the instant it started watching (`since`: blocks before it
 * never fire, so a resumed workflow replays nothing) and the time of its last fire (`lastFiredAt`, the chain time a
 * cooldown counts from).
 *
 * Entries are listed on every pass, so they stay small: a trigger of more than INLINE_TRIGGER_BYTES (an event
 * trigger may name 1,000 addresses, about 45 KB) lives in an item of its own beside the entry
 * (`sk = WATCH#TRIGGER`, not indexed), read once per process (the trigger of a workflow never changes; the cache is
 * keyed by workflow and `since`). A listing therefore reads about 200 bytes per workflow however large its queries.
 *
 * Written on create and resume, deleted on pause, cancel, completion and failure; a paused, completed or deleted
 * workflow therefore costs the watcher nothing. An entry left behind by an interrupted write is removed by the
 * watcher the first time its claim answers not found or not runnable (conditioned on `since`, so it never removes
 * the entry of a resume that happened meanwhile).
 *
 * Versions: 3 (owner; the trigger inline as JSON text, or in the trigger item), 2 (trigger as JSON text, no
 * owner), 1 (trigger as a map, no owner). Entries of versions 1 and 2 are still read; the watcher upgrades each
 * once (`upgrade`: the owner read from the workflow record).
 */
import {
  anyWatchEntry,
  chainWatchItems,
  deleteWatchEntry,
  deleteWatchTrigger,
  noteWatchFired,
  putWatchEntry,
  putWatchTrigger,
  readWatchTriggers,
  type ListedAwait,
} from "../store/entities/watch";
import { workflowOwner } from "../store/entities/workflow";
import type { Trigger } from "../kinds/shapes";

const VERSION = 3;
/** Triggers up to this many bytes of JSON stay inside the entry; larger ones get their own item. */
const INLINE_TRIGGER_BYTES = 2048;

export type ChainTrigger = Extract<Trigger, { type: "block" | "event" }> & { id: string };

export interface WatchEntry {
  workflowId: string;
  chainId: number;
  /** Lower-case address of the workflow's owner; absent on entries written before version 3 (and by tools). */
  owner?: string;
  trigger: ChainTrigger;
  startAt?: number;
  expiredAt?: number;
  /** ms: blocks whose timestamp is before this second never fire for this entry. */
  since: number;
  /** ms: chain time of the last fire (cooldown). */
  lastFiredAt?: number;
  /** The entry's item version (below 3: written before owners were recorded). */
  v: number;
}

/** What `watch` needs of a workflow record. */
export interface Watchable {
  id: string;
  chainId: number;
  owner?: string;
  trigger: Trigger & { id: string };
  startAt?: number;
  expiredAt?: number;
}

/** The chain a block or event trigger watches (its own `chainId`, else the workflow's). */
const watchedChain = (w: Watchable): number | undefined =>
  w.trigger.type === "block" || w.trigger.type === "event" ? (w.trigger.config.chainId ?? w.chainId) : undefined;

/** Starts watching for a workflow with a block or event trigger (create, resume); other triggers: nothing. */
export async function watch(w: Watchable, now: number): Promise<void> {
  const chainId = watchedChain(w);
  if (chainId === undefined) return;
  await writeEntry(
    {
      workflowId: w.id,
      chainId,
      ...(w.owner !== undefined ? { owner: w.owner.toLowerCase() } : {}),
      trigger: w.trigger as ChainTrigger,
      ...(w.startAt !== undefined ? { startAt: w.startAt } : {}),
      ...(w.expiredAt !== undefined ? { expiredAt: w.expiredAt } : {}),
      since: now,
      v: VERSION,
    },
    false,
  );
}

/**
 * Writes a version 3 entry: a large trigger's item first, then the entry (so an entry never names a trigger item
 * not yet written). `replace`: only over the entry that is there with the same `since` (upgrades), else false.
 */
async function writeEntry(entry: WatchEntry, replace: boolean): Promise<boolean> {
  const text = JSON.stringify(entry.trigger);
  const separate = Buffer.byteLength(text) > INLINE_TRIGGER_BYTES;
  if (separate) await putWatchTrigger(entry.workflowId, entry.since, text);
  const { trigger: _trigger, v: _v, ...rest } = entry;
  const attributes = { ...rest, ...(separate ? { triggerStored: true, triggerType: entry.trigger.type } : { trigger: text }) };
  return putWatchEntry(entry.workflowId, entry.chainId, attributes, replace ? { replacingSince: entry.since } : {});
}

/** Stops watching (pause, cancel, completion, failure); `since` given: only the entry that started then. */
export async function unwatch(workflowId: string, since?: number): Promise<void> {
  const old = await deleteWatchEntry(workflowId, since);
  if (!old?.triggerStored) return;
  // The trigger item of the entry just removed; one a resume has written meanwhile (another `since`) stays.
  await deleteWatchTrigger(workflowId, old.since);
}

/** Triggers already read, by workflow (with the `since` of the entry they were read for). */
const triggerCache = new Map<string, { chainId: number; since: number; trigger: ChainTrigger }>();

/**
 * Whether any workflow or chain-event wait (an `await` node's entry, store pattern 19b) watches `chainId` (one gsi2
 * Query of at most one item): an idle chain is not polled.
 */
export const isWatched = (chainId: number): Promise<boolean> => anyWatchEntry(chainId);

/** Every workflow watching `chainId` (`chainWatchersOf`'s entries). */
export async function watchersOf(chainId: number): Promise<WatchEntry[]> {
  return (await chainWatchersOf(chainId)).entries;
}

/**
 * Every workflow watching `chainId`, and the await watch entries of the chain-event waits listed with them (one
 * eventually consistent gsi2 Query, paged; the chain watcher serves the waits: shared/watch/chain-waits.ts).
 * Triggers kept in their own item are read once per process (BatchGetItem); an entry whose trigger item cannot be
 * read yet is left out.
 */
export async function chainWatchersOf(chainId: number): Promise<{ entries: WatchEntry[]; awaits: ListedAwait[] }> {
  const { watches: items, awaits } = await chainWatchItems(chainId);

  const missing = new Map<string, number>();
  for (const i of items)
    if (i.triggerStored && triggerCache.get(i.workflowId as string)?.since !== i.since)
      missing.set(i.workflowId as string, i.since as number);
  const ids = [...missing.keys()];
  for (let at = 0; at < ids.length; at += 100) await readTriggers(chainId, ids.slice(at, at + 100), missing);

  const entries: WatchEntry[] = [];
  for (const item of items) {
    const id = item.workflowId as string;
    let trigger: ChainTrigger | undefined;
    if (item.triggerStored) trigger = triggerCache.get(id)?.trigger;
    else {
      const cached = triggerCache.get(id);
      if (typeof item.trigger === "string" && cached && cached.since === item.since) trigger = cached.trigger;
      else {
        trigger = (typeof item.trigger === "string" ? JSON.parse(item.trigger) : item.trigger) as ChainTrigger;
        // Only large inline triggers (entries of version 2) are worth keeping parsed.
        if (typeof item.trigger === "string" && item.trigger.length > INLINE_TRIGGER_BYTES)
          triggerCache.set(id, { chainId, since: item.since as number, trigger });
      }
    }
    if (trigger) entries.push(fromItem(item, trigger));
  }
  const live = new Set(items.map((i) => i.workflowId as string));
  for (const [id, cached] of triggerCache) if (cached.chainId === chainId && !live.has(id)) triggerCache.delete(id);
  return { entries, awaits };
}

/** Reads trigger items (a workflow's trigger never changes: cached for the `since` of the entry that asked). */
async function readTriggers(chainId: number, ids: string[], since: Map<string, number>): Promise<void> {
  for (const [id, text] of await readWatchTriggers(ids))
    triggerCache.set(id, { chainId, since: since.get(id)!, trigger: JSON.parse(text) as ChainTrigger });
}

const fromItem = (item: Record<string, unknown>, trigger: ChainTrigger): WatchEntry => ({
  workflowId: item.workflowId as string,
  chainId: item.chainId as number,
  ...(typeof item.owner === "string" ? { owner: item.owner } : {}),
  trigger,
  ...(typeof item.startAt === "number" ? { startAt: item.startAt } : {}),
  ...(typeof item.expiredAt === "number" ? { expiredAt: item.expiredAt } : {}),
  since: item.since as number,
  ...(typeof item.lastFiredAt === "number" ? { lastFiredAt: item.lastFiredAt } : {}),
  v: typeof item.v === "number" ? item.v : 1,
});

/**
 * Rewrites an entry of version 1 or 2 as version 3: its owner read from the workflow record, a large trigger moved
 * to its own item. Only over the same entry (`since`); a workflow without a record keeps its entry as it is (its
 * first claim removes it). Returns the entry as the watcher should serve it.
 */
export async function upgrade(entry: WatchEntry): Promise<WatchEntry> {
  if (entry.v >= VERSION) return entry;
  const owner = (await workflowOwner(entry.workflowId))?.toLowerCase();
  if (owner === undefined) return entry;
  const upgraded: WatchEntry = { ...entry, owner, v: VERSION };
  return (await writeEntry(upgraded, true)) ? upgraded : entry;
}

/** Records the chain time of a fire for the cooldown; an entry removed meanwhile stays removed. */
export const noteFired = noteWatchFired;
