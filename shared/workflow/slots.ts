/**
 * The active cap (§4.1; ./workflow.ts, module header): writes that take or give back a slot of the owner's counter
 * in the same transaction, the release of expired slot-holders, the write that completes a workflow, and the
 * expiry entry's removal.
 */
import { TransactWriteCommand } from "@aws-sdk/lib-dynamodb";
import { quotaReached } from "../errors";
import { useRuntime } from "../runtime";
import { Keys } from "../store/keys";
import { queryPages } from "../store/query";
import { decrement, incrementBelow } from "../store/counters";
import { Index, cancellationReasons } from "../store/table";
import { type Address } from "../address";
import { log } from "../log";
import type { CompletionReason } from "./record";
import { MAX_ATTEMPTS, table, ACTIVE_WORKFLOWS, errorName, backoff, slotIs } from "./stored";

/**
 * Runs `write` (one transaction item) together with +1 on the owner's active counter below the cap. At the cap the
 * owner's expired slot-holders are released once and it is tried again; then 429 WORKFLOWS_LIMIT_REACHED.
 * Returns false when `write`'s own condition failed (the caller re-reads and decides). `also`: more items written
 * in the same transaction, after the counter.
 */
export async function takeSlot(
  owner: Address,
  write: () => Record<string, unknown>,
  also: Record<string, unknown>[] = [],
): Promise<boolean> {
  const max = useRuntime().config.limits.maxActiveWorkflowsPerOwner;
  let released = false;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    try {
      await useRuntime().db.send(
        new TransactWriteCommand({ TransactItems: [write(), incrementBelow(owner, ACTIVE_WORKFLOWS, max), ...also] as never }),
      );
      return true;
    } catch (err) {
      if (errorName(err) !== "TransactionCanceledException") throw err;
      const [recordReason, counterReason] = cancellationReasons(err);
      if (recordReason === "ConditionalCheckFailed") return false;
      if (counterReason === "ConditionalCheckFailed") {
        if (released) throw quotaReached("WORKFLOWS_LIMIT_REACHED", "active workflows", max);
        await releaseExpiredSlots(owner, useRuntime().now());
        released = true;
        continue;
      }
      await backoff(attempt); // TransactionConflict
    }
  }
  throw new Error("Workflow write kept conflicting with concurrent writes");
}

/** Gives back the slots of the owner's workflows that expired while holding one; returns how many. */
async function releaseExpiredSlots(owner: Address, now: number): Promise<number> {
  let released = 0;
  for await (const out of queryPages({
    TableName: table(),
    IndexName: Index.gsi1,
    KeyConditionExpression: "gsi1pk = :pk",
    FilterExpression: "holdsSlot = :true AND expiredAt <= :now",
    ExpressionAttributeValues: { ":pk": Keys.workflowByOwner(owner, "").gsi1pk, ":true": true, ":now": now },
    ProjectionExpression: "id",
  })) {
    for (const item of out.Items ?? []) {
      try {
        await useRuntime().db.send(
          new TransactWriteCommand({
            TransactItems: [
              {
                Update: {
                  TableName: table(),
                  Key: Keys.workflow(String(item.id)),
                  UpdateExpression: "SET holdsSlot = :false",
                  ConditionExpression: "holdsSlot = :true AND expiredAt <= :now",
                  ExpressionAttributeValues: { ":true": true, ":false": false, ":now": now },
                },
              },
              decrement(owner, ACTIVE_WORKFLOWS),
            ],
          }),
        );
        released += 1;
      } catch (err) {
        if (errorName(err) !== "TransactionCanceledException") throw err; // released meanwhile: fine
      }
    }
  }
  if (released > 0) log.info("released slots of expired workflows", { owner: owner.toLowerCase(), released });
  return released;
}

/**
 * Runs `write` (one transaction item on a workflow) with −1 on the owner's counter when `release`. A counter that
 * is already zero (out of step, e.g. records written before the counter existed) never blocks the write: it is
 * then done alone. Returns false when `write`'s condition failed.
 */
export async function writeReleasingSlot(owner: Address, write: Record<string, unknown>, release: boolean): Promise<boolean> {
  const { db } = useRuntime();
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const items = release ? [write, decrement(owner, ACTIVE_WORKFLOWS)] : [write];
    try {
      await db.send(new TransactWriteCommand({ TransactItems: items as never }));
      return true;
    } catch (err) {
      if (errorName(err) !== "TransactionCanceledException") throw err;
      const [recordReason, counterReason] = cancellationReasons(err);
      if (recordReason === "ConditionalCheckFailed") return false;
      if (counterReason === "ConditionalCheckFailed") {
        log.warn("active workflow counter out of step; writing without decrement", { owner: owner.toLowerCase() });
        release = false;
        continue;
      }
      await backoff(attempt);
    }
  }
  throw new Error("Workflow write kept conflicting with concurrent writes");
}

/** Deletes the workflow's expiry entry (pattern 21), if any. */
export { forgetExpiry } from "../store/entities/expiry";

/**
 * The write that completes workflow `id` (§8.2): status `completed` with `reason`, `completedAt` set to the update
 * expression's operand `completedAt` (":now", or an attribute such as "expiredAt"), `updatedAt` = `now`, the active
 * slot released; only while the workflow is enabled or disabled, `condition` holds and its slot is as read (`held`).
 */
export function completionUpdate(
  id: string,
  held: boolean,
  c: { reason: CompletionReason; completedAt: ":now" | "expiredAt"; condition: string; now: number },
) {
  const slot = slotIs(held);
  return {
    Update: {
      TableName: table(),
      Key: Keys.workflow(id),
      UpdateExpression: `SET #st = :completed, completionReason = :reason, completedAt = ${c.completedAt}, holdsSlot = :false, updatedAt = :now`,
      ConditionExpression: `#st IN (:enabled, :disabled) AND ${c.condition} AND ${slot.expression}`,
      ExpressionAttributeNames: { "#st": "status" },
      ExpressionAttributeValues: {
        ":completed": "completed",
        ":reason": c.reason,
        ":false": false,
        ":now": c.now,
        ":enabled": "enabled",
        ":disabled": "disabled",
        ...slot.values,
      },
    },
  };
}
