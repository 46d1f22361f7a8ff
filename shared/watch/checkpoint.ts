/**
 * The chain's checkpoint item (store pattern 18, `CHAIN#<id>` / `CHECKPOINT`): the lease a pass holds, and the
 * cursors it writes back (watcher.ts, "Progress").
 */
import { DeleteCommand, GetCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { useRuntime } from "../runtime";
import { Keys } from "../store/keys";
import { isConditionFailure } from "../store/table";
import type { WatchEntry } from "../workflow/watch-registry";
import { ownerOf } from "./plan";

/** How long a lease holds without being extended; every pass extends it. */
export const LEASE_MS = 60_000;

// ---------------------------------------------------------------------------------------------------------
// Checkpoint, cursors and lease (pattern 18)

export const table = () => useRuntime().config.tableName;
/** Map keys cannot be empty: entries without an owner are kept under this name. */
export const NO_OWNER = "-";

export interface Persisted {
  block?: number;
  rev?: string;
  behind: Record<string, number>;
  floors: Record<string, number>;
}

/** Takes (or extends) the chain's lease; the checkpoint item, or `null` when another holds it. */
export async function acquire(chainId: number, holder: string, now: number): Promise<Persisted | null> {
  try {
    const out = await useRuntime().db.send(
      new UpdateCommand({
        TableName: table(),
        Key: Keys.chainCheckpoint(chainId),
        UpdateExpression: "SET leaseOwner = :me, leaseUntil = :until, #type = :type, v = :v",
        ConditionExpression: "attribute_not_exists(leaseUntil) OR leaseUntil < :now OR leaseOwner = :me",
        ExpressionAttributeNames: { "#type": "type" },
        ExpressionAttributeValues: { ":me": holder, ":until": now + LEASE_MS, ":now": now, ":type": "chainCheckpoint", ":v": 2 },
        ReturnValues: "ALL_NEW",
      }),
    );
    const item = out.Attributes ?? {};
    return {
      ...(typeof item.block === "number" ? { block: item.block } : {}),
      ...(typeof item.rev === "string" ? { rev: item.rev } : {}),
      behind: (item.behind as Record<string, number> | undefined) ?? {},
      floors: (item.floors as Record<string, number> | undefined) ?? {},
    };
  } catch (err) {
    if (isConditionFailure(err)) return null;
    throw err;
  }
}

/** Writes the cursors while still holding the lease (extending it); false when the lease was lost. */
export async function store(
  chainId: number,
  holder: string,
  block: number,
  behind: Record<string, number>,
  floors: Record<string, number>,
  rev: string,
): Promise<boolean> {
  const now = useRuntime().now();
  try {
    await useRuntime().db.send(
      new UpdateCommand({
        TableName: table(),
        Key: Keys.chainCheckpoint(chainId),
        UpdateExpression: "SET #block = :block, behind = :behind, floors = :floors, rev = :rev, leaseUntil = :until",
        ConditionExpression: "leaseOwner = :me",
        ExpressionAttributeNames: { "#block": "block" },
        ExpressionAttributeValues: {
          ":block": block,
          ":behind": behind,
          ":floors": floors,
          ":rev": rev,
          ":until": now + LEASE_MS,
          ":me": holder,
        },
      }),
    );
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

/** Gives the lease up so the next invocation starts at once. */
export async function release(chainId: number, holder: string): Promise<void> {
  try {
    await useRuntime().db.send(
      new UpdateCommand({
        TableName: table(),
        Key: Keys.chainCheckpoint(chainId),
        UpdateExpression: "REMOVE leaseOwner, leaseUntil",
        ConditionExpression: "leaseOwner = :me",
        ExpressionAttributeValues: { ":me": holder },
      }),
    );
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
}

/** The chain's checkpoint (tests, tools): the head of the last pass (workflows listed in `behind` stand earlier). */
export async function checkpointOf(chainId: number): Promise<number | undefined> {
  const out = await useRuntime().db.send(new GetCommand({ TableName: table(), Key: Keys.chainCheckpoint(chainId), ConsistentRead: true }));
  return typeof out.Item?.block === "number" ? out.Item.block : undefined;
}

/** Forgets the chain's checkpoint (tests, operators): the next pass starts at the head. */
export async function resetCheckpoint(chainId: number): Promise<void> {
  await useRuntime().db.send(new DeleteCommand({ TableName: table(), Key: Keys.chainCheckpoint(chainId) }));
}

/** Where a workflow stood at the last write: its own cursor, its owner's floor, or the checkpoint's block. */
export function cursorOf(p: Persisted, entry: WatchEntry): number {
  const block = p.block!;
  return Math.min(p.behind[entry.workflowId] ?? p.floors[ownerOf(entry) || NO_OWNER] ?? block, block);
}
