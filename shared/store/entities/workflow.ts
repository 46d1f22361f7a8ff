/**
 * The workflow record (store patterns 10-12): one item per workflow, `pk = WF#<id>`, `sk = WORKFLOW`, listed per
 * owner on gsi1 (newest first) and per wallet on gsi2. The domain's stored form (item `v` 2, the client's document
 * as JSON text) is built and read by shared/workflow/stored.ts; this module owns the keys, the reads and writes and
 * their conditions.
 */
import { defineEntity } from "../entity";
import { Keys } from "../keys";

export const WorkflowItem = defineEntity({ type: "workflow", version: 2, key: (id: string) => Keys.workflow(id) });

/** The owner recorded on the workflow item (an eventually consistent read of that attribute), if the item exists. */
export async function workflowOwner(id: string): Promise<string | undefined> {
  const item = await WorkflowItem.get(id, { attributes: ["owner"] });
  return typeof item?.owner === "string" ? item.owner : undefined;
}
