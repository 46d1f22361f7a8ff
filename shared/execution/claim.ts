/**
 * Starting one execution, shared by every way a workflow fires (the manual trigger, schedules, the chain
 * watcher): the claim (Workflow.claim: an intent, one conditional count update on the workflow item, then the
 * `pending` record with its trigger step and run input; an automatic fire's record is its intent, so a repeated
 * delivery claims nothing), then the hand-over publishes `execution.requested` for a runner. Carries no engine
 * code: the runner is reached only through the bus.
 */
import { ulid } from "ulid";
import type { Address } from "viem";
import { ApiError } from "../errors";
import { log } from "../log";
import { useRuntime } from "../runtime";
import * as Workflow from "../workflow/workflow";
import type { Trigger } from "../workflow/schemas";
import { executionFee, valueFeeFor } from "../engine/fee-rules";
import * as Executions from "./execution";
import { requireBus } from "./bus";
import { runInputStorage, type RunRequest } from "./run-input";
import type { Step } from "./schemas";

export interface ClaimRequest {
  now: number;
  /** The caller's address for a manual trigger: another owner's workflow answers 404. */
  owner?: Address;
  /** An automatic fire's id and how long its record must outlive repeated deliveries (unix seconds). */
  fire?: { fireId: string; expiresAt: number };
  /** The trigger step's `output` as recorded now. */
  stepOutput: Record<string, unknown>;
  /** What the runner receives: the trigger output to run with (absent: read at run time) and `triggerInput`. */
  runInput: RunRequest;
  /** The workflow as the caller has just read it (strongly consistent), to save the claim its own read. */
  workflow?: Workflow.WorkflowRecord;
}

/**
 * Owners of automatic fires' executions claimed by this process and not handed over yet: the hand-over names the
 * owner on the event, so runs queue per owner (run-queue.ts) without a read, and the scheduler and the watcher
 * need not pass it. (The manual trigger knows the owner and passes it.)
 */
const claimedOwners = new Map<string, string>();
const MAX_REMEMBERED = 10_000;

/**
 * Claims one execution (Workflow.claim: 412/404, DuplicateFire) and returns its id. Run input too large for the
 * execution item is written in parts first and removed again when the claim is refused.
 */
export async function claimExecution(workflowId: string, request: ClaimRequest): Promise<string> {
  const { now } = request;
  const executionId = ulid(now);
  const storage = await runInputStorage(executionId, request.runInput);
  try {
    const { workflow } = await Workflow.claim(workflowId, {
      now,
      ...(request.owner ? { owner: request.owner } : {}),
      ...(request.fire ? { fire: request.fire } : {}),
      ...(request.workflow ? { record: request.workflow } : {}),
      execution: (index, claimed) => ({
        ...Executions.pendingItem({
          workflowId: claimed.id,
          owner: claimed.owner,
          chainId: claimed.chainId,
          id: executionId,
          index,
          startAt: now,
          executionFee: executionFee(),
          valueFee: valueFeeFor(claimed.nodes),
          triggerStep: triggerStep(claimed.trigger, request.stepOutput, now),
        }),
        ...storage.attributes,
      }),
    });
    if (request.owner === undefined) {
      claimedOwners.set(executionId, workflow.owner);
      // Bounded: a claim whose hand-over never comes (its caller failed in between) must not pile up.
      if (claimedOwners.size > MAX_REMEMBERED) claimedOwners.delete(claimedOwners.keys().next().value!);
    }
  } catch (err) {
    // Only a refusal means nothing was claimed. After any other failure the intent may be in flight, and the
    // sweeper's recovery may still run the execution with these parts.
    if (err instanceof ApiError || err instanceof Workflow.DuplicateFire) await storage.discard();
    throw err;
  }
  return executionId;
}

const triggerStep = (trigger: Trigger & { id: string }, output: Record<string, unknown>, at: number): Step => ({
  id: trigger.id,
  type: trigger.type,
  name: trigger.name,
  success: true,
  config: trigger.config as Record<string, unknown>,
  output,
  startAt: at,
  endAt: at,
});

/**
 * Publishes `execution.requested` (with the owner, for the runners' per-owner queues); false when the bus refused.
 * Then nothing would run the execution: it ends `error` at once (instead of waiting for the sweeper's timeout)
 * and counts toward consecutive errors.
 */
export async function handOver(workflowId: string, executionId: string, owner?: string): Promise<boolean> {
  const known = owner ?? claimedOwners.get(executionId);
  claimedOwners.delete(executionId);
  try {
    await requireBus().publish({ type: "execution.requested", workflowId, executionId, ...(known ? { owner: known } : {}) });
    return true;
  } catch (err) {
    log.error("could not publish execution.requested", { workflowId, executionId, error: (err as Error).message });
    const endAt = useRuntime().now();
    if (await Executions.finish(workflowId, executionId, { status: "error", error: "the run could not be handed to a runner", endAt })) {
      await Workflow.recordOutcome(workflowId, "error", endAt);
    }
    return false;
  }
}

/**
 * The sweeper's pass over claims a crash interrupted (Workflow.recoverClaims): every execution it writes is handed
 * to a runner. Returns how many.
 */
export async function recoverInterruptedClaims(now = useRuntime().now()): Promise<number> {
  const recovered = await Workflow.recoverClaims(now);
  for (const claim of recovered) await handOver(claim.workflowId, claim.executionId, claim.owner);
  return recovered.length;
}
