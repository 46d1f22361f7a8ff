/**
 * Expiry entry of a workflow with `expiredAt` (store pattern 21): beside the workflow record, listed by due time on
 * the sparse, keys-only gsi3 `EXPIRY#due#<shard>` (`<expiredAt padded>#<id>`; entries written before gsi3 on gsi2). Written in the create transaction, deleted by the
 * sweeper's expiry pass once the workflow is stored expired, and on cancel, completion and failure.
 */
import { defineEntity } from "../entity";
import { DuePartition, Keys } from "../item-keys";
import { dueTargets, fromShards } from "../query";

interface ExpiryItem {
  workflowId: string;
  expiredAt: number;
}

const ExpiryEntry = defineEntity<ExpiryItem, string>({
  type: "expiry",
  version: 1,
  key: (workflowId: string) => Keys.expiry(workflowId),
});

/** Transaction item: the entry of workflow `workflowId` expiring at `expiredAt` (ms). */
export function putExpiry(workflowId: string, expiredAt: number) {
  return ExpiryEntry.tx.put(workflowId, { ...Keys.expiryDue(expiredAt, workflowId), workflowId, expiredAt });
}

/** Deletes the workflow's entry, if any. */
export async function forgetExpiry(workflowId: string): Promise<void> {
  await ExpiryEntry.delete(workflowId);
}

/** The ids of up to `max` workflows whose `expiredAt` is at or before `now`, oldest first (one Query). */
export async function dueExpiries(now: number, max: number): Promise<string[]> {
  // Every entry due at or before `now` sorts below the padded `now + 1` (the `#` and the id follow it).
  const bound = Keys.expiryDue(now + 1, "").gsi3sk.slice(0, -1);
  const items = await fromShards(dueTargets(DuePartition.expiry), max, async ({ index, pk }) => {
    const page = await ExpiryEntry.query({ index, pk, sk: { lt: bound }, attributes: ["workflowId"], limit: max });
    return page.items;
  });
  return items.map((item) => item.workflowId);
}
