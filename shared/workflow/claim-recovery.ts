/**
 * The sweeper's recovery of claims a crash interrupted (./claim.ts, "Claiming"): fires' intents still in flight a
 * minute after their claim, and manual claims through the journals their processes left open.
 */
import { decodeTime } from "ulid";
import { transact } from "../store/entity";
import {
  closeJournal,
  intentInFlight,
  intentsInFlightBefore,
  journalsDue,
  runInputAttributeOf,
  runMarkerExecution,
  runMarkerOf,
} from "../store/entities/claim-intent";
import { executionWritten } from "../store/entities/execution";
import { takeIndexItem } from "../store/entities/workflow";
import { failedConditions } from "../store/table";
import type { Address } from "../address";
import { log } from "../log";
import type { WorkflowRecord } from "./record";
import { read } from "./stored";
import {
  markerOf,
  INTENT_RECOVERY_AFTER_MS,
  MARKER_RECOVERY_AFTER_MS,
  type Intent,
  type KeptRunInput,
  indexOf,
  finishClaim,
  finishRunClaim,
  closeIntent,
  removeMarkers,
} from "./claim";

/** An execution the sweeper's recovery claimed or finished: its run must be handed to a runner. */
export interface RecoveredClaim {
  workflowId: string;
  executionId: string;
  owner: Address;
}

/**
 * The execution item of a manual claim a crash interrupted, built from what its marker kept: the same item the
 * claim would have written (the execution layer's `claimExecution` builds both).
 */
export type RunClaimBuilder = (claim: {
  workflow: WorkflowRecord;
  executionId: string;
  index: number;
  /** The claim's time (its execution id's). */
  at: number;
  runInput: KeptRunInput;
}) => Promise<Record<string, unknown>>;

/** Attributes removed per UpdateItem (an update expression is at most 4 KB). */
const REMOVED_PER_UPDATE = 200;

/**
 * The sweeper's recovery of claims a crash interrupted: up to `max` fires' intents still in flight
 * `INTENT_RECOVERY_AFTER_MS` after their claim began (oldest first), and up to `max` claim journals due. Returns the
 * executions written by this pass, whose runs the caller hands over (execution/claim.ts `recoverInterruptedClaims`).
 */
export async function recoverClaims(now: number, build: RunClaimBuilder, max = 100): Promise<RecoveredClaim[]> {
  const fromIntents = await recoverIntents(now, max);
  const fromJournals = await recoverJournals(now, build, max);
  return [...fromIntents, ...fromJournals];
}

// ---------------------------------------------------------------------------------------------------------
// Fires' intents (and manual intents written before the journals)

async function recoverIntents(now: number, max: number): Promise<RecoveredClaim[]> {
  const intents = await intentsInFlightBefore(now - INTENT_RECOVERY_AFTER_MS, max);
  const recovered: RecoveredClaim[] = [];
  for (const stored of intents) {
    const intent: Intent = {
      key: stored.key,
      isFire: stored.isFire,
      workflowId: stored.workflowId,
      execution: stored.execution,
      at: stored.claimedAt,
    };
    const done = await recoverIntent(intent, now).catch((err: unknown) => {
      log.warn("claim recovery failed; tried again on the next pass", { intent: intent.key.pk, error: (err as Error).message });
      return undefined;
    });
    if (done) recovered.push(done);
  }
  if (intents.length) log.info("recovered interrupted claims", { intents: intents.length, executions: recovered.length });
  return recovered;
}

async function recoverIntent(intent: Intent, now: number): Promise<RecoveredClaim | undefined> {
  const executionId = String(intent.execution.id);
  if (await executionWritten(intent.workflowId, executionId)) return void (await closeIntent(intent)); // only the close was missing
  const marker = markerOf(intent.key);
  let record = await read(intent.workflowId);
  if (!record) return void (await closeIntent(intent)); // deleted: nothing to run
  let index = indexOf(record, marker);
  if (index === undefined) {
    // The crash came before the count update. A manual trigger's caller got no execution: drop it. A fire is
    // claimed now, in a transaction with the check that its intent is still in flight.
    if (!intent.isFire) return void (await closeIntent(intent));
    const claimed = await claimForIntent(intent, marker, now);
    if (claimed === "closed") return undefined;
    if (claimed === "busy") return undefined; // the next pass tries again
    record = await read(intent.workflowId);
    index = record ? indexOf(record, marker) : undefined;
    if (!record || index === undefined) return void (await closeIntent(intent)); // not runnable, or deleted meanwhile
  }
  await finishClaim(record, intent, index);
  await removeMarkers(record.id, [marker]); // this process claims nothing on the workflow that would remove it
  return { workflowId: record.id, executionId, owner: record.owner };
}

/** The count update for the sweeper, together with a check that the intent is still in flight. */
async function claimForIntent(intent: Intent, marker: string, now: number): Promise<"claimed" | "closed" | "refused" | "busy"> {
  try {
    await transact([intentInFlight(intent.key), takeIndexItem(intent.workflowId, marker, now)]);
    return "claimed";
  } catch (err) {
    const [intentFailed, workflowFailed] = failedConditions(err);
    if (intentFailed) return "closed";
    if (workflowFailed) return "refused"; // the caller reads: taken meanwhile, or not runnable
    return "busy";
  }
}

// ---------------------------------------------------------------------------------------------------------
// Manual claims, through the journals their processes left open

async function recoverJournals(now: number, build: RunClaimBuilder, max: number): Promise<RecoveredClaim[]> {
  const journals = await journalsDue(now, max);
  const recovered: RecoveredClaim[] = [];
  for (const journal of journals) {
    let complete = true;
    for (const workflowId of journal.workflows) {
      try {
        recovered.push(...(await recoverRunClaims(workflowId, now, build)));
      } catch (err) {
        complete = false;
        log.warn("claim recovery failed; tried again on the next pass", { workflowId, error: (err as Error).message });
      }
    }
    if (complete) await closeJournal(journal);
  }
  if (recovered.length) log.info("recovered interrupted claims", { journals: journals.length, executions: recovered.length });
  return recovered;
}

/**
 * One manual claim by its execution id (a repeat of a crashed request, shared/store/idempotency.ts): "written" when
 * its execution is; "finished" when the crash left its marker and the execution is written now, with the index the
 * marker holds (and completion at the cap), exactly as the sweeper would; "none" when it never took an index. The
 * marker is read before the execution: a marker is removed only once its execution is written, so a claim that
 * took an index is seen by one of the two reads.
 */
export async function recoverRunClaim(
  workflowId: string,
  executionId: string,
  build: RunClaimBuilder,
): Promise<"written" | "finished" | "none"> {
  const record = await read(workflowId);
  const index = record ? indexOf(record, runMarkerOf(executionId)) : undefined;
  if (await executionWritten(workflowId, executionId)) return "written";
  if (!record || index === undefined) return "none";
  const at = decodeTime(executionId);
  const runInput = (record[runInputAttributeOf(executionId)] as KeptRunInput | undefined) ?? "{}";
  await finishRunClaim(record, await build({ workflow: record, executionId, index, at, runInput }), index, at);
  return "finished";
}

/**
 * The manual claims' markers on the workflow at least `MARKER_RECOVERY_AFTER_MS` old (by their execution ids):
 * every one whose execution is not written gets it now (with its index and run input, and completion at the cap),
 * then they are all removed with what they kept.
 */
async function recoverRunClaims(workflowId: string, now: number, build: RunClaimBuilder): Promise<RecoveredClaim[]> {
  const record = await read(workflowId);
  if (!record) return []; // deleted: its executions in flight went with it
  const item = record;
  const recovered: RecoveredClaim[] = [];
  const done: string[] = [];
  for (const marker of Object.keys(item)) {
    const executionId = runMarkerExecution(marker);
    if (executionId === undefined || decodeTime(executionId) > now - MARKER_RECOVERY_AFTER_MS) continue;
    const input = runInputAttributeOf(executionId);
    if (!(await executionWritten(workflowId, executionId))) {
      const index = Number(item[marker]);
      const at = decodeTime(executionId);
      const runInput = (item[input] as KeptRunInput | undefined) ?? "{}";
      await finishRunClaim(record, await build({ workflow: record, executionId, index, at, runInput }), index, at);
      recovered.push({ workflowId, executionId, owner: record.owner });
    }
    done.push(marker, input);
  }
  for (let i = 0; i < done.length; i += REMOVED_PER_UPDATE) await removeMarkers(workflowId, done.slice(i, i + REMOVED_PER_UPDATE));
  return recovered;
}
