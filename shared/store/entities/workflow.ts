/**
 * The workflow record (store patterns 10-12): one item per workflow, `pk = WF#<id>`, `sk = WORKFLOW`, listed per
 * owner on gsi1 (newest first) and per wallet on gsi2. The domain's stored form (item `v` 2, the client's document
 * as JSON text) is built and read by shared/workflow/stored.ts; this module owns the keys, the reads and writes and
 * their conditions.
 */
import { defineEntity } from "../entity";
import { add, copy, remove, set, when } from "../expression";
import { Keys } from "../keys";

export const WorkflowItem = defineEntity({ type: "workflow", version: 2, key: (id: string) => Keys.workflow(id) });

/** The owner recorded on the workflow item (an eventually consistent read of that attribute), if the item exists. */
export async function workflowOwner(id: string): Promise<string | undefined> {
  const item = await WorkflowItem.get(id, { attributes: ["owner"] });
  return typeof item?.owner === "string" ? item.owner : undefined;
}

// ---------------------------------------------------------------------------------------------------------
// The claim's count update (shared/workflow/claim.ts, "Claiming", step 2)

/** Runnable (API.md §8.2) at `now`, and the claim recording its index under `marker` not landed yet. */
const runnable = (now: number, marker: string) =>
  when.and(
    when.exists(),
    when.eq("status", "enabled"),
    when.lt("executionCount", when.attr("maxExecution")),
    when.or(when.notExists("expiredAt"), when.gt("expiredAt", now)),
    when.or(when.notExists("startAt"), when.le("startAt", now)),
    when.notExists(marker),
  );

/** +1 on the count, the count before it recorded under `marker`, the run's time; index attributes `closed` removed. */
const countActions = (marker: string, now: number, closed: readonly string[]) => [
  add("executionCount", 1),
  copy(marker, "executionCount"),
  set("lastRanAt", now),
  set("updatedAt", now),
  ...closed.map((name) => remove(name)),
];

/**
 * Takes the next index of a runnable workflow (one conditional UpdateItem, ReturnValues UPDATED_NEW): the index it
 * gave. Throws ConditionalCheckFailedException when the workflow is gone, not runnable or this claim's index is taken.
 */
export async function takeIndex(id: string, marker: string, now: number, closed: readonly string[]): Promise<number> {
  const updated = await WorkflowItem.update(id, countActions(marker, now, closed), {
    if: runnable(now, marker),
    returnValues: "UPDATED_NEW",
  });
  return Number(updated?.[marker]);
}

/** Transaction item: the same count update (the sweeper's, beside a check of the intent). */
export const takeIndexItem = (id: string, marker: string, now: number) =>
  WorkflowItem.tx.update(id, countActions(marker, now, []), { if: runnable(now, marker) });
