/**
 * The one interface every node kind implements (API.md §8.4): given the node's stored config and the step's
 * environment, produce `X` (the step output's `data`) or fail with a step errorCode (§10.2).
 *
 * A kind renders its own config through the environment (which records the resolved paths for the step's
 * `inputs`), because kinds differ in what is templated: most render every string value, customCode and the
 * expressions of branch and filter substitute templates as text, filter and loop resolve `inputVariable` to
 * the value itself. Expected failures are thrown as StepFailure (or TemplateUnresolvedError, OutboundError,
 * which the engine maps to their codes); anything else is an internal failure of the engine.
 */
import type { Address } from "viem";
import type { StepErrorCode } from "../schemas";
import type { Config } from "../../config";
import type { Variables } from "../../templates";
import type { SandboxSession } from "../sandbox";
import type { RunInput, SendCalls } from "../types";

/** A failed step: its errorCode, message, and whatever output it produced (`data`, default null). */
export class StepFailure extends Error {
  constructor(
    readonly code: StepErrorCode,
    message: string,
    readonly data: unknown = null,
    readonly gas?: Gas,
  ) {
    super(message);
    this.name = "StepFailure";
  }
}

/** Gas of the user operations a step sent (loops: summed). */
export interface Gas {
  gasUsed: bigint;
  totalGasCost: bigint;
}

export interface NodeResult {
  data: unknown;
  log?: string;
  gas?: Gas;
}

export interface NodeEnv {
  /** The node id (for messages) and the chain it acts on (§5: its config.chainId, else the workflow chain). */
  nodeId: string;
  chainId: number;
  variables: Variables;
  /** Renders every string value of a config (contractAbi never), recording the paths. */
  render<T>(config: T): T;
  /** Template substitution as text in JavaScript (non-path `{{ … }}` left as it is). */
  renderText(text: string): string;
  /** filter/loop `inputVariable`: the resolved value itself. */
  resolveWhole(inputVariable: string): unknown;
  mode: RunInput["mode"];
  /** The run's wallet: context.smartWalletAddress, else settings.runner. */
  runner?: Address;
  /** Absent in simulate mode: writes are then simulated. */
  sendCalls?: SendCalls;
  limits: Config["limits"];
  /**
   * Counts `bytes` of data the step holds (a response body, a script's result, loop iterations) against the
   * execution state budget until the step ends (§18.2); throws StepFailure OUTPUT_TOO_LARGE past it.
   */
  holdState(bytes: number): void;
  /** Counts one outbound HTTP request against the execution's budget (§18.3); throws HTTP_BUDGET_EXCEEDED past it. */
  takeRequest(): void;
  /** The execution's JavaScript: its owner's fair share of the sandbox pool and its time budget (§18.1). */
  sandbox: SandboxSession;
  /** Aborted when the run is cut off (a simulation at its cap): work in flight stops, its reason is the error. */
  signal?: AbortSignal;
  allowPrivateNetwork: boolean;
  /** The environment of a loop iteration: these variables added, acting on `chainId`. */
  child(extra: Record<string, unknown>, chainId: number): NodeEnv;
  /** Runs another kind (a loop's runner) in `env`. */
  runKind(type: string, config: unknown, env: NodeEnv): Promise<NodeResult>;
}

export interface NodeKind<C = unknown> {
  run(config: C, env: NodeEnv): Promise<NodeResult>;
}
