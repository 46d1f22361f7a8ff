/**
 * The engine: runs a workflow definition (API.md §8.5) and answers its status, steps and costs (§9.6, §10).
 *
 * Graph: a node is decided once every source of its incoming edges has settled. An edge is active when its
 * source is the trigger, a node that succeeded, or the branch condition that was chosen; the node runs if at
 * least one incoming edge is active and no incoming source failed, else it is skipped (and so, in turn, is
 * what depends only on it). Decided nodes start at once, so independent nodes run concurrently. Skipped
 * nodes leave no step.
 *
 * Each step: variables (§8.6) at its start, the node's kind (shared/kinds, from the run's registry) renders
 * its config and answers an outcome (shared/kinds/kind.ts: its result, or a suspension), the output `{data}`
 * is kept whole for later nodes, and the record is redacted (every resolved secret → `***`), truncated
 * (output and log limits) and handed to `onStep` as it finishes, in finishing order.
 *
 * Waits (API.md §17.1): a node that suspends stays open (not settled), so nothing downstream of it is decided,
 * while independent paths go on; its host (`waits`) records the wait. When no node runs and waits are open, the
 * host either suspends the run (status `waiting`, the snapshot persisted) or hands back the waits that ended
 * meanwhile, whose steps it has recorded, and the run goes on. A resumed run starts from the snapshot and the
 * waits that ended since, its budgets as the earlier passes left them.
 *
 * Stops: before each node starts, `shouldStop` and `deadline` are checked; either ends the run `error` once
 * the nodes in flight have finished. An unexpected failure does the same with a generic message (details go
 * to the service log, never to the record).
 *
 * Shape: the run's state is one object (RunState, ./run-state.ts: decisions, outputs, steps in flight, budgets,
 * waits, how the run ends), driven by one loop (WorkflowRun.schedule): start what is ready, await one step
 * settling (each step settles and records itself), again; when none runs and waits are open, ask the host.
 */
import type { Address } from "viem";
import { log } from "../log";
import type { Config } from "../config";
import type { Cost, Step } from "./schemas";
import { OutboundError } from "../outbound/types";
import { TemplateUnresolvedError, renderConfig, renderString, resolvePath, wholeTemplatePath, type Variables } from "../templates";
import { createRedactor } from "../secret/redact";
import type { HeldState } from "./budget";
import { stringify } from "../json-text";
import { cutOffMessage } from "../sandbox/cut-off";
import { limitLog, recordedOutput } from "./step";
import { definitionSecretNames, runVariables, stepVariables } from "./variables";
import { kinds as defaultKinds } from "../kinds/kinds";
import { isSuspend, StepFailure, type Gas, type NodeEnv, type NodeOutcome, type NodeResult, type Suspension } from "../kinds/kind";
import type { Registry } from "../kinds/registry";
import type { RunInput, RunResult } from "./types";
import { RunState } from "./run-state";
import { useRuntime, type Runtime } from "../current-runtime";
import type { StepErrorCode } from "../kinds/kind";
import type { Node } from "../kinds/shapes";
import { partChainId } from "../kinds/support/schema-kit";

interface Failure {
  code: StepErrorCode;
  message: string;
  data: unknown;
  log?: string;
  gas?: Gas;
}

/** How a node's kind answered, short of suspending: its result, or an expected failure. */
type Answer = { ok: true; result: NodeResult } | { ok: false; failure: Failure };

/** A step's span: when it started and ended, and the template paths it resolved. */
interface Span {
  startAt: number;
  endAt: number;
  inputs: string[];
}

/** What a step records of its log, error and output, truncated and redacted. */
interface Redacted {
  log: string;
  error: string | undefined;
  output: Record<string, unknown>;
}

/** What a node env is built from; `child` derives an iteration's or a nested kind's from it. */
interface StepScope {
  nodeId: string;
  chainId: number;
  variables: Variables;
  onResolved: (path: string) => void;
  held: HeldState;
  iteration?: number;
}

export async function runWorkflow(input: RunInput): Promise<RunResult> {
  return new WorkflowRun(input, useRuntime()).run();
}

/** One pass of a run: the scheduling loop over its RunState, and each step from start to record. */
class WorkflowRun {
  private readonly state: RunState;
  private readonly now: () => number;
  private readonly limits: Config["limits"];
  private readonly allowPrivateNetwork: boolean;
  private readonly kinds: Registry;
  private readonly runner: Address | undefined;
  /** The variables every step starts from (§8.6): set by begin(), before any node starts. */
  private shared: Variables = {};

  constructor(
    private readonly input: RunInput,
    runtime: Runtime,
  ) {
    this.now = () => runtime.now();
    this.limits = runtime.config.limits;
    this.allowPrivateNetwork = runtime.config.allowPrivateNetwork;
    this.kinds = input.kinds ?? defaultKinds;
    this.state = new RunState(input, this.limits, this.now);
    this.runner = (input.context.smartWalletAddress ?? settingsRunner(input.definition.inputVariables)) as Address | undefined;
  }

  async run(): Promise<RunResult> {
    try {
      await this.begin();
      await this.schedule();
      await this.state.delivered();
    } catch (err) {
      this.state.fail(err);
    }
    const failure = await this.state.failure();
    if (failure) this.logFailure(failure.error);
    return this.state.finish();
  }

  /** Reads the secrets, records the trigger step (a first pass) or takes the waits that ended since (a resumed one). */
  private async begin(): Promise<void> {
    const { input, state } = this;
    const secrets = await input.secrets(definitionSecretNames(input.definition, this.kinds));
    state.redactor = createRedactor(Object.values(secrets));
    const trigger = input.resume?.snapshot.trigger;
    this.shared = runVariables(
      trigger ? { ...input, triggerOutput: trigger.output, ...(trigger.input ? { triggerInput: trigger.input } : {}) } : input,
      secrets,
    );
    if (!state.resumed) await this.recordTrigger();
    for (const ended of input.resume?.ended ?? []) state.applyEnded(ended);
  }

  private async recordTrigger(): Promise<void> {
    const { definition, graph, triggerOutput, startAt } = this.input;
    const { trigger } = definition;
    await this.state.record({
      id: trigger.id ?? graph.triggerId,
      type: trigger.type,
      name: trigger.name,
      success: true,
      config: trigger.config as Record<string, unknown>,
      // In slices: a trigger output's size is bounded only by what its source sent (§18).
      output: await this.state.redactor.inSlices.value(triggerOutput),
      startAt,
      endAt: startAt,
    });
  }

  /** Starts what is ready, awaits one step settling, and again; when no step runs and waits are open, asks the host. */
  private async schedule(): Promise<void> {
    for (;;) {
      await this.startReady();
      if (this.state.busy) {
        await this.state.oneSettlement();
        continue;
      }
      if (!this.state.waiting) return;
      if (!(await this.quiet())) return;
    }
  }

  /** Starts every node that is ready, each once the run has been checked not to stop. */
  private async startReady(): Promise<void> {
    for (const node of this.state.nextReady()) {
      if (await this.state.checkStop()) return;
      this.startStep(node);
    }
  }

  /** No step runs, waits are open: the host suspends the run, stops it, or hands back the waits that ended (true: go on). */
  private async quiet(): Promise<boolean> {
    await this.state.delivered();
    // Not suspended for a workflow deleted meanwhile (its waiting runs were ended already).
    if (await this.state.checkStop()) return false;
    const answer = await this.input.waits!.quiet(this.state.snapshot());
    if ("suspended" in answer) {
      this.state.end({ kind: "suspended" });
      return false;
    }
    if ("stopped" in answer) {
      this.state.end({ kind: "stopped", reason: answer.stopped });
      return false;
    }
    for (const ended of answer.ended) this.state.applyEnded(ended);
    return true;
  }

  /** Starts a node's step, which runs concurrently with the others; an unexpected failure fails the run. */
  private startStep(node: Node): void {
    const task = this.runStep(node).catch((err: unknown) => this.state.fail(err, node.id));
    this.state.track(node.id, task);
  }

  /** Runs the node's kind on its variables, then settles its step, or suspends it when the kind waits. */
  private async runStep(node: Node): Promise<void> {
    const startAt = this.now();
    const inputs: string[] = [];
    const held = this.state.budget.step();
    const env = this.nodeEnv({
      nodeId: node.id,
      chainId: partChainId(node.config, this.input.definition.chainId),
      variables: stepVariables(this.shared, this.state.ancestorOutputs(node.id), startAt),
      onResolved: (path) => {
        if (!inputs.includes(path)) inputs.push(path);
      },
      held,
    });
    const answered = await execute(this.kinds, node, env, this.input.signal);
    held.release();
    if ("suspend" in answered) return this.suspend(node, answered.suspend, inputs);
    await this.settle(node, answered, { startAt, endAt: this.now(), inputs });
  }

  /** A node that waits: its host records the wait, and the node stays open. */
  private async suspend(node: Node, wait: Suspension, inputs: string[]): Promise<void> {
    const { waits } = this.input;
    if (!waits) throw new Error(`node ${node.id} (${node.type}) asked to wait, and this run has no host for waits`);
    await waits.begin(node.id, wait, inputs);
    this.state.suspend(node.id);
  }

  /** A node that answered: its output kept (or refused by the state budget), its step redacted, settled and recorded. */
  private async settle(node: Node, answered: Answer, span: Span): Promise<void> {
    const { outcome, output, outputText } = this.keep(answered);
    // Redacted in slices, before the node counts as settled: from here to `record` nothing awaits, so no
    // node downstream can start (or finish) before this step is recorded.
    const redacted = await this.redact(outcome, output, outputText);
    this.state.settle(node.id, outputText, outcome.ok);
    const chosen = this.kinds.node(node.type)?.chosen;
    if (outcome.ok && chosen) this.state.choose(node.id, chosen(outcome.result.data, node.id));
    const gas = outcome.ok ? outcome.result.gas : outcome.failure.gas;
    const cost = gas ? this.gasCost(node, gas) : undefined;
    await this.state.record(stepRecord(node, outcome, redacted, span, gas), cost, this.state.isLast());
  }

  /** The output kept for later nodes: `{data}`, or `{data: null}` and OUTPUT_TOO_LARGE when the state budget refuses it. */
  private keep(answered: Answer): { outcome: Answer; output: Record<string, unknown>; outputText: string } {
    const data = answered.ok ? answered.result.data : answered.failure.data;
    const output = { data: data === undefined ? null : data };
    const outputText = stringify(output);
    if (this.state.budget.keep(Buffer.byteLength(outputText))) return { outcome: answered, output, outputText };
    const { code, message } = this.state.budget.outputTooLarge();
    const log = answered.ok ? undefined : answered.failure.log;
    const outcome: Answer = { ok: false, failure: { code, message, data: null, ...(log ? { log } : {}) } };
    return { outcome, output: { data: null }, outputText: stringify({ data: null }) };
  }

  /** The step's log (cut to its limit), error and output (truncated marker when too large), every secret redacted. */
  private async redact(outcome: Answer, output: Record<string, unknown>, outputText: string): Promise<Redacted> {
    const { redactor } = this.state;
    const rawLog = outcome.ok ? outcome.result.log : outcome.failure.log;
    const log = rawLog ? await redactor.inSlices.log(limitLog(rawLog, this.limits.maxStepLogBytes)) : "";
    const error = outcome.ok ? undefined : await redactor.inSlices.text(outcome.failure.message);
    const recorded = await recordedOutput(output, this.limits.maxStepOutputBytes, (value) => redactor.inSlices.value(value), outputText);
    return { log, error, output: recorded };
  }

  /** The gas a step paid, on the chain its kind's cost names (the node's own by default). */
  private gasCost(node: Node, gas: Gas): Cost {
    const costChain = this.kinds.node(node.type)?.costChainConfig;
    return {
      nodeId: node.id,
      costType: "gas",
      fee: { amount: gas.totalGasCost.toString(), unit: "WEI" },
      gasUnits: gas.gasUsed.toString(),
      chainId: partChainId(costChain ? costChain(node.config) : node.config, this.input.definition.chainId),
    };
  }

  private nodeEnv(scope: StepScope): NodeEnv {
    const { input, kinds, runner } = this;
    const { signal } = input;
    const charged = { onResolved: scope.onResolved, charge: scope.held.hold };
    return {
      nodeId: scope.nodeId,
      chainId: scope.chainId,
      now: this.now,
      caller: input.context.owner,
      variables: scope.variables,
      // What expansion produces is held against the state budget as it is produced (§18.2), until the step ends.
      render: (config) => renderConfig(config, scope.variables, charged),
      renderText: (text, options) => renderString(text, scope.variables, { ...options, ...charged }),
      resolveWhole: (inputVariable) => resolveWhole(inputVariable, scope),
      mode: input.mode,
      ...(runner ? { runner } : {}),
      ...(input.mode === "run" && input.sendCalls ? { sendCalls: sendCallsFor(input.sendCalls, scope) } : {}),
      limits: this.limits,
      sandbox: this.state.sandbox,
      holdState: (bytes) => scope.held.hold(bytes),
      takeRequest: () => this.state.budget.takeRequest(),
      ...(signal ? { signal } : {}),
      allowPrivateNetwork: this.allowPrivateNetwork,
      child: (extra, chainId, iteration) =>
        this.nodeEnv({ ...scope, chainId, variables: { ...scope.variables, ...extra }, ...(iteration !== undefined ? { iteration } : {}) }),
      runKind: (type, config, env) => runKind(kinds, type, config, env, signal),
      writesOnChain: (type) => kinds.node(type)?.writesOnChain === true,
    };
  }

  /** Details go to the service log, never to the record. */
  private logFailure(error: unknown): void {
    log.error("workflow run failed inside the engine", {
      workflowId: this.input.context.workflowId,
      executionId: this.input.context.executionId,
      error: this.state.redactor.text(error instanceof Error ? `${error.name}: ${error.message}` : String(error)),
    });
  }
}

function resolveWhole(inputVariable: string, scope: StepScope): unknown {
  const path = wholeTemplatePath(inputVariable);
  if (!path) throw new TemplateUnresolvedError(inputVariable);
  const value = resolvePath(path, scope.variables);
  scope.onResolved(path.text);
  return value;
}

/** Each operation is keyed by (execution, node, iteration): its nonce key (API.md §19), so a repeat sends nothing new. */
function sendCallsFor(sendCalls: NonNullable<RunInput["sendCalls"]>, scope: StepScope): NodeEnv["sendCalls"] {
  return (request) =>
    sendCalls({ ...request, nodeId: scope.nodeId, ...(scope.iteration !== undefined ? { iteration: scope.iteration } : {}) });
}

function stepRecord(node: Node, outcome: Answer, redacted: Redacted, span: Span, gas: Gas | undefined): Step {
  return {
    id: node.id,
    type: node.type,
    name: node.name,
    success: outcome.ok,
    ...(outcome.ok ? {} : { error: redacted.error!, errorCode: outcome.failure.code }),
    ...(redacted.log ? { log: redacted.log } : {}),
    inputs: span.inputs,
    config: node.config as Record<string, unknown>,
    output: redacted.output,
    startAt: span.startAt,
    endAt: span.endAt,
    ...(gas ? gasFields(gas) : {}),
  };
}

/** Runs a node kind; expected failures become a Failure, anything else is thrown (an internal failure). */
async function execute(
  kinds: Registry,
  node: Node,
  env: NodeEnv,
  signal: AbortSignal | undefined,
): Promise<{ ok: true; result: NodeResult } | { ok: false; failure: Failure } | { suspend: Suspension }> {
  let outcome: NodeOutcome;
  try {
    outcome = await runKind(kinds, node.type, node.config, env, signal);
  } catch (err) {
    const failure = asFailure(err);
    if (!failure) throw err;
    return { ok: false, failure };
  }
  return isSuspend(outcome) ? outcome : { ok: true, result: outcome };
}

function runKind(kinds: Registry, type: string, config: unknown, env: NodeEnv, signal: AbortSignal | undefined): Promise<NodeOutcome> {
  const kind = kinds.node(type);
  if (!kind) throw new Error(`no node kind ${type}`);
  // A loop is cut off through its iterations (each fails with its runner's code); every other kind at once.
  if (!signal || kind.cutOff === "iterations") return kind.run(config, env);
  const code = kind.cutOff;
  const cutOff = () => new StepFailure(code, cutOffMessage(signal));
  if (signal.aborted) return Promise.reject(cutOff());
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(cutOff());
    signal.addEventListener("abort", onAbort, { once: true });
    kind
      .run(config, env)
      .then(resolve, reject)
      .finally(() => signal.removeEventListener("abort", onAbort));
  });
}

function asFailure(err: unknown): Failure | undefined {
  if (err instanceof StepFailure) {
    const log = (err as { log?: unknown }).log;
    return {
      code: err.code,
      message: err.message,
      data: err.data,
      ...(typeof log === "string" ? { log } : {}),
      ...(err.gas ? { gas: err.gas } : {}),
    };
  }
  if (err instanceof TemplateUnresolvedError) return { code: "TEMPLATE_UNRESOLVED", message: err.message, data: null };
  if (err instanceof OutboundError) return { code: err.code, message: err.message, data: null };
  return undefined;
}

function gasFields(gas: Gas) {
  return {
    gasUsed: gas.gasUsed.toString(),
    gasPrice: (gas.gasUsed > 0n ? gas.totalGasCost / gas.gasUsed : 0n).toString(),
    totalGasCost: gas.totalGasCost.toString(),
  };
}

function settingsRunner(inputVariables: Record<string, unknown>): string | undefined {
  const settings = inputVariables.settings as { runner?: unknown } | undefined;
  return typeof settings?.runner === "string" ? settings.runner : undefined;
}
