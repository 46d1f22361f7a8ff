/** The outcome of a run (§8.2): consecutive errors, and the failure they cause at `consecutive_error_limit`. */
import { useRuntime } from "../runtime";
import { consecutiveErrorsOf, countConsecutiveError, failItem, resetConsecutiveErrors } from "../store/entities/workflow";
import { stopFiring } from "./scheduler";
import * as Watch from "./watch-registry";
import type { WorkflowRecord } from "./record";
import { MAX_ATTEMPTS, errorName, read, fromItem } from "./stored";
import { writeReleasingSlot, forgetExpiry } from "./slots";

/**
 * The end of a run (§8.2). An `error` adds one to the consecutive errors; the one that reaches
 * `consecutive_error_limit` turns an enabled or disabled (unexpired) workflow `failed` / CONSECUTIVE_ERRORS with
 * `completedAt = endAt`, freeing its slot. `success` and `failed` reset the count, written only when it is not
 * already 0 (one strongly consistent read decides), so a workflow whose runs succeed gets no write per run. A
 * deleted workflow is ignored.
 */
export async function recordOutcome(id: string, status: "success" | "failed" | "error", endAt: number): Promise<void> {
  const { config } = useRuntime();
  if (status !== "error") {
    const errors = await consecutiveErrorsOf(id);
    if (errors === undefined || !(errors > 0)) return;
    try {
      await resetConsecutiveErrors(id);
    } catch (err) {
      if (errorName(err) !== "ConditionalCheckFailedException") throw err;
    }
    return;
  }
  let updated: WorkflowRecord;
  try {
    updated = fromItem(await countConsecutiveError(id));
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
    const write = failItem(id, held, endAt, limit);
    if (await writeReleasingSlot(updated.owner, write, held))
      return void (await Promise.all([stopFiring(updated), Watch.unwatch(id), forgetExpiry(id)]));
    const again = await read(id);
    if (!again) return;
    updated = again;
  }
}
