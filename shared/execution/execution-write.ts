/** Writing an execution's record (the claim, the runner); execution.ts describes the storage. */
import { TransactWriteCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { useRuntime } from "../runtime";
import { Keys } from "../store/keys";
import { isConditionFailure } from "../store/table";
import { boundStep } from "./execution-bounds";
import { readSummary } from "./execution-read";
import { INLINE_OUTPUT_BYTES, PART_BYTES, emitChange, table, type Item } from "./execution-stored";
import type { Cost, ExecutionStatus, Fee, Step, ValueFee } from "./schemas";

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
  return {
    ...Keys.execution(input.workflowId, input.id),
    ...Keys.executionByOwner(input.owner, input.id),
    ...Keys.pendingExecution(input.startAt, input.id),
    type: "execution",
    v: 1,
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
  };
}

/**
 * Records a finished step (and the cost of its user operation) while the execution is pending; false when it is
 * not (finished, swept, unknown) and nothing was written. Outputs over `max_step_output_bytes` and logs or errors
 * over `max_step_log_bytes` are truncated as API.md §10.2 says. `position` (the node's index in `nodes`) orders
 * steps that started in the same millisecond.
 */
export async function recordStep(workflowId: string, id: string, step: Step, cost?: Cost, position?: number): Promise<boolean> {
  const { db, now, config } = useRuntime();
  const bounded = boundStep(step, config.limits);
  // A large output goes to items of its own; the step keeps `output: null` in its place (key order stays).
  const output = Buffer.from(JSON.stringify(bounded.output), "utf8");
  const inline = output.length <= INLINE_OUTPUT_BYTES;
  const json = JSON.stringify({ position, recordedAt: now(), step: inline ? bounded : { ...bounded, output: null } });
  const bytes = Buffer.from(json, "utf8");
  const parts = Math.max(1, Math.ceil(bytes.length / PART_BYTES));
  const outputParts = inline ? 0 : Math.ceil(output.length / PART_BYTES);
  const update = {
    TableName: table(),
    Key: Keys.execution(workflowId, id),
    ConditionExpression: "#status = :pending",
    // stepBytes (an upper bound: a step recorded twice counts twice) lets a list schedule its reads (`list`).
    UpdateExpression: `ADD stepIds :ids, stepBytes :bytes${cost ? " SET cogs.#node = :cost" : ""}`,
    ExpressionAttributeNames: { "#status": "status", ...(cost ? { "#node": cost.nodeId } : {}) },
    ExpressionAttributeValues: {
      ":pending": "pending",
      ":ids": new Set([step.id]),
      ":bytes": bytes.length + (inline ? 0 : output.length),
      ...(cost ? { ":cost": cost } : {}),
    },
  };
  const puts = Array.from({ length: parts }, (_, part) => ({
    Put: {
      TableName: table(),
      Item: {
        ...Keys.executionStep(id, step.id, part),
        type: "executionStep",
        v: 2,
        stepId: step.id,
        part,
        parts,
        outputBytes: output.length,
        outputParts,
        body: bytes.subarray(part * PART_BYTES, (part + 1) * PART_BYTES),
      },
    },
  }));
  const outputPuts = Array.from({ length: outputParts }, (_, part) => ({
    Put: {
      TableName: table(),
      Item: {
        ...Keys.executionStepOutput(id, step.id, part),
        type: "executionStepOutput",
        v: 2,
        stepId: step.id,
        part,
        parts: outputParts,
        body: output.subarray(part * PART_BYTES, (part + 1) * PART_BYTES),
      },
    },
  }));
  try {
    await db.send(new TransactWriteCommand({ TransactItems: [{ Update: update }, ...puts, ...outputPuts] }));
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
  emitChange(workflowId, id);
  return true;
}

export interface Outcome {
  status: Exclude<ExecutionStatus, "pending">;
  error?: string;
  endAt: number;
  /** The run's final costs (replace those recorded with steps). */
  cogs?: Cost[];
}

/** Ends a pending execution; false when it had already ended (another writer won) or does not exist. */
export async function finish(workflowId: string, id: string, outcome: Outcome): Promise<boolean> {
  const sets = ["#status = :status", "endAt = :endAt"];
  const values: Item = { ":status": outcome.status, ":endAt": outcome.endAt, ":pending": "pending" };
  if (outcome.error !== undefined) {
    sets.push("#error = :error");
    values[":error"] = outcome.error;
  }
  if (outcome.cogs) {
    sets.push("cogs = :cogs");
    values[":cogs"] = Object.fromEntries(outcome.cogs.map((c) => [c.nodeId, c]));
  }
  try {
    await useRuntime().db.send(
      new UpdateCommand({
        TableName: table(),
        Key: Keys.execution(workflowId, id),
        ConditionExpression: "#status = :pending",
        // The pending index is sparse: the sweeper never sees a finished execution again.
        UpdateExpression: `SET ${sets.join(", ")} REMOVE gsi2pk, gsi2sk`,
        ExpressionAttributeNames: { "#status": "status", ...(outcome.error !== undefined ? { "#error": "error" } : {}) },
        ExpressionAttributeValues: values,
      }),
    );
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
  emitChange(workflowId, id);
  return true;
}

/** For the runner's shouldStop: true once the execution is terminal (or gone), by a strongly consistent read. */
export async function isFinished(workflowId: string, id: string): Promise<boolean> {
  const found = await readSummary(workflowId, id);
  return !found || found.summary.status !== "pending";
}
