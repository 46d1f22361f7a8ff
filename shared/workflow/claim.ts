/** The claim that starts an execution (§8.8.7, §8.2, §18.4; see below); its recovery is in ./claim-recovery.ts. */
import { ApiError } from "../errors";
import {
  closeIntent as closeStoredIntent,
  closedMarkers as closedOf,
  intentKey,
  isMarker,
  markerOf as markerOfKey,
  putIntent,
} from "../store/entities/claim-intent";
import { putClaimedExecution } from "../store/entities/execution";
import { takeIndex as takeNextIndex } from "../store/entities/workflow";
import type { TableKey } from "../store/entity";
import type { Address } from "../address";
import { log } from "../log";
import { stopFiring } from "./scheduler";
import * as Watch from "./watch-registry";
import type { WorkflowRecord } from "./record";
import {
  MAX_ATTEMPTS,
  type Item,
  workflowNotFound,
  errorName,
  backoff,
  sameOwner,
  notRunnable,
  read,
  notRunnableReason,
  getForRun,
} from "./stored";
import { writeReleasingSlot, forgetExpiry, completionUpdate } from "./slots";

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
// unexpired, `executionCount < maxExecution`) and adds 1 to the count in one step. DynamoDB applies concurrent
// updates of one item one after the other, each against the item as the previous one left it: no version check
// to lose, no transaction to cancel (a TransactWriteItems that includes a contended item is cancelled with
// TransactionConflict on AWS, which DynamoDB Local does not reproduce), so every claim either gets the next index
// at its first attempt or fails its condition (412). The rest of the claim is written around that update:
//
// 1. the intent (pattern 22; for an automatic fire its fire record, pattern 17, whose conditional put is also the
//    at-most-once guard of §8.3.7: a duplicate stops here, before any index is taken), holding the execution item
//    to write and listed on a sparse index while in flight;
// 2. the count update, which also stores the index it gives as an attribute named after the intent
//    (`claim#<intent pk>` = the count before the update, ReturnValues UPDATED_NEW), so the index is recorded
//    atomically with being taken;
// 3. completion when that index is the last (§8.2: `completed` / MAX_EXECUTIONS_REACHED, completedAt = the claim's
//    time, the active slot released with the counter), before the execution is written;
// 4. the execution item with that index (a conditional put: writing it again is a no-op);
// 5. the intent closed (deleted; a fire record keeps guarding its fire, no longer listed as in flight), off the
//    claim's path.
//
// A crash between the steps loses nothing and leaves no gap: the sweeper (`recoverClaims`) reads intents still in
// flight a minute after their claim. An intent whose index attribute exists finishes steps 3-5 with that index and
// its run is handed over; a fire's intent without one (the crash came before step 2) is claimed then (step 2 in a
// transaction with a check that the intent is still in flight, so a claimer that was only slow cannot take a second
// index); a manual trigger's intent without one is dropped (its caller got no answer with an execution). Index
// attributes are removed by a later claim's count update once their intents are closed (when a claim reads 8 or
// more, a strongly consistent BatchGetItem tells which), so a finished claim costs the workflow item no second
// write.

/** Attribute of the workflow item recording the index a claim took: `claim#` + the intent's partition key. */
export const markerOf = markerOfKey;
/**
 * Index attributes are cleaned up once a claim reads at least `MARKERS_BEFORE_CLEANUP` of them (so most claims
 * make no extra read), at most `MARKERS_PER_CLEANUP` by one count update (a later claim removes the rest).
 */
const MARKERS_BEFORE_CLEANUP = 8;
const MARKERS_PER_CLEANUP = 50;
/** Attempts of the count update: conditional failures answer at once, so only TransactionConflict (a pause,
 *  resume, delete or completion transaction on the item in flight on AWS) and throttling try again. */
const CLAIM_ATTEMPTS = 20;
/** A manual trigger's intent outlives any claim by far (TTL); a fire record keeps the fire's own expiry. */
const INTENT_TTL_S = 24 * 3600;
/** The sweeper takes over an intent still in flight this long after its claim began. */
export const CLAIM_RECOVERY_AFTER_MS = 60_000;
const RETRYABLE = new Set([
  "TransactionConflictException",
  "ThrottlingException",
  "ProvisionedThroughputExceededException",
  "RequestLimitExceeded",
]);

/** This process's count updates tried and claims made: attempts per execution is the contention measure (bench). */
export const claimStats = { attempts: 0, claimed: 0 };

export interface ClaimOptions {
  now: number;
  /** When given, the workflow must belong to this owner (else 404). */
  owner?: Address;
  /** The execution item to write `pending` (with its keys); its `index` is set by the claim. Called once. */
  execution: (index: number, workflow: WorkflowRecord) => Record<string, unknown>;
  /** At most one execution per fire: its record is the claim's intent; an existing one → DuplicateFire. `expiresAt`: unix seconds (TTL). */
  fire?: { fireId: string; expiresAt: number };
  /** The record as the caller has just read it (strongly consistent): saves the claim its own read. */
  record?: WorkflowRecord;
  /** Tests only: stop as a crash would, after the intent or after the count update. */
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
 * Claims one execution (module section above): intent, count update, completion at the cap, execution item,
 * intent closed. Throws 404 WORKFLOW_NOT_FOUND (missing or another owner's), 412 WORKFLOW_NOT_RUNNABLE with
 * `reason` (checked on the caller's read first, then atomically by the update), DuplicateFire.
 */
export async function claim(id: string, opts: ClaimOptions): Promise<{ workflow: WorkflowRecord; index: number }> {
  const { now } = opts;
  const record = opts.record ?? (await getForRun(id));
  if (!record || (opts.owner !== undefined && !sameOwner(record.owner, opts.owner))) throw workflowNotFound();
  const reason = notRunnableReason(record, now);
  if (reason) throw notRunnable(reason);

  const execution = opts.execution(-1, record);
  const executionId = String(execution.id);
  const intent: Intent = {
    key: intentKey({ fireId: opts.fire?.fireId, executionId }),
    isFire: opts.fire !== undefined,
    workflowId: record.id,
    execution,
    at: now,
  };
  const expiresAt = opts.fire ? opts.fire.expiresAt : Math.floor(now / 1000) + INTENT_TTL_S;
  // The cleanup is best effort: its failure must not fail the claim (nor surface unhandled when the intent fails).
  const cleanup = closedMarkers(record).catch(() => [] as string[]);
  const [, closed] = await Promise.all([writeIntent(intent, expiresAt, opts.fire?.fireId), cleanup]);
  if (opts.crashAt === "afterIntent") throw new SimulatedCrash(opts.crashAt);

  let index: number;
  try {
    index = await takeIndex(record.id, markerOf(intent.key), now, closed);
  } catch (err) {
    // 404 or 412: nothing was claimed (a fire stays consumed). Anything else may have landed: the sweeper decides.
    if (err instanceof ApiError) await closeIntent(intent);
    throw err;
  }
  if (opts.crashAt === "afterCount") throw new SimulatedCrash(opts.crashAt);
  return finishClaim(record, intent, index);
}

async function writeIntent(intent: Intent, expiresAt: number, fireId?: string): Promise<void> {
  const executionId = String(intent.execution.id);
  const { key, isFire, workflowId, execution, at: claimedAt } = intent;
  if (await putIntent({ key, isFire, workflowId, executionId, claimedAt, execution, expiresAt })) return;
  if (fireId !== undefined) throw new DuplicateFire(fireId);
  throw new Error(`Claim intent for execution ${executionId} already exists`);
}

/**
 * The count update (step 2 above): +1 below `maxExecution` on a runnable workflow, recording the index
 * it gives under `marker`, and removing the index attributes of closed claims. A failed condition is answered from
 * one strongly consistent read: the index when this claim's own update had already landed (a retried request, or
 * the sweeper finishing it), else the 412 reason; if the read finds the workflow runnable again (resumed in
 * between) the update is tried again.
 */
async function takeIndex(id: string, marker: string, now: number, closed: string[]): Promise<number> {
  for (let attempt = 1; attempt <= CLAIM_ATTEMPTS; attempt++) {
    claimStats.attempts += 1;
    try {
      return await takeNextIndex(id, marker, now, closed);
    } catch (err) {
      const name = errorName(err);
      if (name === "ConditionalCheckFailedException") {
        const current = await read(id);
        if (!current) throw workflowNotFound();
        const taken = indexOf(current, marker);
        if (taken !== undefined) return taken;
        const reason = notRunnableReason(current, now);
        if (reason) throw notRunnable(reason);
        continue;
      }
      if (!RETRYABLE.has(name ?? "")) throw err;
      await backoff(attempt);
    }
  }
  throw new Error("Workflow claim kept meeting transactions on the workflow item");
}

export const indexOf = (record: WorkflowRecord, marker: string): number | undefined => {
  const value = (record as unknown as Item)[marker];
  return typeof value === "number" ? value : undefined;
};

/** Steps 3-5 for a claim that holds `index`: completion at the cap, the execution item, the intent closed. */
export async function finishClaim(
  record: WorkflowRecord,
  intent: Intent,
  index: number,
): Promise<{ workflow: WorkflowRecord; index: number }> {
  const completes = index + 1 >= record.maxExecution;
  if (completes) await completeAtCap(record.id, intent.at);
  await putClaimedExecution({ ...intent.execution, index }); // a no-op when written already (the sweeper, or a retry)
  // Not awaited: nothing waits on it, and if it never lands the sweeper finds the execution written and closes it.
  closeIntent(intent).catch((err: unknown) =>
    log.warn("could not close a claim intent", { intent: intent.key.pk, error: (err as Error).message }),
  );
  claimStats.claimed += 1;
  const at = intent.at;
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

/** A manual trigger's intent is deleted; a fire record stays (it guards its fire) without the in-flight listing. */
export async function closeIntent(intent: Pick<Intent, "key" | "isFire">): Promise<void> {
  await closeStoredIntent(intent.key);
}

/**
 * Index attributes on `record` whose intents are closed (strongly consistent BatchGetItem of the intents' keys):
 * safe to remove, since an intent is closed only after its execution is written. Unanswered keys count as open.
 */
async function closedMarkers(record: WorkflowRecord): Promise<string[]> {
  const markers = Object.keys(record).filter(isMarker).slice(0, MARKERS_PER_CLEANUP);
  if (markers.length < MARKERS_BEFORE_CLEANUP) return [];
  return closedOf(markers);
}

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
