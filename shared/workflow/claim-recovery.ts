/** The sweeper's recovery of claims a crash interrupted (./claim.ts, "Claiming": steps 2-5 finished or dropped). */
import { transact } from "../store/entity";
import { intentInFlight, intentsInFlightBefore } from "../store/entities/claim-intent";
import { executionWritten } from "../store/entities/execution";
import { takeIndexItem } from "../store/entities/workflow";
import { cancellationReasons } from "../store/table";
import type { Address } from "../address";
import { log } from "../log";
import { errorName, read } from "./stored";
import { markerOf, CLAIM_RECOVERY_AFTER_MS, type Intent, indexOf, finishClaim, closeIntent } from "./claim";

/** An execution the sweeper's recovery claimed or finished: its run must be handed to a runner. */
export interface RecoveredClaim {
  workflowId: string;
  executionId: string;
  owner: Address;
}

/**
 * The sweeper's recovery of claims a crash interrupted (./claim.ts, "Claiming"): up to `max` intents still in flight
 * `CLAIM_RECOVERY_AFTER_MS` after their claim began, oldest first. Returns the executions written by this pass,
 * whose runs the caller hands over (claim.ts `recoverInterruptedClaims`).
 */
export async function recoverClaims(now: number, max = 100): Promise<RecoveredClaim[]> {
  const intents = await intentsInFlightBefore(now - CLAIM_RECOVERY_AFTER_MS, max);
  const recovered: RecoveredClaim[] = [];
  for (const stored of intents) {
    const intent: Intent = {
      key: stored.key,
      isFire: stored.isFire,
      workflowId: stored.workflowId,
      execution: stored.execution,
      at: stored.claimedAt,
    };
    const done = await recoverClaim(intent, now).catch((err: unknown) => {
      log.warn("claim recovery failed; tried again on the next pass", { intent: intent.key.pk, error: (err as Error).message });
      return undefined;
    });
    if (done) recovered.push(done);
  }
  if (intents.length) log.info("recovered interrupted claims", { intents: intents.length, executions: recovered.length });
  return recovered;
}

async function recoverClaim(intent: Intent, now: number): Promise<RecoveredClaim | undefined> {
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
  return { workflowId: record.id, executionId, owner: record.owner };
}

/** Step 2 for the sweeper: the count update together with a check that the intent is still in flight. */
async function claimForIntent(intent: Intent, marker: string, now: number): Promise<"claimed" | "closed" | "refused" | "busy"> {
  try {
    await transact([intentInFlight(intent.key), takeIndexItem(intent.workflowId, marker, now)]);
    return "claimed";
  } catch (err) {
    if (errorName(err) !== "TransactionCanceledException") throw err;
    const [intentReason, workflowReason] = cancellationReasons(err);
    if (intentReason === "ConditionalCheckFailed") return "closed";
    if (workflowReason === "ConditionalCheckFailed") return "refused"; // the caller reads: taken meanwhile, or not runnable
    return "busy";
  }
}
