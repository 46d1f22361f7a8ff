/** The claim that starts an execution (§8.8.7, §8.2, §18.4; see below); its recovery is in ./claim-recovery.ts. */
import { countMetric } from "../metrics";
import { ApiError } from "../errors";
import {
  closeIntent as closeStoredIntent,
  closedMarkers as closedOf,
  intentKey,
  isMarker,
  markerOf as markerOfKey,
  putIntent,
  runInputAttributeOf,
  runMarkerExecution,
  runMarkerOf,
} from "../store/entities/claim-intent";
import { putClaimedExecution } from "../store/entities/execution";
import { removeClaimAttributes, takeIndex as takeNextIndex, type IndexTake } from "../store/entities/workflow";
import type { TableKey } from "../store/query";
import type { Address } from "../address";
import { log } from "../log";
import { stopFiring } from "./scheduler/install";
import { classifyWriteFailure } from "../store/table";
import * as Watch from "./watch-registry";
import type { WorkflowRecord } from "./record";
import {
  MAX_ATTEMPTS,
  type StoredWorkflow,
  workflowNotFound,
  backoff,
  sameOwner,
  notRunnable,
  read,
  notRunnableReason,
  getForRun,
  fromItem,
} from "./stored";
import { writeReleasingSlot, completionUpdate } from "./slots";
import { enterJournal, noteClosed, takeClosed, JOURNAL_EPOCH_MS, JOURNAL_GRACE_MS } from "./claim-journal";
import { forgetExpiry } from "../store/entities/expiry";

/** A claim found a fire record already written: that fire has already produced its execution. */
export class DuplicateFire extends Error {
  constructor(readonly fireId: string) {
    super(`Fire ${fireId} was already claimed`);
    this.name = "DuplicateFire";
  }
}

// ---------------------------------------------------------------------------------------------------------
// Claiming an execution (§8.8.7, §8.2, §18.4); its outcome is recorded by ./outcome.ts
//
// Concurrent claims of one workflow must neither conflict nor answer 5xx (API.md §18.4), so the one write every
// claim makes to the workflow item is a single conditional UpdateItem: it checks runnable (enabled, started,
// unexpired, `executionCount < maxExecution`), adds 1 to the count and records the count before it (the index it
// gives) under an attribute named after the claim ("marker"), answering it (ReturnValues UPDATED_NEW). DynamoDB
// applies concurrent updates of one item one after the other, each against the item as the previous one left it:
// no version check to lose, no transaction to cancel (a TransactWriteItems that includes a contended item is
// cancelled with TransactionConflict on AWS, which DynamoDB Local does not reproduce; and a transaction could not
// write the execution's index, which only the update gives), so every claim either gets the next index at its first
// attempt or fails its condition. A failed condition answers with the item as the condition saw it
// (ReturnValuesOnConditionCheckFailure): 404, the 412 reason, or this claim's own index when a retried request had
// landed, without a read.
//
// A manual claim (the trigger) is two requests on its path:
// 1. (once per workflow, process and minute: the claim journal, ./claim-journal.ts);
// 2. the count update, which also keeps the run input (up to 1 KB; a larger one was written in run-input parts
//    before the claim) beside the marker, and removes the markers of this process's earlier claims on the workflow
//    whose executions are written;
// 3. completion when that index is the last (§8.2: `completed` / MAX_EXECUTIONS_REACHED, completedAt = the claim's
//    time, the active slot released with the counter), before the execution is written;
// 4. the execution item with that index (a conditional put: writing it again is a no-op).
// A crash between 2 and 4 leaves the marker with the run input beside it, and the journal: the sweeper writes the
// execution from them (the workflow as stored, the index, the run input and the claim's time, which is the execution
// id's) and hands it to a runner, so no index is skipped for good and nothing is lost. A crash before 2 claimed
// nothing (its caller got no execution).
//
// An automatic fire's claim (the scheduler, the watcher) puts its fire record first: its conditional put is the
// at-most-once guard of §8.3.7 (a repeated delivery stops there, before any index is taken) and, holding the
// execution item to write and listed while in flight, the claim's intent; then steps 2-4 (the marker named after
// the fire), then the record closed (no longer listed), off the claim's path. A crash before the count update is
// finished by the sweeper too: it claims the fire then, in a transaction with a check that the intent is still in
// flight, so a claimer that was only slow cannot take a second index.

/** Attribute of the workflow item recording the index a fire's claim took: `claim#` + the intent's partition key. */
export const markerOf = markerOfKey;
/**
 * Markers are cleaned up by a claim that reads the record once it sees at least `MARKERS_BEFORE_CLEANUP` of them
 * (one BatchGetItem of the fires' intents), at most `MARKERS_PER_CLEANUP` by one count update.
 */
const MARKERS_BEFORE_CLEANUP = 8;
const MARKERS_PER_CLEANUP = 24;
/** Attempts of the count update: conditional failures answer at once, so only TransactionConflict (a pause,
 *  resume, delete or completion transaction on the item in flight on AWS) and throttling try again. */
const CLAIM_ATTEMPTS = 20;
/**
 * The sweeper finishes an interrupted claim at most this long after it began (plus its own period): a fire's once
 * its intent has been in flight a minute, a manual claim's once its journal is due.
 */
export const CLAIM_RECOVERY_AFTER_MS = JOURNAL_EPOCH_MS + JOURNAL_GRACE_MS;
/** A fire's intent still in flight this long after its claim began is the sweeper's. */
export const INTENT_RECOVERY_AFTER_MS = 60_000;
/** A manual claim's marker this old (by its execution id's time) whose execution is not written is the sweeper's. */
export const MARKER_RECOVERY_AFTER_MS = JOURNAL_GRACE_MS;
/** A manual claim's run input rides beside its marker on the workflow item up to this size (JSON bytes). */
export const INLINE_CLAIM_INPUT_BYTES = 1_024;

/** This process's count updates tried and claims made: attempts per execution is the contention measure (bench). */
export const claimStats = { attempts: 0, claimed: 0 };

/** A manual claim's run input as kept beside its marker: its JSON text, or how many run-input parts hold it. */
export type KeptRunInput = string | number;
const EMPTY_RUN_INPUT = "{}";

export interface ClaimOptions {
  now: number;
  /** When given, the workflow must belong to this owner (else 404). */
  owner?: Address;
  /** The execution item to write `pending` (with its keys and id); its `index` is set by the claim. Called once. */
  execution: (index: number, workflow: WorkflowRecord) => Record<string, unknown>;
  /** At most one execution per fire: its record is the claim's intent; an existing one → DuplicateFire. `expiresAt`: unix seconds (TTL). */
  fire?: { fireId: string; expiresAt: number };
  /**
   * A manual claim's run input, kept beside its marker until the execution is written (the sweeper writes the
   * execution from it after a crash): the JSON text (at most `INLINE_CLAIM_INPUT_BYTES`), or how many run-input
   * parts were written before the claim. The trigger always gives it; default (direct callers): `{}`.
   */
  runInput?: KeptRunInput;
  /** The record as the caller has just read it (strongly consistent), or from the process's cache (`cached`). */
  record?: WorkflowRecord;
  /**
   * `record` is a cached copy: only its immutable members (id, owner, definition, chain, wallet, maxExecution) are
   * trusted, and runnable is decided by the count update alone.
   */
  cached?: boolean;
  /** Tests only: stop as a crash would, after the intent (a fire's) or the journal (a manual claim's), or after the count update. */
  crashAt?: "afterIntent" | "afterCount";
}

/** What a test's `crashAt` throws. */
export class SimulatedCrash extends Error {
  constructor(at: string) {
    super(`simulated crash ${at}`);
    this.name = "SimulatedCrash";
  }
}

export interface Intent {
  key: TableKey;
  isFire: boolean;
  workflowId: string;
  /** The execution item to write (its `index` set once known). */
  execution: Record<string, unknown>;
  /** The claim's time: the execution's startAt, and completedAt when it completes the workflow. */
  at: number;
}

/**
 * Claims one execution (module section above). Throws 404 WORKFLOW_NOT_FOUND (missing or another owner's), 412
 * WORKFLOW_NOT_RUNNABLE with `reason` (checked on a fresh record first, then atomically by the update),
 * DuplicateFire.
 */
export async function claim(id: string, opts: ClaimOptions): Promise<{ workflow: WorkflowRecord; index: number }> {
  const { now } = opts;
  const record = opts.record ?? (await getForRun(id));
  if (!record || (opts.owner !== undefined && !sameOwner(record.owner, opts.owner))) throw workflowNotFound();
  if (!opts.cached) {
    const reason = notRunnableReason(record, now);
    if (reason) throw notRunnable(reason);
  }
  const execution = opts.execution(-1, record);
  const executionId = String(execution.id);
  return opts.fire ? claimFire(record, opts, execution, opts.fire) : claimRun(record, opts, execution, executionId);
}

/** A manual claim: journal, count update (marker and run input), completion at the cap, execution. */
async function claimRun(
  record: WorkflowRecord,
  opts: ClaimOptions,
  execution: Record<string, unknown>,
  executionId: string,
): Promise<{ workflow: WorkflowRecord; index: number }> {
  const marker = runMarkerOf(executionId);
  const input = runInputAttributeOf(executionId);
  const release = await enterJournal(record.id);
  if (opts.crashAt === "afterIntent") throw new SimulatedCrash(opts.crashAt);
  let index: number;
  try {
    index = await takeIndex(record, { marker, now: opts.now, also: { [input]: opts.runInput ?? EMPTY_RUN_INPUT } }, opts.owner);
  } catch (err) {
    // 404 or 412: nothing was claimed. Anything else may have landed: the journal stays open for the sweeper.
    if (err instanceof ApiError) release();
    throw err;
  }
  if (opts.crashAt === "afterCount") throw new SimulatedCrash(opts.crashAt);
  const claimed = await writeClaimed(record, { ...execution, index }, index, opts.now);
  noteClosed(record.id, [marker, input]);
  release();
  return claimed;
}

/** An automatic fire's claim: its record (the intent), count update, completion at the cap, execution, record closed. */
async function claimFire(
  record: WorkflowRecord,
  opts: ClaimOptions,
  execution: Record<string, unknown>,
  fire: { fireId: string; expiresAt: number },
): Promise<{ workflow: WorkflowRecord; index: number }> {
  const intent: Intent = {
    key: intentKey({ fireId: fire.fireId, executionId: String(execution.id) }),
    isFire: true,
    workflowId: record.id,
    execution,
    at: opts.now,
  };
  // The cleanup is best effort: its failure must not fail the claim (nor surface unhandled when the intent fails).
  const cleanup = closedMarkers(record).catch(() => [] as string[]);
  const [, closed] = await Promise.all([writeIntent(intent, fire.expiresAt, fire.fireId), cleanup]);
  noteClosed(record.id, closed);
  if (opts.crashAt === "afterIntent") throw new SimulatedCrash(opts.crashAt);

  let index: number;
  try {
    index = await takeIndex(record, { marker: markerOf(intent.key), now: opts.now }, opts.owner);
  } catch (err) {
    // 404 or 412: nothing was claimed (the fire stays consumed). Anything else may have landed: the sweeper decides.
    if (err instanceof ApiError) await closeIntent(intent);
    throw err;
  }
  if (opts.crashAt === "afterCount") throw new SimulatedCrash(opts.crashAt);
  return finishClaim(record, intent, index);
}

async function writeIntent(intent: Intent, expiresAt: number, fireId: string): Promise<void> {
  const executionId = String(intent.execution.id);
  const { key, isFire, workflowId, execution, at: claimedAt } = intent;
  if (await putIntent({ key, isFire, workflowId, executionId, claimedAt, execution, expiresAt })) return;
  throw new DuplicateFire(fireId);
}

/**
 * The count update: +1 below `maxExecution` on a runnable workflow, recording the index it gives under
 * `take.marker`, and removing the attributes of this process's claims on the workflow whose executions are written.
 * A failed condition is answered from the item it saw: 404 without one; the index when this claim's own update had
 * already landed (a retried request, or the sweeper finishing it); else the 412 reason; if that item is runnable at
 * `now` (resumed in between) the update is tried again.
 */
async function takeIndex(record: WorkflowRecord, take: IndexTake, owner?: Address): Promise<number> {
  for (let attempt = 1; attempt <= CLAIM_ATTEMPTS; attempt++) {
    claimStats.attempts += 1;
    const removed = takeClosed(record.id);
    try {
      const result = await takeNextIndex(record.id, { ...take, removed });
      if ("index" in result) return result.index;
      noteClosed(record.id, removed);
      const current = result.refused ? fromItem(result.refused) : undefined;
      if (!current || (owner !== undefined && !sameOwner(current.owner, owner))) throw workflowNotFound();
      const taken = indexOf(current, take.marker);
      if (taken !== undefined) return taken;
      const reason = notRunnableReason(current, take.now);
      if (reason) {
        countMetric("ClaimsRefused", { Reason: reason });
        throw notRunnable(reason);
      }
    } catch (err) {
      if (err instanceof ApiError) throw err;
      noteClosed(record.id, removed);
      if (classifyWriteFailure(err) !== "retry") throw err;
      await backoff(attempt);
    }
  }
  throw new Error("Workflow claim kept meeting transactions on the workflow item");
}

export const indexOf = (record: StoredWorkflow, marker: string): number | undefined => {
  const value = record[marker];
  return typeof value === "number" ? value : undefined;
};

/** Completion at the cap when `index` is the last, then the execution item (a no-op when written already). */
async function writeClaimed(
  record: WorkflowRecord,
  execution: Record<string, unknown>,
  index: number,
  at: number,
): Promise<{ workflow: WorkflowRecord; index: number }> {
  const completes = index + 1 >= record.maxExecution;
  if (completes) await completeAtCap(record.id, at);
  await putClaimedExecution(execution); // a no-op when written already (the sweeper, or a retry)
  claimStats.claimed += 1;
  return {
    workflow: {
      ...record,
      executionCount: index + 1,
      lastRanAt: at,
      updatedAt: at,
      ...(completes
        ? { status: "completed" as const, completionReason: "MAX_EXECUTIONS_REACHED" as const, completedAt: at, holdsSlot: false }
        : {}),
    },
    index,
  };
}

/** The rest of a fire's claim that holds `index`: completion at the cap, the execution item, the intent closed. */
export async function finishClaim(
  record: WorkflowRecord,
  intent: Intent,
  index: number,
): Promise<{ workflow: WorkflowRecord; index: number }> {
  const claimed = await writeClaimed(record, { ...intent.execution, index }, index, intent.at);
  // Not awaited: nothing waits on it, and if it never lands the sweeper finds the execution written and closes it.
  closeIntent(intent).then(
    () => noteClosed(record.id, [markerOf(intent.key)]),
    (err: unknown) => log.warn("could not close a claim intent", { intent: intent.key.pk, error: (err as Error).message }),
  );
  return claimed;
}

/**
 * The sweeper's end of a manual claim a crash interrupted after its count update: completion at the cap, the
 * execution item (built by the caller from the record, the index and the run input kept beside the marker).
 */
export async function finishRunClaim(record: WorkflowRecord, execution: Record<string, unknown>, index: number, at: number): Promise<void> {
  await writeClaimed(record, { ...execution, index }, index, at);
}

/** A fire's intent is closed: no longer listed in flight (an old manual trigger's intent is deleted). */
export async function closeIntent(intent: Pick<Intent, "key" | "isFire">): Promise<void> {
  await closeStoredIntent(intent.key);
}

/**
 * Markers on `record` that can go (for a claim that read the record): fires' (and old intents') whose intents are
 * closed (strongly consistent BatchGetItem of the intents' keys), once there are `MARKERS_BEFORE_CLEANUP`. A manual
 * claim's marker is removed by its own process, or by the sweeper from its journal.
 */
async function closedMarkers(record: WorkflowRecord): Promise<string[]> {
  const markers = Object.keys(record).filter(isMarker);
  if (markers.length < MARKERS_BEFORE_CLEANUP) return [];
  const intents = markers.filter((m) => runMarkerExecution(m) === undefined).slice(0, MARKERS_PER_CLEANUP);
  return intents.length ? closedOf(intents) : [];
}

/** Removes markers (and what they keep beside them) from the workflow item: the sweeper's cleanup. */
export const removeMarkers = removeClaimAttributes;

/**
 * §8.2: the claim that took the last index stores `completed` / MAX_EXECUTIONS_REACHED with `completedAt` = its
 * time and releases the active slot with the counter, then removes schedules, watch entry and expiry entry.
 * Idempotent (the sweeper may finish the same claim); a workflow paused since the claim completes all the same.
 */
async function completeAtCap(id: string, at: number): Promise<void> {
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const record = await read(id);
    if (!record || (record.status !== "enabled" && record.status !== "disabled") || record.executionCount < record.maxExecution) return;
    const held = record.holdsSlot === true;
    const write = completionUpdate(id, held, { reason: "MAX_EXECUTIONS_REACHED", cause: "atCap", now: at });
    if (await writeReleasingSlot(record.owner, write, held)) {
      await Promise.all([stopFiring(record), Watch.unwatch(id), forgetExpiry(id)]);
      return;
    }
    await backoff(attempt);
  }
  throw new Error("Workflow completion kept conflicting with concurrent writes");
}
