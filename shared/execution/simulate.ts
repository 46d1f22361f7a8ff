/**
 * `:simulate` and `:estimateFees` (API.md §8.8.8-§8.8.9): a definition run once or priced, stored nowhere.
 *
 * Simulate: §8.7 without the create rules, then `settings.runner` (when set) must be one of the caller's wallets;
 * the engine runs in simulate mode (no sender: writes are `eth_call`s from the runner, transfers balance checks),
 * secrets are the caller's user-scoped ones, and the run is cut off at `simulate_timeout_ms` (API.md §18.1): no
 * node starts after it, and work still running is stopped (scripts interrupted, requests aborted), each stopped
 * step recorded failed with its kind's cut-off code and "simulation time limit of … ms reached". The answer is
 * an Execution with fresh ULIDs that no read will find, `index` 0, status code 200 whatever the status.
 */
import { ulid } from "ulid";
import type { Address } from "viem";
import { useOwner } from "../context";
import { ApiError } from "../errors";
import * as Secret from "../secret/secret";
import * as Wallet from "../wallet/wallet";
import { chainSettings, publicClient } from "../chain/chains";
import { validateDefinition } from "../workflow/definition";
import { runWorkflow } from "../engine/run";
import type { RunResult } from "../engine/types";
import type { CompiledGraph } from "../workflow/graph";
import type { SimulateDefinition } from "../workflow/definition-types";
import { estimateFees } from "../engine/fees";
import { executionFee, valueFeeFor } from "../engine/fee-rules";
import { blockStepOutput, needsChainRead, triggerStepOutput } from "./trigger-output";
import type { Execution } from "./schemas";
import { useRuntime } from "../current-runtime";
import { partChainId } from "../kinds/support/schema-kit";
import { type Mode } from "../workflow/definition-types";
import type { FeeEstimate, Step } from "../engine/schemas";

export const SIMULATION_TIMED_OUT = "simulation timed out";
const simulationTimeLimit = (ms: number) => `simulation time limit of ${ms} ms reached`;
/** How long past the cap the answer waits for stopped work to record its steps. */
const STOPPED_WORK_WAIT_MS = 1_500;

function validate<M extends Mode>(body: Record<string, unknown>, mode: M, now: number) {
  const { config } = useRuntime();
  return validateDefinition(body, {
    mode,
    now,
    limits: config.limits,
    chains: config.chains.map((c) => ({ chainId: c.chainId, blockTimeSeconds: c.blockTimeSeconds })),
    defaultChainId: config.defaultChainId,
  });
}

/** POST /workflows:simulate. */
export async function simulate(body: Record<string, unknown>): Promise<Execution> {
  const owner = useOwner();
  const { now } = useRuntime();
  const startAt = now();
  const { definition, graph } = validate(body, "simulate", startAt);
  const runner = definition.runner as Address | undefined;
  if (runner && !(await isCallersWallet(owner, runner))) {
    throw new ApiError(400, "WALLET_NOT_OWNED", "settings.runner is not a wallet registered by the caller.", {
      errors: [{ path: "body.inputVariables.settings.runner", message: "is not one of the caller's registered wallets" }],
    });
  }

  const workflowId = ulid(startAt);
  const executionId = ulid(startAt);
  const base = {
    id: executionId,
    workflowId,
    chainId: definition.chainId,
    index: 0,
    startAt,
    executionFee: executionFee(),
    valueFee: valueFeeFor(definition.nodes),
  };

  let triggerOutput: Record<string, unknown>;
  if (needsChainRead(definition.trigger, definition.triggerOutput)) {
    const chainId = partChainId(definition.trigger.config, definition.chainId);
    try {
      triggerOutput = blockStepOutput(await publicClient(chainSettings(chainId)).getBlock({ blockTag: "latest" }));
    } catch {
      return { ...base, endAt: now(), status: "error", error: `could not read the latest block of chain ${chainId}`, steps: [], cogs: [] };
    }
  } else {
    triggerOutput = triggerStepOutput(definition.trigger, definition.triggerOutput, startAt);
  }

  const outcome = await runCapped({ definition, graph, runner, owner, workflowId, executionId, triggerOutput, startAt });
  if (outcome.kind === "timeout") {
    return {
      ...base,
      endAt: now(),
      status: "error",
      error: SIMULATION_TIMED_OUT,
      steps: ordered(outcome.steps, definition.nodes),
      cogs: [],
    };
  }
  const result = outcome.result;
  return {
    ...base,
    endAt: result.endAt,
    status: result.status,
    ...(result.error !== undefined ? { error: result.error } : {}),
    steps: result.steps,
    cogs: result.cogs,
  };
}

/** What a capped simulated run needs: the validated definition and who runs it. */
export interface CappedRun {
  definition: SimulateDefinition;
  graph: CompiledGraph;
  runner: Address | undefined;
  owner: Address;
  workflowId: string;
  executionId: string;
  triggerOutput: Record<string, unknown>;
  startAt: number;
}

/**
 * Runs a definition in simulate mode, cut off at `simulate_timeout_ms` (shared by `:simulate` and `/nodes:run`):
 * the engine's result, or `timeout` with the steps recorded so far when stopped work still hung past the cap.
 */
export async function runCapped(input: CappedRun): Promise<{ kind: "done"; result: RunResult } | { kind: "timeout"; steps: Step[] }> {
  const { config, now } = useRuntime();
  const { definition, graph, runner, owner, workflowId, executionId, triggerOutput, startAt } = input;
  const deadline = startAt + config.limits.simulateTimeoutMs;
  const cut = new AbortController();
  const cutTimer = setTimeout(
    () => cut.abort(new Error(simulationTimeLimit(config.limits.simulateTimeoutMs))),
    Math.max(0, deadline - now()),
  );
  const steps: Step[] = [];
  const run = runWorkflow({
    mode: "simulate",
    definition,
    graph,
    context: {
      workflowId,
      executionId,
      executionIndex: 0,
      owner,
      ...(runner ? { smartWalletAddress: runner } : {}),
      chainId: definition.chainId,
    },
    triggerOutput,
    startAt,
    secrets: (names) => Secret.resolveForExecution(owner, undefined, names),
    onStep: (step) => {
      steps.push(step);
    },
    deadline,
    deadlineReason: SIMULATION_TIMED_OUT,
    signal: cut.signal,
  });
  // Stopped work ends at once; should anything still hang past the cap, the answer does not wait for it
  // (within the cap + 2 s that §18.1 allows).
  let fallbackTimer: NodeJS.Timeout | undefined;
  const fallback = new Promise<"timeout">((resolve) => {
    fallbackTimer = setTimeout(() => resolve("timeout"), Math.max(0, deadline + STOPPED_WORK_WAIT_MS - now()));
  });
  const result = await Promise.race([run, fallback]).finally(() => {
    clearTimeout(cutTimer);
    clearTimeout(fallbackTimer);
  });
  if (result === "timeout") {
    run.catch(() => undefined);
    return { kind: "timeout", steps };
  }
  return { kind: "done", result };
}

/** Steps as the Execution orders them: the trigger first, then by startAt, ties by position in `nodes`. */
function ordered(steps: Step[], nodes: readonly { id: string }[]): Step[] {
  const position = new Map(nodes.map((n, i) => [n.id, i]));
  const rank = (s: Step) => position.get(s.id) ?? -1;
  return [...steps].sort((a, b) => (rank(a) === -1 ? -1 : rank(b) === -1 ? 1 : a.startAt - b.startAt || rank(a) - rank(b)));
}

/** §8.7 item 9 for simulate: a wallet the caller registered on any configured chain (hidden ones included). */
export async function isCallersWallet(owner: Address, address: Address): Promise<boolean> {
  const found = await Promise.all(useRuntime().config.chains.map((c) => Wallet.get(owner, c.chainId, address)));
  return found.some((w) => w !== undefined);
}

/** POST /workflows:estimateFees. */
export async function estimate(body: Record<string, unknown>): Promise<FeeEstimate> {
  const { definition } = validate(body, "estimateFees", useRuntime().now());
  return estimateFees({ definition, ...(definition.runner ? { runner: definition.runner as Address } : {}), owner: useOwner() });
}
