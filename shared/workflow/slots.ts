/**
 * The active cap (§4.1; ./workflow.ts, module header): writes that take or give back a slot of the owner's counter
 * in the same transaction, the release of expired slot-holders, the write that completes a workflow, and the
 * expiry entry's removal.
 */
import { quotaReached } from "../errors";
import { transact, type TransactItem } from "../store/entity";
import { completeItem, expiredSlotHolders, releaseExpiredSlotItem } from "../store/entities/workflow";
import { decrement, incrementBelow } from "../store/counters";
import { failedConditions, isConditionFailure } from "../store/table";
import { type Address } from "../address";
import { log } from "../log";
import type { CompletionReason } from "./record";
import { MAX_ATTEMPTS, ACTIVE_WORKFLOWS, backoff } from "./stored";
import { useRuntime } from "../current-runtime";

/**
 * Runs `write` (one transaction item) together with +1 on the owner's active counter below the cap. At the cap the
 * owner's expired slot-holders are released once and it is tried again; then 429 WORKFLOWS_LIMIT_REACHED.
 * Returns false when `write`'s own condition failed (the caller re-reads and decides). `also`: more items written
 * in the same transaction, after the counter.
 */
export async function takeSlot(owner: Address, write: () => TransactItem, also: TransactItem[] = []): Promise<boolean> {
  const max = useRuntime().config.limits.maxActiveWorkflowsPerOwner;
  let released = false;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const outcome = await recordAndCounter([write(), incrementBelow(owner, ACTIVE_WORKFLOWS, max), ...also]);
    if (outcome !== "counter failed") {
      if (outcome !== "conflict") return outcome === "written";
      await backoff(attempt);
      continue;
    }
    if (released) throw quotaReached("WORKFLOWS_LIMIT_REACHED", "active workflows", max);
    await releaseExpiredSlots(owner, useRuntime().now());
    released = true;
  }
  throw new Error("Workflow write kept conflicting with concurrent writes");
}

/**
 * One transaction of a record's write and its counter's change (then anything else): `written`, or whose condition
 * failed (the record's first), or `conflict` (concurrent transactions; try again).
 */
async function recordAndCounter(items: TransactItem[]): Promise<"written" | "record failed" | "counter failed" | "conflict"> {
  try {
    await transact(items);
    return "written";
  } catch (err) {
    const [recordFailed, counterFailed] = failedConditions(err);
    if (recordFailed) return "record failed";
    if (counterFailed) return "counter failed";
    return "conflict";
  }
}

/** Gives back the slots of the owner's workflows that expired while holding one; returns how many. */
async function releaseExpiredSlots(owner: Address, now: number): Promise<number> {
  let released = 0;
  for await (const ids of expiredSlotHolders(owner, now)) {
    for (const id of ids) {
      try {
        await transact([releaseExpiredSlotItem(id, now), decrement(owner, ACTIVE_WORKFLOWS)]);
        released += 1;
      } catch (err) {
        if (!isConditionFailure(err)) throw err; // released meanwhile: fine
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
export async function writeReleasingSlot(owner: Address, write: TransactItem, release: boolean): Promise<boolean> {
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const outcome = await recordAndCounter(release ? [write, decrement(owner, ACTIVE_WORKFLOWS)] : [write]);
    if (outcome === "written" || outcome === "record failed") return outcome === "written";
    if (outcome === "counter failed") {
      log.warn("active workflow counter out of step; writing without decrement", { owner: owner.toLowerCase() });
      release = false;
    } else await backoff(attempt);
  }
  throw new Error("Workflow write kept conflicting with concurrent writes");
}

/** Deletes the workflow's expiry entry (pattern 21), if any. */

/**
 * The write that completes workflow `id` (§8.2): status `completed` with `reason`, `completedAt` the claim's time
 * (`atCap`: only while `executionCount >= maxExecution`) or its `expiredAt` (`expired`: only while at or before
 * `now`), `updatedAt` = `now`, the active slot released; only while the workflow is enabled or disabled and its slot
 * is as read (`held`).
 */
export function completionUpdate(id: string, held: boolean, c: { reason: CompletionReason; cause: "atCap" | "expired"; now: number }) {
  return completeItem(id, held, c);
}
