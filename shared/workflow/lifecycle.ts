/**
 * A workflow's life after create: pause and resume (§8.8.6), cancel (§8.8.5), and the sweeper's expiry pass (§8.2;
 * ./workflow.ts, module header).
 */
import { useOwner } from "../context";
import { deleteItem, keepDefinition, pauseItem, resumeItem, workflowSecretNames } from "../store/entities/workflow";
import { log } from "../log";
import * as Secret from "../secret/secret";
import { startFiring, stopFiring } from "./scheduler/install";
import * as Watch from "./watch-registry";
import type { WorkflowRecord } from "./record";
import {
  MAX_ATTEMPTS,
  terminal,
  backoff,
  normaliseId,
  sameOwner,
  isExpired,
  read,
  type WorkflowInfo,
  effectiveStatus,
  toInfo,
  requireOwned,
  documentOf,
} from "./stored";
import { takeSlot, writeReleasingSlot, completionUpdate } from "./slots";
import { dueExpiries, forgetExpiry } from "../store/entities/expiry";
import { endWaiting, waitingOf } from "../store/entities/execution";
import { kinds } from "../kinds/kinds";
import { useRuntime } from "../current-runtime";

// ---------------------------------------------------------------------------------------------------------
// Pause, resume (§8.8.6)

/** POST /workflows/{id}:pause: enabled → disabled (its slot freed); disabled stays; terminal → 409. */
export async function pause(rawId: string): Promise<WorkflowInfo> {
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const record = await requireOwned(rawId);
    const now = useRuntime().now();
    const e = effectiveStatus(record, now);
    if (e.status === "completed" || e.status === "failed") throw terminal();
    if (e.status === "disabled") return toInfo(record, now);
    const update = pauseItem(record.id, record.holdsSlot === true, now);
    const written = await writeReleasingSlot(record.owner, update, record.holdsSlot === true);
    if (written) {
      await stopFiring(record);
      await Watch.unwatch(record.id);
      return toInfo({ ...record, status: "disabled", holdsSlot: false, updatedAt: now }, now);
    }
    await backoff(attempt);
  }
  throw new Error("Workflow pause kept conflicting with concurrent writes");
}

/** POST /workflows/{id}:resume: disabled → enabled under the cap (429); enabled stays (no quota check); terminal → 409. */
export async function resume(rawId: string): Promise<WorkflowInfo> {
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const record = await requireOwned(rawId);
    const now = useRuntime().now();
    const e = effectiveStatus(record, now);
    if (e.status === "completed" || e.status === "failed") throw terminal();
    if (e.status === "enabled") return toInfo(record, now);
    const written = await takeSlot(record.owner, () => resumeItem(record.id, now));
    if (written) {
      await startFiring(record, now);
      await Watch.watch(record, now);
      return toInfo({ ...record, status: "enabled", holdsSlot: true, updatedAt: now }, now);
    }
    await backoff(attempt);
  }
  throw new Error("Workflow resume kept conflicting with concurrent writes");
}

// ---------------------------------------------------------------------------------------------------------
// Cancel (§8.8.5)

/**
 * DELETE /workflows/{id}: always succeeds. For the caller's workflow: the record goes at once (its slot freed),
 * automatic firing stops, and its workflow-scoped secrets are deleted. Executions are untouched (pattern 13 lives
 * in its own partition). Another owner's workflow is left alone; unknown and malformed ids do nothing.
 */
export async function remove(rawId: string): Promise<void> {
  const owner = useOwner();
  const id = normaliseId(rawId);
  if (!id) return;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const record = await read(id);
    if (record && !sameOwner(record.owner, owner)) return;
    if (record) {
      // Executions' steps name their node's config in the definition: a record stored with its document inside
      // (item v 1-2) leaves it in an item of its own first.
      if (record.v !== 3) await keepDefinition(id, documentOf(record));
      const held = record.holdsSlot === true;
      const del = deleteItem(id, held);
      if (!(await writeReleasingSlot(record.owner, del, held))) {
        await backoff(attempt);
        continue;
      }
      await stopAutomaticFiring(record);
      await endWaitingRuns(record);
    }
    // Also when the record was already gone: a retried delete finishes what an interrupted one began.
    await removeWorkflowSecrets(id);
    return;
  }
  throw new Error("Workflow delete kept conflicting with concurrent writes");
}

/**
 * A deleted workflow's waiting executions end `error` "workflow was deleted" (API.md §17.1.2); only a workflow
 * with a node that can wait has any. One that is resumed meanwhile ends the same way in its runner.
 */
async function endWaitingRuns(record: WorkflowRecord): Promise<void> {
  if (!record.nodes.some((node) => kinds.node(node.type)?.waits)) return;
  const endAt = useRuntime().now();
  for (const execution of await waitingOf(record.id)) await endWaiting(execution, { endAt, error: "workflow was deleted" });
}

/** The caller's secrets scoped to workflow `id` (store pattern 3), each deleted by the secrets module. */
async function removeWorkflowSecrets(id: string): Promise<void> {
  const owner = useOwner();
  for await (const names of workflowSecretNames(owner, id)) {
    for (const name of names) await Secret.remove(name, { workflowId: id });
  }
}

/**
 * Seam for automatic firing: the scheduler (cron, fixedTime: store pattern 16) and the chain watchers (block,
 * event: pattern 19) remove the workflow's schedule and watch entries here when they exist. Until then there is
 * nothing to remove; a fire that still arrives finds no record (`getForRun` → undefined) and runs nothing.
 */
async function stopAutomaticFiring(record: WorkflowRecord): Promise<void> {
  await stopFiring(record);
  await Watch.unwatch(record.id);
  await forgetExpiry(record.id);
}

// ---------------------------------------------------------------------------------------------------------
// Expiry in the background (§8.2)

/**
 * The sweeper's pass: up to `max` workflows whose `expiredAt` is at or before `now` (pattern 21, oldest first) are
 * stored `completed` / EXPIRED with `completedAt = expiredAt`, their slot freed with the counter in the same
 * transaction, their schedules and watch entry removed, then their expiry entry deleted. An entry whose workflow
 * is gone or already terminal is only cleaned up. Returns the ids stored expired by this pass.
 */
export async function expireDue(now: number, max: number): Promise<string[]> {
  const due = await dueExpiries(now, max);
  const expired: string[] = [];
  for (const id of due) {
    let record = await read(id);
    for (let attempt = 1; record && isExpired(record, now) && attempt <= MAX_ATTEMPTS; attempt++) {
      const held = record.holdsSlot === true;
      const write = completionUpdate(id, held, { reason: "EXPIRED", cause: "expired", now });
      if (await writeReleasingSlot(record.owner, write, held)) {
        expired.push(id);
        break;
      }
      record = await read(id);
    }
    if (record && (record.status === "enabled" || record.status === "disabled") && !expired.includes(id)) {
      if (!isExpired(record, now)) continue; // not due after all (kept for a later pass)
      throw new Error(`Workflow ${id} expiry kept conflicting with concurrent writes`);
    }
    if (record) await Promise.all([stopFiring(record), Watch.unwatch(id)]);
    await forgetExpiry(id);
  }
  if (expired.length > 0) log.info("stored expired workflows", { expired: expired.length });
  return expired;
}
