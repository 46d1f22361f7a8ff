/**
 * The runner: runs one claimed execution to its end (ARCHITECTURE.md "Runner"). Called by the bus (an
 * `execution.requested` event: functions/runner.ts in AWS, the in-process bus locally) and by a blocking
 * `:trigger` in the request itself.
 *
 * Idempotent per execution id: the first call marks the pending execution started with one conditional write;
 * every later delivery of the same event (EventBridge and Lambda retry, the in-process bus, a blocking trigger
 * racing its own event) finds the mark and runs nothing. A runner that dies after the mark leaves the execution
 * pending, and the sweeper ends it `error` "execution timed out" (API.md §10.3).
 *
 * A run: the workflow as stored now (deleted → `error` "workflow was deleted"), the run input written by the
 * claim, secrets resolved by name only when referenced (workflow scope over user scope), user operations sent
 * from the workflow's wallet through the owner-checked sender, each step recorded as it finishes, and a check
 * before every node that the workflow still exists and the sweeper has not ended the execution.
 */
import { DeleteCommand, GetCommand, PutCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import type { Address } from "viem";
import { useRuntime } from "../runtime";
import { log } from "../log";
import { Keys } from "../store/keys";
import { isConditionFailure } from "../store/table";
import { Secret } from "../secret";
import { chainSettings, publicClient } from "../chain/chains";
import { partChainId } from "../workflow/definition";
import { compileGraph } from "../workflow/graph";
import * as Workflow from "../workflow/workflow";
import { runWorkflow, INTERNAL_ERROR } from "../engine/run";
import { walletSender } from "../wallet/operation";
import * as Executions from "./execution";
import { blockStepOutput } from "./trigger-output";
import type { BusEvent, EventBus } from "./bus";
import type { Cost, Step } from "./schemas";

export const WORKFLOW_DELETED = "workflow was deleted";

/** What the claim hands the run besides the workflow: the trigger step's output and `triggerInput`. */
export interface RunRequest {
  /** Absent for a block trigger without `triggerOutput`: the runner reads the latest block. */
  triggerOutput?: Record<string, unknown>;
  triggerInput?: Record<string, unknown>;
}

/** Run inputs up to this size (JSON bytes) ride on the execution item; larger ones (manual data reaches 1 MiB) go in parts. */
const INLINE_INPUT_BYTES = 200_000;
const PART_BYTES = 350_000;

/** Subscribes the runner to a bus (the local host and tests; in AWS the rule of infra/bus.ts does this). */
export function withRunner<B extends EventBus>(bus: B): B {
  bus.subscribe(async (event: BusEvent) => {
    if (event.type === "execution.requested") await runExecution(event.workflowId, event.executionId);
  });
  return bus;
}

/** Runs the execution once; a repeated call for the same id does nothing. Never throws for a run's failure. */
export async function runExecution(workflowId: string, executionId: string): Promise<void> {
  const started = await markStarted(workflowId, executionId);
  if (!started) return;
  const { now } = useRuntime();
  try {
    const workflow = await Workflow.getForRun(workflowId);
    if (!workflow) {
      await Executions.finish(workflowId, executionId, { status: "error", error: WORKFLOW_DELETED, endAt: now() });
      return;
    }
    const request = await readRunInput(executionId, started);
    const outcome = await run(workflow, started, request);
    if (await Executions.finish(workflowId, executionId, outcome)) await Workflow.recordOutcome(workflowId, outcome.status, outcome.endAt);
  } catch (err) {
    log.error("run failed", { workflowId, executionId, error: err });
    const endAt = now();
    if (await Executions.finish(workflowId, executionId, { status: "error", error: INTERNAL_ERROR, endAt }).catch(() => false)) {
      await Workflow.recordOutcome(workflowId, "error", endAt).catch(() => undefined);
    }
  }
}

interface StartedExecution {
  id: string;
  workflowId: string;
  owner: string;
  index: number;
  startAt: number;
  runInput?: string;
  runInputParts?: number;
}

/** The conditional "started" mark: only a pending execution not yet started takes it. */
async function markStarted(workflowId: string, executionId: string): Promise<StartedExecution | undefined> {
  const { db, config, now } = useRuntime();
  try {
    const out = await db.send(
      new UpdateCommand({
        TableName: config.tableName,
        Key: Keys.execution(workflowId, executionId),
        UpdateExpression: "SET runStartedAt = :now",
        ConditionExpression: "#status = :pending AND attribute_not_exists(runStartedAt)",
        ExpressionAttributeNames: { "#status": "status" },
        ExpressionAttributeValues: { ":now": now(), ":pending": "pending" },
        ReturnValues: "ALL_NEW",
      }),
    );
    return out.Attributes as StartedExecution;
  } catch (err) {
    if (isConditionFailure(err)) return undefined;
    throw err;
  }
}

async function run(workflow: Workflow.WorkflowRecord, execution: StartedExecution, request: RunRequest): Promise<Executions.Outcome> {
  const { now } = useRuntime();
  const { id: workflowId, trigger, nodes, edges, inputVariables, chainId } = workflow;
  const owner = workflow.owner;
  const position = new Map(nodes.map((n, i) => [n.id, i]));
  const partChain = new Map(nodes.map((n) => [n.id, partChainId(n.config, chainId)]));

  let triggerOutput = request.triggerOutput;
  if (!triggerOutput) {
    const blockChain = partChainId(trigger.config, chainId);
    try {
      triggerOutput = blockStepOutput(await publicClient(chainSettings(blockChain)).getBlock({ blockTag: "latest" }));
    } catch (err) {
      log.warn("could not read the latest block for a block trigger", { workflowId, chainId: blockChain, error: (err as Error).message });
      return { status: "error", error: `could not read the latest block of chain ${blockChain}`, endAt: now() };
    }
  }

  const result = await runWorkflow({
    mode: "run",
    definition: { chainId, trigger, nodes, edges, inputVariables },
    graph: compileGraph({ trigger, nodes, edges }),
    context: {
      workflowId,
      executionId: execution.id,
      executionIndex: execution.index,
      owner: owner as Address,
      smartWalletAddress: workflow.smartWalletAddress as Address,
      chainId,
    },
    triggerOutput,
    ...(request.triggerInput ? { triggerInput: request.triggerInput } : {}),
    startAt: execution.startAt,
    secrets: (names) => Secret.resolveForExecution(owner, workflowId, names),
    sendCalls: walletSender({ owner: owner as Address, wallet: workflow.smartWalletAddress as Address }),
    onStep: async (step) => {
      await Executions.recordStep(workflowId, execution.id, step, costOf(step, partChain.get(step.id) ?? chainId), position.get(step.id));
    },
    shouldStop: async () => {
      const [current, finished] = await Promise.all([Workflow.getForRun(workflowId), Executions.isFinished(workflowId, execution.id)]);
      return !current || finished;
    },
    stopReason: WORKFLOW_DELETED,
  });
  return { status: result.status, ...(result.error !== undefined ? { error: result.error } : {}), endAt: result.endAt, cogs: result.cogs };
}

/** The cost a step's user operation adds while the run goes (API.md §9.6); the final list comes with the result. */
function costOf(step: Step, chainId: number): Cost | undefined {
  if (step.totalGasCost === undefined || step.gasUsed === undefined) return undefined;
  return { nodeId: step.id, costType: "gas", fee: { amount: step.totalGasCost, unit: "WEI" }, gasUnits: step.gasUsed, chainId };
}

// ---------------------------------------------------------------------------------------------------------
// The run input, stored by the claim and read by the runner

/**
 * Prepares the run input for the claim: attributes for the execution item, and (when large) parts written now,
 * before the claim's transaction, with `discard` to remove them when the claim fails.
 */
export async function runInputStorage(
  executionId: string,
  request: RunRequest,
): Promise<{ attributes: Record<string, unknown>; discard: () => Promise<void> }> {
  const json = JSON.stringify(request);
  const bytes = Buffer.from(json, "utf8");
  if (bytes.length <= INLINE_INPUT_BYTES) return { attributes: { runInput: json }, discard: async () => {} };
  const { db, config, now } = useRuntime();
  const parts = Math.ceil(bytes.length / PART_BYTES);
  // Kept as long as an execution can still be started (timeout) with a wide margin; TTL removes them after.
  const expiresAt = Math.floor(now() / 1000) + Math.ceil(config.limits.executionTimeoutMs / 1000) + 24 * 3600;
  for (let part = 0; part < parts; part++) {
    await db.send(
      new PutCommand({
        TableName: config.tableName,
        Item: { ...Keys.executionInput(executionId, part), type: "executionInput", v: 1, part, parts, body: bytes.subarray(part * PART_BYTES, (part + 1) * PART_BYTES), expiresAt },
      }),
    );
  }
  return {
    attributes: { runInputParts: parts },
    discard: async () => {
      for (let part = 0; part < parts; part++) {
        await db.send(new DeleteCommand({ TableName: config.tableName, Key: Keys.executionInput(executionId, part) }));
      }
    },
  };
}

async function readRunInput(executionId: string, execution: StartedExecution): Promise<RunRequest> {
  if (execution.runInput !== undefined) return JSON.parse(execution.runInput) as RunRequest;
  if (!execution.runInputParts) return {};
  const { db, config } = useRuntime();
  const chunks = await Promise.all(
    Array.from({ length: execution.runInputParts }, async (_, part) => {
      const out = await db.send(new GetCommand({ TableName: config.tableName, Key: Keys.executionInput(executionId, part), ConsistentRead: true }));
      if (!out.Item) throw new Error(`part ${part} of the run input of ${executionId} is missing`);
      return out.Item.body as Uint8Array;
    }),
  );
  return JSON.parse(Buffer.concat(chunks).toString("utf8")) as RunRequest;
}
