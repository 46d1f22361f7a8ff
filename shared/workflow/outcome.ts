/** The outcome of a run (§8.2): consecutive errors, and the failure they cause at `consecutive_error_limit`. */
import { consecutiveErrorsOf, countConsecutiveError, failItem, resetConsecutiveErrors } from "../store/entities/workflow";
import { stopFiring } from "./scheduler/install";
import * as Watch from "./watch-registry";
import type { WorkflowRecord } from "./record";
import { MAX_ATTEMPTS, read, fromItems } from "./stored";
import { isConditionFailure } from "../store/table";
import { writeReleasingSlot } from "./slots";
import { useRuntime } from "../current-runtime";
import { forgetExpiry } from "../store/entities/expiry";

/**
 * What a run saw of its workflow's consecutive errors when it began (`outcomeHint` of the record the runner reads at
 * its start), so that its success or failure need not read them again at its end.
 */
export interface OutcomeHint {
  consecutiveErrors: number;
  /** This process's last error counted on the workflow before the run read it (errorMark; 0: none remembered). */
  lastErrorHere: number;
}

/** Per workflow: the sequence number of the last error this process counted on it (bounded; forgetting is safe). */
const lastErrorHere = new Map<string, number>();
let errorSequence = 0;
const REMEMBERED_WORKFLOWS = 10_000;

/** This process's last error counted on workflow `id`: taken by a run before it reads its workflow (`outcomeHint`). */
export const errorMark = (id: string): number => lastErrorHere.get(id) ?? 0;

/** The hint of a run that took `mark` (errorMark), then read `record`, at its start. */
export const outcomeHint = (record: WorkflowRecord, mark: number): OutcomeHint => ({
  consecutiveErrors: record.consecutiveErrors ?? 0,
  lastErrorHere: mark,
});

/**
 * The end of a run (§8.2). An `error` adds one to the consecutive errors; the one that reaches
 * `consecutive_error_limit` turns an enabled or disabled (unexpired) workflow `failed` / CONSECUTIVE_ERRORS with
 * `completedAt = endAt`, freeing its slot. `success` and `failed` reset the count, written only when it is not
 * already 0, so a workflow whose runs succeed gets no write per run. Whether it is 0: with the run's `hint`, from
 * what the run read at its start when that was 0 and this process counted no error on the workflow since (no
 * request at all); else one strongly consistent read decides. So within a process the count is exact; an error
 * counted by another process (another runner function in AWS) while a success was running is ordered after that
 * success, as if it had ended later. A deleted workflow is ignored.
 */
export async function recordOutcome(id: string, status: "success" | "failed" | "error", endAt: number, hint?: OutcomeHint): Promise<void> {
  const { config } = useRuntime();
  if (status !== "error") {
    if (hint && hint.consecutiveErrors === 0 && hint.lastErrorHere === (lastErrorHere.get(id) ?? 0)) return;
    const errors = await consecutiveErrorsOf(id);
    if (errors === undefined || !(errors > 0)) return;
    try {
      await resetConsecutiveErrors(id);
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
    }
    return;
  }
  let updated: WorkflowRecord;
  try {
    updated = (await fromItems([await countConsecutiveError(id)]))[0]!;
  } catch (err) {
    if (isConditionFailure(err)) return;
    throw err;
  }
  // After the count landed: a run that took its mark before this and read the count before it landed sees the
  // mark moved, and reads at its end.
  lastErrorHere.delete(id);
  lastErrorHere.set(id, ++errorSequence);
  if (lastErrorHere.size > REMEMBERED_WORKFLOWS) lastErrorHere.delete(lastErrorHere.keys().next().value!);
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
