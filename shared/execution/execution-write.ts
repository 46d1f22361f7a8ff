/** Writing an execution's record (the claim, the runner); execution.ts describes the storage. */
import { countMetric } from "../metrics";
import { finishExecution, pendingExecutionItem, recordStepItems } from "../store/entities/execution";
import { boundStep } from "./execution-bounds";
import { INLINE_OUTPUT_BYTES, PART_BYTES, emitChange, type Item } from "./execution-stored";
import { useRuntime } from "../current-runtime";
import type { Cost, ExecutionStatus, Fee, Step, ValueFee } from "../engine/schemas";
import { knownDefinition } from "../workflow/stored";

/** Trigger steps up to this size (JSON bytes) live in the execution item, written by the claim itself. */
const INLINE_TRIGGER_BYTES = 4_096;

// ---------------------------------------------------------------------------------------------------------
// Writing the record (the claim, the runner, the sweeper)

export interface PendingInput {
  workflowId: string;
  owner: string;
  chainId: number;
  id: string;
  index: number;
  startAt: number;
  executionFee: Fee;
  valueFee: ValueFee;
  triggerStep: Step;
}

/**
 * The DynamoDB item of a new `pending` execution, for the claim's TransactWriteItems (it is not written here).
 * The trigger step is inside when small; a large one is recorded by `recordStep` (the runner records every step
 * through its onStep, the trigger step first; a step recorded twice stays one step).
 */
export function pendingItem(input: PendingInput): Item {
  const trigger = JSON.stringify(boundStep(input.triggerStep, useRuntime().config.limits));
  return pendingExecutionItem({
    id: input.id,
    workflowId: input.workflowId,
    owner: input.owner,
    chainId: input.chainId,
    index: input.index,
    startAt: input.startAt,
    status: "pending",
    executionFee: input.executionFee,
    valueFee: input.valueFee,
    cogs: {},
    triggerId: input.triggerStep.id,
    ...(Buffer.byteLength(trigger) <= INLINE_TRIGGER_BYTES ? { triggerStep: trigger } : {}),
  });
}

/**
 * Records a finished step (and the cost of its user operation) while the execution is pending; false when it is
 * not (finished, swept, unknown) and nothing was written. Outputs over `max_step_output_bytes` and logs or errors
 * over `max_step_log_bytes` are truncated as API.md §10.2 says. `position` (the node's index in `nodes`) orders
 * steps that started in the same millisecond.
 */
export async function recordStep(workflowId: string, id: string, step: Step, cost?: Cost, position?: number): Promise<boolean> {
  const recorded = await recordStepItems({ workflowId, id }, { ...stepRecording(step, position, workflowId), ...(cost ? { cost } : {}) });
  if (!recorded) return false;
  emitChange(workflowId, id);
  return true;
}

/**
 * A step as its items store it: bounded (§10.2), its JSON and (when large) its output's JSON apart. With the
 * `workflowId` of a definition this process has read (the run's) its config is not copied: `config: null` holds
 * its place and `configIn` names the workflow whose definition (store pattern 10b, immutable, kept after a delete)
 * has it, put back when read (./execution-read.ts).
 */
export function stepRecording(step: Step, position?: number, workflowId?: string) {
  const { now, config } = useRuntime();
  const bounded = boundStep(step, config.limits);
  // A large output goes to items of its own; the step keeps `output: null` in its place (key order stays).
  const output = Buffer.from(JSON.stringify(bounded.output), "utf8");
  const inline = output.length <= INLINE_OUTPUT_BYTES;
  const stored = inline ? bounded : { ...bounded, output: null };
  const referenced = workflowId !== undefined && stored.config !== undefined && knownDefinition(workflowId);
  const json = JSON.stringify({
    position,
    recordedAt: now(),
    step: referenced ? { ...stored, config: null } : stored,
    ...(referenced ? { configIn: workflowId } : {}),
  });
  const body = Buffer.from(json, "utf8");
  // As answered (the config in its place), so that `stepBytes` stays an upper bound of the answer.
  const answered = referenced ? Buffer.byteLength(JSON.stringify(stored.config)) - 4 : 0;
  return {
    stepId: step.id,
    body,
    outputBytes: output.length,
    ...(inline ? {} : { output }),
    partBytes: PART_BYTES,
    // stepBytes (an upper bound: a step recorded twice counts twice) lets a list schedule its reads (`list`).
    bytes: body.length + answered + (inline ? 0 : output.length),
  };
}

export interface Outcome {
  status: Exclude<ExecutionStatus, "pending" | "waiting">;
  error?: string;
  endAt: number;
  /** The run's final costs (replace those recorded with steps). */
  cogs?: Cost[];
}

/** Ends a pending execution; false when it had already ended (another writer won) or does not exist. */
export async function finish(workflowId: string, id: string, outcome: Outcome, last?: { step: Step; position?: number }): Promise<boolean> {
  // The pending index is sparse: the sweeper never sees a finished execution again. `last`: the run's last step,
  // listed by the same update (its cost is in `outcome.cogs`).
  const ended = await finishExecution(
    { workflowId, id },
    {
      status: outcome.status,
      endAt: outcome.endAt,
      ...(outcome.error !== undefined ? { error: outcome.error } : {}),
      ...(outcome.cogs ? { cogs: Object.fromEntries(outcome.cogs.map((c) => [c.nodeId, c])) } : {}),
    },
    last ? stepRecording(last.step, last.position, workflowId) : undefined,
  );
  if (!ended) return false;
  countMetric("Executions", { Status: outcome.status });
  emitChange(workflowId, id);
  return true;
}
