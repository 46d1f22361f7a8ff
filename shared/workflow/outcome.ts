/** The outcome of a run (§8.2): consecutive errors, and the failure they cause at `consecutive_error_limit`. */
import { GetCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { useRuntime } from "../runtime";
import { Keys } from "../store/keys";
import { stopFiring } from "./scheduler";
import * as Watch from "./watch-registry";
import type { WorkflowRecord } from "./record";
import { MAX_ATTEMPTS, table, errorName, slotIs, read, fromItem } from "./stored";
import { writeReleasingSlot, forgetExpiry } from "./slots";

/**
 * The end of a run (§8.2). An `error` adds one to the consecutive errors; the one that reaches
 * `consecutive_error_limit` turns an enabled or disabled (unexpired) workflow `failed` / CONSECUTIVE_ERRORS with
 * `completedAt = endAt`, freeing its slot. `success` and `failed` reset the count, written only when it is not
 * already 0 (one strongly consistent read decides), so a workflow whose runs succeed gets no write per run. A
 * deleted workflow is ignored.
 */
export async function recordOutcome(id: string, status: "success" | "failed" | "error", endAt: number): Promise<void> {
  const { db, config } = useRuntime();
  const key = Keys.workflow(id);
  if (status !== "error") {
    const { Item } = await db.send(
      new GetCommand({ TableName: table(), Key: key, ConsistentRead: true, ProjectionExpression: "consecutiveErrors" }),
    );
    if (!Item || !(Number(Item.consecutiveErrors) > 0)) return;
    try {
      await db.send(
        new UpdateCommand({
          TableName: table(),
          Key: key,
          UpdateExpression: "SET consecutiveErrors = :zero",
          ConditionExpression: "attribute_exists(pk) AND consecutiveErrors > :zero",
          ExpressionAttributeValues: { ":zero": 0 },
        }),
      );
    } catch (err) {
      if (errorName(err) !== "ConditionalCheckFailedException") throw err;
    }
    return;
  }
  let updated: WorkflowRecord;
  try {
    const out = await db.send(
      new UpdateCommand({
        TableName: table(),
        Key: key,
        UpdateExpression: "SET consecutiveErrors = if_not_exists(consecutiveErrors, :zero) + :one",
        ConditionExpression: "attribute_exists(pk)",
        ExpressionAttributeValues: { ":zero": 0, ":one": 1 },
        ReturnValues: "ALL_NEW",
      }),
    );
    updated = fromItem(out.Attributes ?? {});
  } catch (err) {
    if (errorName(err) === "ConditionalCheckFailedException") return;
    throw err;
  }
  const limit = config.limits.consecutiveErrorLimit;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    if (updated.consecutiveErrors < limit) return;
    if (updated.status !== "enabled" && updated.status !== "disabled") return;
    if (updated.expiredAt !== undefined && updated.expiredAt <= endAt) return; // already completed (EXPIRED)
    const held = updated.holdsSlot === true;
    const slot = slotIs(held);
    const write = {
      Update: {
        TableName: table(),
        Key: key,
        UpdateExpression: "SET #st = :failed, completionReason = :reason, completedAt = :endAt, holdsSlot = :false, updatedAt = :endAt",
        ConditionExpression: `#st IN (:enabled, :disabled) AND consecutiveErrors >= :limit AND (attribute_not_exists(expiredAt) OR expiredAt > :endAt) AND ${slot.expression}`,
        ExpressionAttributeNames: { "#st": "status" },
        ExpressionAttributeValues: {
          ":failed": "failed",
          ":reason": "CONSECUTIVE_ERRORS",
          ":endAt": endAt,
          ":false": false,
          ":enabled": "enabled",
          ":disabled": "disabled",
          ":limit": limit,
          ...slot.values,
        },
      },
    };
    if (await writeReleasingSlot(updated.owner, write, held))
      return void (await Promise.all([stopFiring(updated), Watch.unwatch(id), forgetExpiry(id)]));
    const again = await read(id);
    if (!again) return;
    updated = again;
  }
}
