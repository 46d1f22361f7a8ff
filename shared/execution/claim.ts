/**
 * Starting one execution, shared by every way a workflow fires (the manual trigger, schedules, the chain
 * watcher): the claim (Workflow.claim: one conditional count update on the workflow item, then the `pending`
 * record with its trigger step and run input; an automatic fire's record is put first, so a repeated delivery
 * claims nothing), then the hand-over publishes `execution.requested` for a runner. Carries no engine code: the
 * runner is reached only through the bus.
 */
import { ulid } from "ulid";
import type { Address } from "viem";
import { ApiError } from "../errors";
import { log } from "../log";
import { executionFee, valueFeeFor } from "../engine/fee-rules";
import { requireBus } from "./bus/install";
import { readRunInput, runInputStorage, writeRunInputParts, type RunRequest } from "./run-input";
import { useRuntime } from "../current-runtime";
import { type WorkflowRecord } from "../workflow/record";
import { type RunClaimBuilder, recoverRunClaim, recoverClaims } from "../workflow/claim-recovery";
import { recordOutcome } from "../workflow/outcome";
import type { Trigger } from "../kinds/shapes";
import { pendingItem, finish } from "./execution-write";
import type { Step } from "../engine/schemas";
import * as WorkflowClaim from "../workflow/claim";

export interface ClaimRequest {
  now: number;
  /** The caller's address for a manual trigger: another owner's workflow answers 404. */
  owner?: Address;
  /** An automatic fire's id and how long its record must outlive repeated deliveries (unix seconds). */
  fire?: { fireId: string; expiresAt: number };
  /**
   * The trigger step's `output` as recorded now; a manual claim's is `runInput.triggerOutput` (`{data: null}` while
   * a block trigger's waits for its chain read), so only a fire gives it.
   */
  stepOutput?: Record<string, unknown>;
  /** What the runner receives: the trigger output to run with (absent: read at run time) and `triggerInput`. */
  runInput: RunRequest;
  /** The workflow as the caller has just read it (strongly consistent), to save the claim its own read. */
  workflow?: WorkflowRecord;
  /** `workflow` is the process's cached copy (Workflow.cachedForTrigger): its mutable members are not trusted. */
  cached?: boolean;
  /** The execution's id, chosen by the caller (an Idempotency-Key's operation); default a new ULID of `now`. */
  executionId?: string;
}

/**
 * Owners of automatic fires' executions claimed by this process and not handed over yet: the hand-over names the
 * owner on the event, so runs queue per owner (run-queue.ts) without a read, and the scheduler and the watcher
 * need not pass it. (The manual trigger knows the owner and passes it.)
 */
const claimedOwners = new Map<string, string>();
const MAX_REMEMBERED = 10_000;

/**
 * Claims one execution (Workflow.claim: 412/404, DuplicateFire) and returns its id. A fire's run input too large
 * for the execution item, and a manual claim's too large to keep beside its marker, is written in parts first and
 * removed again when the claim is refused.
 */
export async function claimExecution(workflowId: string, request: ClaimRequest): Promise<string> {
  const { now } = request;
  const executionId = request.executionId ?? ulid(now);
  const common = {
    now,
    ...(request.owner ? { owner: request.owner } : {}),
    ...(request.workflow ? { record: request.workflow } : {}),
    ...(request.cached ? { cached: true } : {}),
  };
  let discard = async () => {};
  try {
    if (request.fire) {
      const storage = await runInputStorage(executionId, request.runInput);
      discard = storage.discard;
      const stepOutput = request.stepOutput ?? request.runInput.triggerOutput ?? { data: null };
      const { workflow } = await WorkflowClaim.claim(workflowId, {
        ...common,
        fire: request.fire,
        execution: (index, claimed) => ({ ...pendingExecution(claimed, executionId, index, now, stepOutput), ...storage.attributes }),
      });
      claimedOwners.set(executionId, workflow.owner);
      // Bounded: a claim whose hand-over never comes (its caller failed in between) must not pile up.
      if (claimedOwners.size > MAX_REMEMBERED) claimedOwners.delete(claimedOwners.keys().next().value!);
    } else {
      const kept = await keptRunInput(executionId, request.runInput);
      discard = kept.discard;
      await WorkflowClaim.claim(workflowId, {
        ...common,
        runInput: kept.runInput,
        execution: (index, claimed) => runExecutionItem(claimed, executionId, index, now, request.runInput, kept.attributes),
      });
    }
  } catch (err) {
    // Only a refusal means nothing was claimed. After any other failure the claim may have landed, and the
    // sweeper's recovery may still write the execution with these parts.
    if (err instanceof ApiError || err instanceof WorkflowClaim.DuplicateFire) await discard();
    throw err;
  }
  return executionId;
}

/**
 * A manual claim's run input: on the execution item as every run input is (runInputStorage: inline up to
 * 1 KB, else in parts); beside the marker on the workflow item its JSON when at most 1 KB, else the number of run-input
 * parts, written now, before the claim (so the sweeper can write the execution after a crash).
 */
async function keptRunInput(
  executionId: string,
  request: RunRequest,
): Promise<{ runInput: WorkflowClaim.KeptRunInput; attributes: Record<string, unknown>; discard: () => Promise<void> }> {
  const json = JSON.stringify(request);
  if (Buffer.byteLength(json, "utf8") <= WorkflowClaim.INLINE_CLAIM_INPUT_BYTES)
    return { runInput: json, attributes: { runInput: json }, discard: async () => {} };
  const storage = await runInputStorage(executionId, request);
  if ("runInputParts" in storage.attributes) return { runInput: Number(storage.attributes.runInputParts), ...storage };
  const parts = await writeRunInputParts(executionId, json);
  return { runInput: parts.parts, attributes: storage.attributes, discard: parts.discard };
}

/** The `pending` execution item of a manual claim: its trigger step's output is the run input's (§8.8.7). */
function runExecutionItem(
  workflow: WorkflowRecord,
  executionId: string,
  index: number,
  at: number,
  request: RunRequest,
  runInput: Record<string, unknown>,
): Record<string, unknown> {
  // A block trigger without `triggerOutput` reads its chain at run time; until then the step shows `{data: null}`.
  return { ...pendingExecution(workflow, executionId, index, at, request.triggerOutput ?? { data: null }), ...runInput };
}

function pendingExecution(workflow: WorkflowRecord, id: string, index: number, at: number, stepOutput: Record<string, unknown>) {
  return pendingItem({
    workflowId: workflow.id,
    owner: workflow.owner,
    chainId: workflow.chainId,
    id,
    index,
    startAt: at,
    executionFee: executionFee(),
    valueFee: valueFeeFor(workflow.nodes),
    triggerStep: triggerStep(workflow.trigger, stepOutput, at),
  });
}

/**
 * The sweeper's builder (Workflow.recoverClaims): the execution item of a manual claim a crash interrupted, from the
 * workflow as stored, its index and the run input kept beside its marker: the item the claim would have written.
 */
const rebuildExecution: RunClaimBuilder = async ({ workflow, executionId, index, at, runInput }) => {
  const attributes = typeof runInput === "number" ? { runInputParts: runInput } : { runInput };
  const request = await readRunInput(executionId, attributes);
  return runExecutionItem(workflow, executionId, index, at, request, attributes);
};

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
    if (await finish(workflowId, executionId, { status: "error", error: "the run could not be handed to a runner", endAt })) {
      await recordOutcome(workflowId, "error", endAt);
    }
    return false;
  }
}

/**
 * A manual claim's execution by its id, for a repeat of a request that crashed (an Idempotency-Key taken over):
 * written (true), or written now from the marker the crash left on the workflow and handed to a runner, as the
 * sweeper would (true), or never claimed (false: the repeat claims it under the same id).
 */
export async function recoverClaimedExecution(workflowId: string, executionId: string): Promise<boolean> {
  const found = await recoverRunClaim(workflowId, executionId, rebuildExecution);
  if (found === "finished") await handOver(workflowId, executionId);
  return found !== "none";
}

/**
 * The sweeper's pass over claims a crash interrupted (Workflow.recoverClaims): every execution it writes is handed
 * to a runner. Returns how many.
 */
export async function recoverInterruptedClaims(now = useRuntime().now()): Promise<number> {
  const recovered = await recoverClaims(now, rebuildExecution);
  for (const claim of recovered) await handOver(claim.workflowId, claim.executionId, claim.owner);
  return recovered.length;
}
