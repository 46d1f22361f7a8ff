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
 */
import type { Address } from "viem";
import { useRuntime } from "../runtime";
import { log } from "../log";
import type { Cost, Step, StepErrorCode } from "./schemas";
import type { Node } from "../workflow/schemas";
import { partChainId } from "../workflow/definition";
import { OutboundError } from "../outbound/types";
import { TemplateUnresolvedError, renderConfig, renderString, resolvePath, wholeTemplatePath, type Variables } from "../templates";
import { createRedactor, type Redactor } from "../secret/redact";
import { ExecutionBudget, type HeldState } from "./budget";
import { JsonText, stringify } from "../json-text";
import { SandboxSession } from "../sandbox/session";
import { cutOffMessage } from "../sandbox/pool";
import { limitLog, recordedOutput } from "./step";
import { definitionSecretNames, runVariables, stepVariables } from "./variables";
import { kinds as defaultKinds } from "../kinds/kinds";
import { isSuspend, StepFailure, type Gas, type NodeEnv, type NodeOutcome, type NodeResult, type Suspension } from "../kinds/kind";
import { type Registry } from "../kinds/registry";
import type { EndedWait, RunInput, RunResult, RunSnapshot } from "./types";

const DEFAULT_STOP_REASON = "execution stopped";
const DEFAULT_DEADLINE_REASON = "execution timed out";
export const INTERNAL_ERROR = "internal error: the engine could not run the workflow";

type Settled = "succeeded" | "failed" | "skipped";

interface Failure {
  code: StepErrorCode;
  message: string;
  data: unknown;
  log?: string;
  gas?: Gas;
}

export async function runWorkflow(input: RunInput): Promise<RunResult> {
  const runtime = useRuntime();
  const now = () => runtime.now();
  const { limits, allowPrivateNetwork } = runtime.config;
  const { definition, graph } = input;
  const kinds = input.kinds ?? defaultKinds;
  const nodes = new Map(definition.nodes.map((n) => [n.id, n]));
  const position = new Map(definition.nodes.map((n, i) => [n.id, i]));

  const { signal } = input;
  const restored = input.resume?.snapshot;
  const sandbox = new SandboxSession(input.context.owner, {
    budgetMs: limits.sandboxTimePerExecutionMs,
    ...(signal ? { signal } : {}),
    ...(restored ? { spentMs: restored.spent.sandboxMs } : {}),
  });
  const steps: Step[] = [];
  const cogs: Cost[] = [];
  let redactor: Redactor = createRedactor([]);
  let notified: Promise<void> = Promise.resolve();
  const record = (step: Step, cost?: Cost, final = false) => {
    steps.push(step);
    if (cost) cogs.push(cost);
    if (input.onStep) notified = notified.then(() => input.onStep!(step, { final }));
    return notified;
  };

  const state = new Map<string, Settled>(Object.entries(restored?.settled ?? {}));
  // Step outputs as JSON text: what later templates read (by path) and scripts receive (§18.2).
  const outputs = new Map<string, JsonText>(Object.entries(restored?.outputs ?? {}).map(([id, text]) => [id, new JsonText(text)]));
  const budget = new ExecutionBudget(limits, restored?.spent);
  const choices = new Map<string, string | null>(Object.entries(restored?.choices ?? {}));
  const running = new Map<string, Promise<void>>();
  // Nodes whose waits are open, and the node steps of earlier passes (for the final status).
  const open = new Set<string>(restored?.open ?? []);
  const earlierSteps = [...(restored?.steps ?? [])];
  let stopped: string | undefined;
  let internal: unknown;
  let suspended = false;
  const snapshot = (): RunSnapshot => ({
    trigger: restored?.trigger ?? { output: input.triggerOutput, ...(input.triggerInput ? { input: input.triggerInput } : {}) },
    settled: Object.fromEntries(state),
    choices: Object.fromEntries(choices),
    outputs: Object.fromEntries([...outputs].map(([id, json]) => [id, json.text])),
    open: [...open],
    steps: [
      ...earlierSteps,
      ...steps.slice(restored ? 0 : 1).map((s) => ({ id: s.id, name: s.name, startAt: s.startAt, success: s.success })),
    ],
    spent: { ...budget.spent(), sandboxMs: sandbox.usedMs },
  });

  try {
    const secrets = await input.secrets(definitionSecretNames(definition, kinds));
    redactor = createRedactor(Object.values(secrets));
    const shared = runVariables(
      restored
        ? { ...input, triggerOutput: restored.trigger.output, ...(restored.trigger.input ? { triggerInput: restored.trigger.input } : {}) }
        : input,
      secrets,
    );
    const runner = (input.context.smartWalletAddress ?? settingsRunner(definition.inputVariables)) as Address | undefined;

    const { trigger } = definition;
    if (!restored)
      await record({
        id: trigger.id ?? graph.triggerId,
        type: trigger.type,
        name: trigger.name,
        success: true,
        config: trigger.config as Record<string, unknown>,
        // In slices: a trigger output's size is bounded only by what its source sent (§18).
        output: await redactor.inSlices.value(input.triggerOutput),
        startAt: input.startAt,
        endAt: input.startAt,
      });

    /** A wait that ended: its step is recorded by whatever ended it; the run takes its outcome as a finished node's. */
    const applyEnded = (ended: EndedWait) => {
      if (!open.delete(ended.nodeId)) return;
      const text = stringify(ended.output);
      budget.keep(Buffer.byteLength(text));
      outputs.set(ended.nodeId, new JsonText(text));
      state.set(ended.nodeId, ended.success ? "succeeded" : "failed");
      earlierSteps.push({ id: ended.nodeId, name: nodes.get(ended.nodeId)!.name, startAt: ended.startAt, success: ended.success });
    };
    for (const ended of input.resume?.ended ?? []) applyEnded(ended);

    const isActive = (edge: { source: string; condition?: string }) =>
      edge.source === graph.triggerId ||
      (state.get(edge.source) === "succeeded" && (edge.condition === undefined || choices.get(edge.source) === edge.condition));
    const settled = (id: string) => id === graph.triggerId || state.has(id);

    const stopReason = async (): Promise<string | undefined> => {
      if (signal?.aborted || (input.deadline !== undefined && now() > input.deadline))
        return input.deadlineReason ?? DEFAULT_DEADLINE_REASON;
      if (input.shouldStop && (await input.shouldStop())) return input.stopReason ?? DEFAULT_STOP_REASON;
      return undefined;
    };

    const start = (node: Node) => {
      const task = (async () => {
        const startAt = now();
        const ancestors = [...(graph.ancestors.get(node.id) ?? [])].flatMap((id): [string, JsonText][] => {
          const output = outputs.get(id);
          return output ? [[nodes.get(id)!.name, output]] : [];
        });
        const variables = stepVariables(shared, ancestors, startAt);
        const inputs: string[] = [];
        const onResolved = (path: string) => {
          if (!inputs.includes(path)) inputs.push(path);
        };
        const held = budget.step();
        const env = nodeEnv({ nodeId: node.id, chainId: partChainId(node.config, definition.chainId), variables, onResolved, held });
        const answered = await execute(kinds, node, env, signal);
        if ("suspend" in answered) {
          held.release();
          if (!input.waits) throw new Error(`node ${node.id} (${node.type}) asked to wait, and this run has no host for waits`);
          await input.waits.begin(node.id, answered.suspend, inputs);
          open.add(node.id);
          return;
        }
        let outcome = answered;
        const endAt = now();

        const data = outcome.ok ? outcome.result.data : outcome.failure.data;
        let output: Record<string, unknown> = { data: data === undefined ? null : data };
        let outputText = stringify(output);
        held.release();
        if (!budget.keep(Buffer.byteLength(outputText))) {
          const failure = budget.outputTooLarge();
          outcome = {
            ok: false,
            failure: {
              code: failure.code,
              message: failure.message,
              data: null,
              ...(outcome.ok ? {} : { ...(outcome.failure.log ? { log: outcome.failure.log } : {}) }),
            },
          };
          output = { data: null };
          outputText = stringify(output);
        }
        // Redacted in slices, before the node counts as settled: from here to `record` nothing awaits, so no
        // node downstream can start (or finish) before this step is recorded.
        const rawLog = outcome.ok ? outcome.result.log : outcome.failure.log;
        const stepLog = rawLog ? await redactor.inSlices.log(limitLog(rawLog, limits.maxStepLogBytes)) : "";
        const error = outcome.ok ? undefined : await redactor.inSlices.text(outcome.failure.message);
        const recorded = await recordedOutput(output, limits.maxStepOutputBytes, (value) => redactor.inSlices.value(value), outputText);

        outputs.set(node.id, new JsonText(outputText));
        state.set(node.id, outcome.ok ? "succeeded" : "failed");
        const chosen = kinds.node(node.type)?.chosen;
        if (outcome.ok && chosen) choices.set(node.id, chosen(data, node.id));

        const gas = outcome.ok ? outcome.result.gas : outcome.failure.gas;
        const costChain = kinds.node(node.type)?.costChainConfig;
        const chainId = partChainId(costChain ? costChain(node.config) : node.config, definition.chainId);
        const step: Step = {
          id: node.id,
          type: node.type,
          name: node.name,
          success: outcome.ok,
          ...(outcome.ok ? {} : { error: error!, errorCode: outcome.failure.code }),
          ...(stepLog ? { log: stepLog } : {}),
          inputs,
          config: node.config as Record<string, unknown>,
          output: recorded,
          startAt,
          endAt,
          ...(gas ? gasFields(gas) : {}),
        };
        const cost: Cost | undefined = gas
          ? {
              nodeId: node.id,
              costType: "gas",
              fee: { amount: gas.totalGasCost.toString(), unit: "WEI" },
              gasUnits: gas.gasUsed.toString(),
              chainId,
            }
          : undefined;
        // The run's last step when nothing else runs and every node is decided (an open wait is not): none can follow.
        await record(step, cost, running.size === 1 && graph.order.every((id) => state.has(id)));
      })()
        .catch((err: unknown) => {
          internal ??= err;
          if (!state.has(node.id)) state.set(node.id, "failed");
        })
        .finally(() => running.delete(node.id));
      running.set(node.id, task);
    };

    const nodeEnv = (base: {
      nodeId: string;
      chainId: number;
      variables: Variables;
      onResolved: (path: string) => void;
      held: HeldState;
      iteration?: number;
    }): NodeEnv => ({
      nodeId: base.nodeId,
      chainId: base.chainId,
      now,
      caller: input.context.owner,
      variables: base.variables,
      // What expansion produces is held against the state budget as it is produced (§18.2), until the step ends.
      render: (config) => renderConfig(config, base.variables, { onResolved: base.onResolved, charge: base.held.hold }),
      renderText: (text, options) =>
        renderString(text, base.variables, { ...options, onResolved: base.onResolved, charge: base.held.hold }),
      resolveWhole: (inputVariable) => {
        const path = wholeTemplatePath(inputVariable);
        if (!path) throw new TemplateUnresolvedError(inputVariable);
        const value = resolvePath(path, base.variables);
        base.onResolved(path.text);
        return value;
      },
      mode: input.mode,
      ...(runner ? { runner } : {}),
      // Each operation is keyed by (execution, node, iteration): its nonce key (API.md §19), so a repeat sends nothing new.
      ...(input.mode === "run" && input.sendCalls
        ? {
            sendCalls: (request) =>
              input.sendCalls!({ ...request, nodeId: base.nodeId, ...(base.iteration !== undefined ? { iteration: base.iteration } : {}) }),
          }
        : {}),
      limits,
      sandbox,
      holdState: (bytes) => base.held.hold(bytes),
      takeRequest: () => budget.takeRequest(),
      ...(signal ? { signal } : {}),
      allowPrivateNetwork,
      child: (extra, chainId, iteration) =>
        nodeEnv({ ...base, chainId, variables: { ...base.variables, ...extra }, ...(iteration !== undefined ? { iteration } : {}) }),
      runKind: (type, config, env) => runKind(kinds, type, config, env, signal),
      writesOnChain: (type) => kinds.node(type)?.writesOnChain === true,
    });

    // Decide every node whose sources have settled; start the runnable ones; wait for one to finish; repeat.
    for (;;) {
      let progressed = true;
      while (progressed && stopped === undefined && internal === undefined) {
        progressed = false;
        for (const id of graph.order) {
          if (state.has(id) || running.has(id) || open.has(id)) continue;
          const incoming = graph.incoming.get(id) ?? [];
          if (!incoming.every((e) => settled(e.source))) continue;
          if (!incoming.some(isActive) || incoming.some((e) => state.get(e.source) === "failed")) {
            state.set(id, "skipped");
            progressed = true;
            continue;
          }
          stopped = await stopReason();
          if (stopped !== undefined) break;
          start(nodes.get(id)!);
        }
      }
      if (running.size === 0) {
        if (open.size === 0 || stopped !== undefined || internal !== undefined) break;
        await notified;
        // Not suspended for a workflow deleted meanwhile (its waiting runs were ended already).
        stopped = await stopReason();
        if (stopped !== undefined) break;
        const answer = await input.waits!.quiet(snapshot());
        if ("suspended" in answer) {
          suspended = true;
          break;
        }
        if ("stopped" in answer) {
          stopped = answer.stopped;
          break;
        }
        for (const ended of answer.ended) applyEnded(ended);
        continue;
      }
      await Promise.race(running.values());
    }
    await notified;
  } catch (err) {
    internal ??= err;
  }

  if (internal !== undefined) {
    await Promise.allSettled([...running.values(), notified]);
    log.error("workflow run failed inside the engine", {
      workflowId: input.context.workflowId,
      executionId: input.context.executionId,
      error: redactor.text(internal instanceof Error ? `${internal.name}: ${internal.message}` : String(internal)),
    });
  }

  const triggerStep = restored ? undefined : steps[0];
  const nodeSteps = restored ? [...steps] : steps.slice(1);
  nodeSteps.sort((a, b) => a.startAt - b.startAt || position.get(a.id)! - position.get(b.id)!);
  const ordered = triggerStep ? [triggerStep, ...nodeSteps] : nodeSteps;
  const order = new Map(ordered.map((s, i) => [s.id, i]));
  cogs.sort((a, b) => order.get(a.nodeId)! - order.get(b.nodeId)!);
  const result = (status: RunResult["status"], error?: string): RunResult => ({
    status,
    ...(error !== undefined ? { error } : {}),
    steps: ordered,
    cogs,
    endAt: now(),
  });

  if (internal !== undefined) return result("error", INTERNAL_ERROR);
  if (stopped !== undefined) return result("error", stopped);
  if (signal?.aborted) return result("error", input.deadlineReason ?? DEFAULT_DEADLINE_REASON);
  if (suspended) return result("waiting");
  const all = [...earlierSteps, ...nodeSteps.map((s) => ({ id: s.id, name: s.name, startAt: s.startAt, success: s.success }))];
  all.sort((a, b) => a.startAt - b.startAt || position.get(a.id)! - position.get(b.id)!);
  const failed = all.filter((s) => !s.success);
  if (failed.length) return result("failed", `${failed.length} of ${all.length} steps failed: ${failed.map((s) => s.name).join(", ")}`);
  return result("success");
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
