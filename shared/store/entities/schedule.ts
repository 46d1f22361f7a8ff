/**
 * Local schedule item of a time-triggered workflow (store pattern 16; the local scheduler, shared/workflow/scheduler/local.ts):
 * `pk = WF#<id>`, `sk = SCHEDULE`, holding its next fire; due ones on the sparse gsi2 `SCHEDULE#due` ordered by
 * `<nextFireAt padded to 15>#<id>`. Moving an item to its next fire, or removing it after its last, is conditional on
 * the `nextFireAt` that was read, so two loops on one table (or a pause racing a fire) never resurrect or skip one.
 */
import { defineEntity } from "../entity";
import { set, when } from "../expression";
import { Index, landed } from "../table";

const DUE = "SCHEDULE#due";
const pad = (ms: number) => String(ms).padStart(15, "0");
/** Store pattern 16 (to move into shared/store/item-keys.ts beside the other builders). */
export const scheduleKey = (workflowId: string) => ({ pk: `WF#${workflowId}`, sk: "SCHEDULE" });
const dueKey = (nextFireAt: number, workflowId: string) => ({ gsi2pk: DUE, gsi2sk: `${pad(nextFireAt)}#${workflowId}` });

export interface ScheduleEntry {
  workflowId: string;
  triggerId: string;
  nextFireAt: number;
  /** The workflow's owner; absent on items written before it was recorded. */
  owner?: string;
}

const ScheduleItem = defineEntity<ScheduleEntry, string>({ type: "schedule", version: 1, key: scheduleKey });

/** Writes (or replaces) the workflow's item with its next fire. */
export async function putSchedule(entry: Required<ScheduleEntry>): Promise<void> {
  const { workflowId, owner, triggerId, nextFireAt } = entry;
  await ScheduleItem.put(workflowId, { ...dueKey(nextFireAt, workflowId), workflowId, owner, triggerId, nextFireAt });
}

export async function removeSchedule(workflowId: string): Promise<void> {
  await ScheduleItem.delete(workflowId);
}

/** Up to `limit` items due at or before `now`, in due order (one Query). */
export async function dueSchedules(now: number, limit: number): Promise<ScheduleEntry[]> {
  const page = await ScheduleItem.query({ index: Index.gsi2, pk: DUE, sk: { le: `${pad(now)}#~` }, limit });
  return page.items;
}

/** The earliest due instant, if any (one Query of one item). */
export async function earliestSchedule(): Promise<number | undefined> {
  const page = await ScheduleItem.query({ index: Index.gsi2, pk: DUE, limit: 1 });
  return page.items[0]?.nextFireAt;
}

/**
 * Moves the item from the fire at `from` to `next` (recording `owner`: items written before it get it on their
 * first advance); false when the item no longer stands at `from` (another loop advanced it, or a pause removed it).
 */
export async function advanceSchedule(workflowId: string, from: number, next: number, owner: string): Promise<boolean> {
  const actions = [set("nextFireAt", next), set("gsi2sk", dueKey(next, workflowId).gsi2sk), set("owner", owner)];
  return landed(ScheduleItem.update(workflowId, actions, { if: when.eq("nextFireAt", from) }));
}

/** Removes the item after its last fire at `from`; false when it no longer stands at `from`. */
export async function dropSchedule(workflowId: string, from: number): Promise<boolean> {
  return landed(ScheduleItem.delete(workflowId, { if: when.eq("nextFireAt", from) }));
}
