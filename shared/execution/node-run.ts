/**
 * `POST /nodes:run` (API.md §17.2): one node, alone, once, now, exactly as inside a workflow, storing nothing.
 *
 * The node is wrapped in a one-node definition (a manual trigger whose id and name collide with nothing sent,
 * one edge from it to the node) and goes through `:simulate`'s path: the §8.7 field rules of a simulation
 * (`settings.runner` required where a node sends a user operation, `inputVariables` keys), the caller's wallet
 * check, the engine in simulate mode (writes simulated, reads, HTTP and JavaScript really run, with the same SSRF
 * guard, sandbox budgets and execution budgets), the caller's user-scoped secrets redacted everywhere, and the cap
 * at `simulate_timeout_ms`. The answer is the node's step (§10.2 fields), whatever its outcome.
 *
 * Problems are reported at the request's own paths (`body.node…`, not the wrapper's `body.nodes[0]…`), and
 * every one of them as 400 `VALIDATION_FAILED` (a template naming the node itself is not an ancestor problem
 * here: there is no workflow).
 */
import * as v from "valibot";
import { ulid } from "ulid";
import type { Address } from "viem";
import { useCaller } from "../context";
import { ApiError, validationFailed, type FieldError } from "../errors";
import { fieldErrors } from "../http/validate";
import { validateDefinition } from "../workflow/definition";
import { kinds } from "../kinds/kinds";
import { SIMULATION_TIMED_OUT, isCallersWallet, runCapped } from "./simulate";
import { useRuntime } from "../current-runtime";
import type { Step } from "../engine/schemas";
import type { StepErrorCode } from "../kinds/kind";
import { nodeRunContext, type ExecutionContext } from "./execution-context";

/** The answer of §17.2. */
export interface NodeRunResult {
  success: boolean;
  error?: string;
  errorCode?: StepErrorCode;
  output: Record<string, unknown>;
  log?: string;
  inputs?: string[];
  startAt: number;
  endAt: number;
  /** API.md §21.3. */
  executionContext: ExecutionContext;
}

/** The members of the body, checked before the node is (unknown members, `node` missing). */
const Envelope = v.strictObject({
  node: v.unknown(),
  inputVariables: v.optional(v.unknown()),
  chainId: v.optional(v.unknown()),
});

/** Kinds a node run refuses: `await` waits for something that a run of one node cannot receive (§17.2). */
const NOT_RUNNABLE_ALONE = new Set(["await"]);

/** POST /nodes:run. */
export async function runNode(body: Record<string, unknown>): Promise<NodeRunResult> {
  const { config, now } = useRuntime();
  const { owner, audienceChainId } = useCaller();
  const startAt = now();

  const envelope = v.safeParse(Envelope, body, { abortEarly: false });
  if (!envelope.success) throw validationFailed(fieldErrors(envelope.issues, "body"));
  const node = body.node;
  const nodeType = isObject(node) ? node.type : undefined;
  if (typeof nodeType === "string" && NOT_RUNNABLE_ALONE.has(nodeType)) {
    throw validationFailed([{ path: "body.node.type", message: `${nodeType} nodes cannot run alone (they wait inside a workflow)` }]);
  }

  // The caller's default chain (§5): the JWT `aud` chain when configured, else `default_chain_id`.
  const defaultChainId = config.chains.some((c) => c.chainId === audienceChainId) ? audienceChainId : config.defaultChainId;
  const inputVariables = isObject(body.inputVariables) ? body.inputVariables : body.inputVariables === undefined ? {} : body.inputVariables;
  const trigger = wrapperTrigger(node, inputVariables);
  const wrapped = {
    chainId: body.chainId ?? defaultChainId,
    trigger,
    nodes: [node],
    edges: isObject(node) && typeof node.id === "string" ? [{ id: "_e0", source: trigger.id, target: node.id }] : [],
    inputVariables,
  };

  let validated: ReturnType<typeof validateDefinition<"simulate">>;
  try {
    validated = validateDefinition(wrapped, {
      mode: "simulate",
      now: startAt,
      limits: config.limits,
      chains: config.chains.map((c) => ({ chainId: c.chainId, blockTimeSeconds: c.blockTimeSeconds })),
      defaultChainId,
    });
  } catch (err) {
    throw err instanceof ApiError ? asRequestProblem(err) : err;
  }
  const { definition, graph } = validated;
  const runner = definition.runner as Address | undefined;
  if (runner && !(await isCallersWallet(owner, runner))) {
    throw new ApiError(400, "WALLET_NOT_OWNED", "settings.runner is not a wallet registered by the caller.", {
      errors: [{ path: "body.inputVariables.settings.runner", message: "is not one of the caller's registered wallets" }],
    });
  }

  const ran = definition.nodes[0]!;
  const executionContext = nodeRunContext(ran, definition.chainId);
  const outcome = await runCapped({
    definition,
    graph,
    runner,
    owner,
    workflowId: ulid(startAt),
    executionId: ulid(startAt),
    triggerOutput: { data: null, headers: {}, pathParams: {} },
    startAt,
  });
  const steps = outcome.kind === "done" ? outcome.result.steps : outcome.steps;
  const step = steps.find((s) => s.id === ran.id);
  if (step) return { ...fromStep(step), executionContext };
  // No step: the run was stopped before the node recorded one (work that hung past the cap, an engine failure).
  const cutOff = kinds.node(ran.type)?.cutOff;
  const timedOut = outcome.kind === "timeout" || outcome.result.error === SIMULATION_TIMED_OUT;
  return {
    success: false,
    error: timedOut ? SIMULATION_TIMED_OUT : (outcome.kind === "done" && outcome.result.error) || SIMULATION_TIMED_OUT,
    ...(timedOut && cutOff ? { errorCode: cutOff === "iterations" ? "ITERATION_FAILED" : cutOff } : {}),
    output: { data: null },
    startAt,
    endAt: now(),
    executionContext,
  };
}

function fromStep(step: Step): Omit<NodeRunResult, "executionContext"> {
  return {
    success: step.success,
    ...(step.error !== undefined ? { error: step.error } : {}),
    ...(step.errorCode !== undefined ? { errorCode: step.errorCode } : {}),
    output: step.output,
    ...(step.log !== undefined ? { log: step.log } : {}),
    ...(step.inputs !== undefined ? { inputs: step.inputs } : {}),
    startAt: step.startAt,
    endAt: step.endAt,
  };
}

/** A manual trigger whose id and name are neither the node's nor an `inputVariables` key. */
function wrapperTrigger(node: unknown, inputVariables: unknown) {
  const taken = new Set<string>();
  if (isObject(node)) for (const k of ["id", "name"] as const) if (typeof node[k] === "string") taken.add(node[k]);
  if (isObject(inputVariables)) for (const k of Object.keys(inputVariables)) taken.add(k);
  let suffix = 0;
  while (taken.has(`_run${suffix}`) || taken.has(`$run${suffix}`)) suffix++;
  return { id: `_run${suffix}`, name: `$run${suffix}`, type: "manual" as const, config: {} };
}

/** The wrapper's problems at the request's paths, every one a `VALIDATION_FAILED` but for unsupported chains. */
function asRequestProblem(err: ApiError): ApiError {
  const errors: FieldError[] = (err.extra.errors ?? []).map((e) => ({
    ...e,
    path: e.path.replace(/^body\.nodes\[0\]/, "body.node"),
    message: e.message.replace(/body\.nodes\[0\]/g, "body.node"),
  }));
  if (err.code === "UNSUPPORTED_CHAIN") return validationFailed(errors, "UNSUPPORTED_CHAIN");
  if (err.status === 400) return validationFailed(errors);
  return err;
}

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);
