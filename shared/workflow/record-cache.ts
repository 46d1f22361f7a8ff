/**
 * Workflow records as this process last read them (./claim.ts, the manual trigger's claim): a bounded cache by id.
 * A workflow's definition never changes after create (API.md has no route that changes one: id, owner, wallet,
 * chain, trigger, nodes, edges, inputVariables, startAt, expiredAt and maxExecution stay as created); its status,
 * counts and times do, so a cached record is trusted for those immutable members only. A deleted workflow's entry
 * is harmless: whatever is done with it next (the claim's count update) finds the item gone.
 */
import { useOwner } from "../context";
import type { WorkflowRecord } from "./record";
import { normaliseId, requireOwned, sameOwner, workflowNotFound } from "./stored";

/** At most this many records, and about this many bytes of their definitions (a document is at most 350 KiB). */
const MAX_RECORDS = 1_000;
const MAX_BYTES = 32 * 1024 * 1024;

const records = new Map<string, { record: WorkflowRecord; bytes: number }>();
let bytes = 0;

/** The record last remembered for `id` (its immutable members), or undefined. */
function cachedRecord(id: string): WorkflowRecord | undefined {
  const entry = records.get(id);
  if (!entry) return undefined;
  records.delete(id); // most recently used last
  records.set(id, entry);
  return entry.record;
}

/** Remembers a record just read (least recently used ones make room). */
function rememberRecord(record: WorkflowRecord): void {
  const previous = records.get(record.id);
  if (previous) {
    records.delete(record.id);
    bytes -= previous.bytes;
  }
  const size = JSON.stringify([record.trigger, record.nodes, record.edges, record.inputVariables]).length;
  if (size > MAX_BYTES / 8) return;
  records.set(record.id, { record, bytes: size });
  bytes += size;
  for (const [id, entry] of records) {
    if (records.size <= MAX_RECORDS && bytes <= MAX_BYTES) break;
    records.delete(id);
    bytes -= entry.bytes;
  }
}

/**
 * The caller's workflow for a manual trigger: the cached record when `useCache` and this process has one (no read;
 * `cached` true), else the record read now (strongly consistent) and remembered. 404 WORKFLOW_NOT_FOUND as
 * `requireOwned`.
 */
export async function ownedForTrigger(rawId: string, useCache: boolean): Promise<{ record: WorkflowRecord; cached: boolean }> {
  const id = normaliseId(rawId);
  const hit = useCache && id !== undefined ? cachedRecord(id) : undefined;
  if (hit) {
    if (!sameOwner(hit.owner, useOwner())) throw workflowNotFound();
    return { record: hit, cached: true };
  }
  const record = await requireOwned(rawId);
  rememberRecord(record);
  return { record, cached: false };
}
