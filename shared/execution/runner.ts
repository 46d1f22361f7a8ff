/**
 * The runner: runs one claimed execution to its end (ARCHITECTURE.md "Runner"). Called by the bus (an
 * `execution.requested` event: functions/runner.ts in AWS, the in-process bus locally) and by a blocking
 * `:trigger` in the request itself, both through the process's fair queue (run-queue.ts, `runQueued`).
 *
 * Idempotent per execution id: the first call marks the pending execution started with one conditional write;
 * every later delivery of the same event (EventBridge and Lambda retry, the in-process bus, a blocking trigger
 * racing its own event) finds the mark and runs nothing. A runner that dies after the mark leaves the execution
 * pending, and the sweeper ends it `error` "execution timed out" (API.md §10.3), unless all the pass had done lay in
 * a sealed state and waits ended since (a resume, or a checkpoint): another runner then takes it over from there
 * (./recovery.ts).
 *
 * A run that waits (API.md §17.1, ./waits.ts) suspends with its state persisted and holds nothing; whoever ends a
 * wait hands it back through the bus (`resume`), and any process resumes it from the stored state: the resume
 * takes the execution back to `pending` conditionally (one driver), and goes on from where the run stood.
 *
 * A run: the workflow as stored now (deleted → `error` "workflow was deleted"), the run input written by the
 * claim, secrets resolved by name only when referenced (workflow scope over user scope), user operations sent
 * from the workflow's wallet through the owner-checked sender, each step recorded as it finishes, and a check
 * before a node starts that the workflow still exists (read again once a node has finished since the last look)
 * and that the sweeper has not ended the execution (a step it could not record).
 */
import type { Address } from "viem";
import { log } from "../log";
import { markRunStarted } from "../store/entities/execution";
import * as Secret from "../secret/secret";
import { chainSettings, publicClient } from "../chain/chains";
import { compileGraph } from "../workflow/graph";
import { runWorkflow } from "../engine/run";
import { walletSender } from "../wallet/operation";
import { blockStepOutput } from "./trigger-output";
import { type BusEvent, type EventBus } from "./bus/event-bus";
import { readRunInput, type RunRequest } from "./run-input";
import { endedWaits, loadState, waitHost } from "./waits";
import { emitChange } from "./execution-stored";
import { getExecution, openWaitsOf, renewDriver, resumeRun, takeOverRun, type ExecutionItem } from "../store/entities/execution";
import { DRIVER_RENEW_MS, lostPass } from "./recovery";
import type { RunInput } from "../engine/types";
import { runQueue } from "./run-queue";
import { useRuntime } from "../current-runtime";
import { partChainId } from "../kinds/support/schema-kit";
import { type WorkflowRecord } from "../workflow/record";
import { errorMark, recordOutcome, outcomeHint } from "../workflow/outcome";
import { getForRun } from "../workflow/stored";
import { INTERNAL_ERROR } from "../engine/run-state";
import { readSummary } from "./execution-read";
import { finish, type Outcome, recordStep } from "./execution-write";
import type { Cost, Step } from "../engine/schemas";

const WORKFLOW_DELETED = "workflow was deleted";

/**
 * Subscribes the runner to a bus (the local host and tests; in AWS the rule of infra/bus.ts does this). Each
 * requested run waits for its owner's turn in the process's fair queue (run-queue.ts).
 */
export function withRunner<B extends EventBus>(bus: B): B {
  bus.subscribe(async (event: BusEvent) => {
    if (event.type !== "execution.requested") return;
    const owner = event.owner ?? (await readSummary(event.workflowId, event.executionId))?.owner;
    if (owner === undefined) return; // no such execution: nothing to run
    if (event.resume) await runQueue().run(owner, () => resumeExecution(event.workflowId, event.executionId, event.from));
    else await runQueued(owner, event.workflowId, event.executionId);
  });
  return bus;
}

/** Runs the execution in `owner`'s turn (run-queue.ts): the bus's deliveries and blocking triggers alike. */
export function runQueued(owner: string, workflowId: string, executionId: string): Promise<void> {
  return runQueue().run(owner, () => runExecution(workflowId, executionId));
}

/** Runs the execution once; a repeated call for the same id does nothing. Never throws for a run's failure. */
export async function runExecution(workflowId: string, executionId: string): Promise<void> {
  const started = await markStarted(workflowId, executionId);
  if (!started) return;
  await drive(workflowId, executionId, async (workflow) => {
    const request = await readRunInput(executionId, started);
    return run(workflow, started, request, { startedAt: started.startAt, pendingMsBefore: 0 });
  });
}

/**
 * Resumes a waiting execution whose wait ended (./waits.ts): `pending` again (conditional on the state it
 * suspended with, so one resumer wins), then the run goes on from its stored state with the waits that ended.
 * A pending execution whose resumed pass lost its driver (./recovery.ts) is taken over instead. Does nothing
 * otherwise.
 */
export async function resumeExecution(
  workflowId: string,
  executionId: string,
  from?: { generation: number; pendingMs: number },
): Promise<void> {
  const key = { workflowId, id: executionId };
  let state = from;
  if (!state) {
    const read = await getExecution(key);
    if (read?.status === "pending") return takeOver(key, read);
    if (read?.status !== "waiting") return;
    state = { generation: Number(read.stateGeneration), pendingMs: Number(read.pendingMs ?? 0) };
  }
  const at = useRuntime().now();
  const { pendingMs } = state;
  const resumed = await resumeRun(key, state.generation, at, at - pendingMs);
  if (!resumed) return;
  emitChange(workflowId, executionId);
  await driveFromState(resumed, { startedAt: at, pendingMsBefore: pendingMs });
}

/**
 * Takes over a resumed pass whose driver stopped (./recovery.ts, `lostPass`): the run goes on again from its last
 * sealed state, the pass's pending time so far counted.
 */
async function takeOver(key: { workflowId: string; id: string }, read: Record<string, unknown>): Promise<void> {
  const now = useRuntime().now();
  const lost = lostPass(read, now);
  if (!lost) return;
  const taken = await takeOverRun(key, lost, now);
  if (!taken) return;
  log.warn("resuming a run whose driver stopped, from its last sealed state", { executionId: key.id });
  await driveFromState(taken, { startedAt: Number(taken.passStartedAt), pendingMsBefore: Number(taken.pendingMs ?? 0) });
}

/** Drives a pending execution on from its sealed state and the waits ended since. */
async function driveFromState(item: ExecutionItem, pass: { startedAt: number; pendingMsBefore: number }): Promise<void> {
  const workflowId = String(item.workflowId);
  const executionId = String(item.id);
  // The state and the ended waits' steps are read while drive() reads the workflow: three reads, one round trip.
  const open = openWaitsOf(item);
  const endedIds = ((item.openWaits as string[] | undefined) ?? []).filter((id) => !open.has(id));
  const prepared = Promise.all([loadState(item), endedWaits(item, endedIds)]);
  prepared.catch(() => undefined); // awaited below unless the workflow is gone
  await drive(workflowId, executionId, async (workflow) => {
    const [snapshot, ended] = await prepared;
    return run(workflow, item as StartedExecution, {}, pass, { snapshot, ended });
  });
}

/**
 * One pass of a run, to its end or its suspension: the workflow as stored now, then the outcome recorded. The pass
 * renews the execution's `driverAt` meanwhile, so that recovery (./recovery.ts) never takes over a live pass.
 */
async function drive(
  workflowId: string,
  executionId: string,
  pass: (workflow: WorkflowRecord) => Promise<Ended | "waiting">,
): Promise<void> {
  const heartbeat = setInterval(() => {
    renewDriver({ workflowId, id: executionId }, useRuntime().now()).catch((err: unknown) =>
      log.warn("could not renew a run's driver mark", { executionId, error: (err as Error).message }),
    );
  }, DRIVER_RENEW_MS);
  heartbeat.unref();
  try {
    await drivePass(workflowId, executionId, pass);
  } finally {
    clearInterval(heartbeat);
  }
}

async function drivePass(
  workflowId: string,
  executionId: string,
  pass: (workflow: WorkflowRecord) => Promise<Ended | "waiting">,
): Promise<void> {
  const { now } = useRuntime();
  try {
    // Taken before the read, so the outcome's hint can spare a success its read of the consecutive errors.
    const mark = errorMark(workflowId);
    const workflow = await getForRun(workflowId);
    if (!workflow) {
      await finish(workflowId, executionId, { status: "error", error: WORKFLOW_DELETED, endAt: now() });
      return;
    }
    const ended = await pass(workflow);
    if (ended === "waiting") return;
    const { outcome, last } = ended;
    if (await finish(workflowId, executionId, outcome, last))
      await recordOutcome(workflowId, outcome.status, outcome.endAt, outcomeHint(workflow, mark));
  } catch (err) {
    log.error("run failed", { workflowId, executionId, error: err });
    const endAt = now();
    if (await finish(workflowId, executionId, { status: "error", error: INTERNAL_ERROR, endAt }).catch(() => false)) {
      await recordOutcome(workflowId, "error", endAt).catch(() => undefined);
    }
  }
}

/** A pass's end: the outcome, and the run's last step when it is written with the end. */
interface Ended {
  outcome: Outcome;
  last?: { step: Step; position?: number };
}

interface StartedExecution extends ExecutionItem {
  index: number;
  startAt: number;
  runInput?: string;
  runInputParts?: number;
  /** The trigger step the claim wrote into the item, when small (JSON). */
  triggerStep?: string;
}

/** The conditional "started" mark: only a pending execution not yet started takes it. */
async function markStarted(workflowId: string, executionId: string): Promise<StartedExecution | undefined> {
  return (await markRunStarted({ workflowId, id: executionId }, useRuntime().now())) as StartedExecution | undefined;
}

async function run(
  workflow: WorkflowRecord,
  execution: StartedExecution,
  request: RunRequest,
  pass: { startedAt: number; pendingMsBefore: number },
  resume?: RunInput["resume"],
): Promise<Ended | "waiting"> {
  const { now } = useRuntime();
  const { id: workflowId, trigger, nodes, edges, inputVariables, chainId } = workflow;
  const owner = workflow.owner;
  const position = new Map(nodes.map((n, i) => [n.id, i]));
  const partChain = new Map(nodes.map((n) => [n.id, partChainId(n.config, chainId)]));

  let triggerOutput = request.triggerOutput;
  if (!triggerOutput && !resume) {
    const blockChain = partChainId(trigger.config, chainId);
    try {
      triggerOutput = blockStepOutput(await publicClient(chainSettings(blockChain)).getBlock({ blockTag: "latest" }));
    } catch (err) {
      log.warn("could not read the latest block for a block trigger", { workflowId, chainId: blockChain, error: (err as Error).message });
      return { outcome: { status: "error", error: `could not read the latest block of chain ${blockChain}`, endAt: now() } };
    }
  }

  let ended = false;
  let stepsSinceCheck = 0;
  let last: Ended["last"];
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
    triggerOutput: triggerOutput ?? {},
    ...(request.triggerInput ? { triggerInput: request.triggerInput } : {}),
    startAt: execution.startAt,
    secrets: (names) => Secret.resolveForExecution(owner, workflowId, names),
    sendCalls: walletSender({ owner: owner as Address, wallet: workflow.smartWalletAddress as Address, executionId: execution.id }),
    onStep: async (step, { final }) => {
      // The claim wrote a small trigger step into the execution item: recorded again only if the run's differs
      // (redacted, or a block read at run time).
      if (step.id === trigger.id && execution.triggerStep !== undefined && sameOutput(execution.triggerStep, step)) return;
      if (final) return void (last = { step, position: position.get(step.id) }); // written with the run's end
      const recorded = await recordStep(
        workflowId,
        execution.id,
        step,
        costOf(step, partChain.get(step.id) ?? chainId),
        position.get(step.id),
      );
      // Not pending any more (the sweeper ended it): nothing further starts.
      if (!recorded) ended = true;
      else if (step.id !== trigger.id) stepsSinceCheck++;
    },
    // Before a node starts: stopped once a step could not be recorded, and the workflow read again only when a node
    // has finished since the last look (the pass began by reading it), so a run whose nodes all start at once
    // reads nothing more.
    shouldStop: async () => {
      if (ended) return true;
      if (stepsSinceCheck === 0) return false;
      stepsSinceCheck = 0;
      return !(await getForRun(workflowId));
    },
    stopReason: WORKFLOW_DELETED,
    waits: waitHost(
      { workflowId, id: execution.id, owner },
      new Map(nodes.map((n, i) => [n.id, { type: n.type, name: n.name, position: i, config: n.config }])),
      pass,
    ),
    ...(resume ? { resume } : {}),
  });
  if (result.status === "waiting") return "waiting";
  const outcome = {
    status: result.status,
    ...(result.error !== undefined ? { error: result.error } : {}),
    endAt: result.endAt,
    cogs: result.cogs,
  };
  return { outcome, ...(last ? { last } : {}) };
}

/** Whether the trigger step the claim stored (JSON) has the output the run recorded. */
function sameOutput(stored: string, step: Step): boolean {
  return JSON.stringify((JSON.parse(stored) as Step).output) === JSON.stringify(step.output);
}

/** The cost a step's user operation adds while the run goes (API.md §9.6); the final list comes with the result. */
function costOf(step: Step, chainId: number): Cost | undefined {
  if (step.totalGasCost === undefined || step.gasUsed === undefined) return undefined;
  return { nodeId: step.id, costType: "gas", fee: { amount: step.totalGasCost, unit: "WEI" }, gasUnits: step.gasUsed, chainId };
}
