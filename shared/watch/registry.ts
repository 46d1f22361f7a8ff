/**
 * Which workflows a chain's watcher serves (store pattern 19): one watch entry per enabled workflow with a block or
 * event trigger, `pk = WF#<id>`, `sk = WATCH`, listed per chain through the sparse gsi2 `CHAIN#<chainId>#WATCH`.
 * The workflow record cannot carry that index itself (its gsi2 is the wallet list, pattern 12), so the entry is a
 * small item of its own holding a copy of what the watcher needs: the trigger, `startAt`/`expiredAt`, the instant
 * it started watching (`since`: blocks before it never fire, so a resumed workflow replays nothing) and the time of
 * its last fire (`lastFiredAt`, the chain time a cooldown counts from).
 *
 * Written on create and resume, deleted on pause, cancel, completion and failure; a paused, completed or deleted
 * workflow therefore costs the watcher nothing. An entry left behind by an interrupted write is removed by the
 * watcher the first time its claim answers not found or not runnable (conditioned on `since`, so it never removes
 * the entry of a resume that happened meanwhile).
 */
import { DeleteCommand, PutCommand, QueryCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { useRuntime } from "../runtime";
import { Keys } from "../store/keys";
import { Index, isConditionFailure } from "../store/table";
import type { Trigger } from "../workflow/schemas";

const ENTITY = "watch";
/** 2: `trigger` is JSON text (its ABI items are free-form JSON, API.md §18.6); version 1 entries hold a map. */
const VERSION = 2;

export type ChainTrigger = Extract<Trigger, { type: "block" | "event" }> & { id: string };

export interface WatchEntry {
  workflowId: string;
  chainId: number;
  trigger: ChainTrigger;
  startAt?: number;
  expiredAt?: number;
  /** ms: blocks whose timestamp is before this second never fire for this entry. */
  since: number;
  /** ms: chain time of the last fire (cooldown). */
  lastFiredAt?: number;
}

/** What `watch` needs of a workflow record. */
export interface Watchable {
  id: string;
  chainId: number;
  trigger: Trigger & { id: string };
  startAt?: number;
  expiredAt?: number;
}

const table = () => useRuntime().config.tableName;

/** The chain a block or event trigger watches (its own `chainId`, else the workflow's). */
export const watchedChain = (w: Watchable): number | undefined =>
  w.trigger.type === "block" || w.trigger.type === "event" ? (w.trigger.config.chainId ?? w.chainId) : undefined;

/** Starts watching for a workflow with a block or event trigger (create, resume); other triggers: nothing. */
export async function watch(w: Watchable, now: number): Promise<void> {
  const chainId = watchedChain(w);
  if (chainId === undefined) return;
  const entry: WatchEntry = {
    workflowId: w.id,
    chainId,
    trigger: w.trigger as ChainTrigger,
    ...(w.startAt !== undefined ? { startAt: w.startAt } : {}),
    ...(w.expiredAt !== undefined ? { expiredAt: w.expiredAt } : {}),
    since: now,
  };
  const item = { ...Keys.watch(w.id), ...Keys.watchByChain(chainId, w.id), type: ENTITY, v: VERSION, ...entry, trigger: JSON.stringify(entry.trigger) };
  await useRuntime().db.send(new PutCommand({ TableName: table(), Item: item }));
}

/** Stops watching (pause, cancel, completion, failure); `since` given: only the entry that started then. */
export async function unwatch(workflowId: string, since?: number): Promise<void> {
  try {
    await useRuntime().db.send(
      new DeleteCommand({
        TableName: table(),
        Key: Keys.watch(workflowId),
        ...(since !== undefined ? { ConditionExpression: "since = :since", ExpressionAttributeValues: { ":since": since } } : {}),
      }),
    );
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
}

/** Every workflow watching `chainId` (eventually consistent gsi2 Query, paged). */
export async function watchersOf(chainId: number): Promise<WatchEntry[]> {
  const entries: WatchEntry[] = [];
  let startKey: Record<string, unknown> | undefined;
  do {
    const out = await useRuntime().db.send(
      new QueryCommand({
        TableName: table(),
        IndexName: Index.gsi2,
        KeyConditionExpression: "gsi2pk = :pk",
        ExpressionAttributeValues: { ":pk": Keys.watchByChain(chainId, "").gsi2pk },
        ExclusiveStartKey: startKey,
      }),
    );
    for (const item of out.Items ?? []) if (item.type === ENTITY) entries.push(fromItem(item));
    startKey = out.LastEvaluatedKey;
  } while (startKey);
  return entries;
}

/** An entry of either version: `trigger` as JSON text (2) or as a map (1). */
const fromItem = (item: Record<string, unknown>): WatchEntry =>
  (typeof item.trigger === "string" ? { ...item, trigger: JSON.parse(item.trigger) } : item) as unknown as WatchEntry;

/** Records the chain time of a fire for the cooldown; an entry removed meanwhile stays removed. */
export async function noteFired(workflowId: string, at: number): Promise<void> {
  try {
    await useRuntime().db.send(
      new UpdateCommand({
        TableName: table(),
        Key: Keys.watch(workflowId),
        UpdateExpression: "SET lastFiredAt = :at",
        ConditionExpression: "attribute_exists(pk) AND (attribute_not_exists(lastFiredAt) OR lastFiredAt < :at)",
        ExpressionAttributeValues: { ":at": at },
      }),
    );
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
}
