/**
 * The engine's interface: what a run needs (RunInput), what it answers (RunResult), and the ports through
 * which it reaches what it does not own: sending user operations from the runner wallet (SendCalls) and
 * secrets. Shared by triggered runs (shared/execution/runner.ts), `:simulate` and `:estimateFees`.
 */
import type { Address } from "viem";
import type { Cost, ExecutionStatus, Step } from "./schemas";
import type { Edge } from "../workflow/schemas";
import type { CompiledGraph } from "../workflow/graph";
import type { Registry } from "../kinds/registry";
import type { Suspension } from "../kinds/kind";

/** The sending port: declared by the sender's module (shared/wallet/send.ts), which the engine sits above. */
import type { SendCalls } from "../wallet/send";
import type { Trigger, Node } from "../kinds/shapes";

/** The normalised definition a run executes (from shared/workflow/definition.ts). */
export interface RunDefinition {
  chainId: number;
  trigger: Trigger;
  nodes: Node[];
  edges: Edge[];
  inputVariables: Record<string, unknown>;
}

export interface RunInput {
  mode: "run" | "simulate";
  /** The kinds the definition uses; default the service's (shared/kinds). */
  kinds?: Registry;
  definition: RunDefinition;
  graph: CompiledGraph;
  /** `context` of API.md §8.6. */
  context: {
    workflowId: string;
    executionId: string;
    executionIndex: number;
    owner: Address;
    smartWalletAddress?: Address;
    chainId: number;
  };
  /** The trigger step's `output` (API.md §8.3.6), already built by the caller. */
  triggerOutput: Record<string, unknown>;
  /** `triggerInput` of `:trigger`, merged over inputVariables (top-level keys replaced). */
  triggerInput?: Record<string, unknown>;
  /** Run start (the execution's startAt): the trigger step's startAt and endAt. */
  startAt: number;
  /** Resolves the named secrets (workflow scope over user scope); only names the definition references. */
  secrets: (names: string[]) => Promise<Record<string, string>>;
  /** Sends user operations from the runner (absent in simulate mode: writes are then simulated with eth_call). */
  sendCalls?: SendCalls;
  /**
   * Called as each step finishes (the trigger step first), with secrets already redacted. `final`: no other node of
   * the run is running or still to be decided, so no step comes after this one (the runner may write it with the end).
   */
  onStep?: (step: Step, info: { final: boolean }) => Promise<void> | void;
  /** Checked before each node starts: true stops the run with status `error` and `stopReason` as its error. */
  shouldStop?: () => Promise<boolean>;
  stopReason?: string;
  /** Absolute time (ms) after which no node starts; the run ends `error` with `deadlineReason`. */
  deadline?: number;
  deadlineReason?: string;
  /**
   * Cuts the run off (a simulation at its cap, API.md §18.1): no node starts after it, and work in flight is
   * stopped (scripts interrupted, requests aborted); each step it stopped fails with its kind's cut-off code
   * and the signal's reason as its error, and the run ends `error` with `deadlineReason`.
   */
  signal?: AbortSignal;
  /** Where waits go (API.md §17.1): absent, a node that waits is an internal failure (nothing could end it). */
  waits?: WaitHost;
  /** A run resumed after waits: what its earlier passes left, and the waits that have ended since. */
  resume?: { snapshot: RunSnapshot; ended: EndedWait[] };
}

/**
 * What the run's host does with waits (the runner, shared/execution/runner.ts): it records each wait as it begins,
 * and when no node is running while waits are open it either suspends the run (its snapshot persisted, the
 * execution `waiting`) or hands back the waits that ended meanwhile, whose steps are already recorded.
 */
export interface WaitHost {
  begin(nodeId: string, wait: Suspension, inputs: string[]): Promise<void>;
  quiet(snapshot: RunSnapshot): Promise<{ suspended: true } | { ended: EndedWait[] } | { stopped: string }>;
}

/** A wait that ended: the await node's recorded step. */
export interface EndedWait {
  nodeId: string;
  success: boolean;
  /** The step's output (`{data}`). */
  output: Record<string, unknown>;
  startAt: number;
}

/** The engine's state between passes of a run that waits: JSON, persisted by the host (sealed: outputs may hold secrets). */
export interface RunSnapshot {
  /** The run's trigger output and triggerInput (a block trigger's is read at run time: kept as it was read). */
  trigger: { output: Record<string, unknown>; input?: Record<string, unknown> };
  /** How every decided node ended. */
  settled: Record<string, "succeeded" | "failed" | "skipped">;
  /** Branch choices. */
  choices: Record<string, string | null>;
  /** The full output JSON of every node that ran (not truncated: later templates read it as it was). */
  outputs: Record<string, string>;
  /** Nodes whose waits are open. */
  open: string[];
  /** Node steps so far (their name, start and success), for the run's final status. */
  steps: { id: string; name: string; startAt: number; success: boolean }[];
  /** The execution's budgets as used so far (API.md §18). */
  spent: { keptBytes: number; requests: number; sandboxMs: number };
}

export interface RunResult {
  /** `waiting`: the run suspended with waits open (a later pass goes on). */
  status: Exclude<ExecutionStatus, "pending">;
  error?: string;
  /** Trigger step first, then node steps ordered by startAt (ties by position in `nodes`); redacted. */
  steps: Step[];
  /** One `gas` element per step that sent a user operation (API.md §9.6). */
  cogs: Cost[];
  endAt: number;
}
