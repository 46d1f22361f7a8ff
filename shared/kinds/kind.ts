/**
 * What a node kind and a trigger kind are (API.md §8.3, §8.4): one object per kind, in one file of ./nodes or
 * ./triggers, listed once in ./kinds.ts. Everything the service knows about a kind is declared there: its
 * config schema (valibot: request validation, the stored document's types and the OpenAPI document), the rules
 * across its fields, the JavaScript it runs (for the secrets a run decrypts), whether it writes on-chain, its
 * fee rule (API.md §9.6) and its runner. Validation (shared/workflow), the engine, fees, simulate and the
 * OpenAPI document iterate a Registry (./registry.ts) and never name a kind.
 *
 * The runner: given the node's stored config and the step's environment, it produces an outcome or fails with
 * a step errorCode (§10.2). A kind renders its own config through the environment (which records the resolved
 * paths for the step's `inputs`), because kinds differ in what is templated: most render every string value,
 * customCode and the expressions of branch and filter substitute templates as text, filter and loop resolve
 * `inputVariable` to the value itself. Expected failures are thrown as StepFailure (or
 * TemplateUnresolvedError, OutboundError, which the engine maps to their codes); anything else is an internal
 * failure of the engine.
 *
 * The outcome is designed for kinds that do not finish in one go: a NodeResult ends the step;
 * `{suspend: Suspension}` (the `await` node, API.md §17.1) keeps the node open: nothing downstream of it runs, the
 * engine hands the wait to its host (the runner records it on the execution), and the step is recorded by whatever
 * ends the wait (a signal, a chain event, its deadline: shared/execution/waits.ts), never by the kind.
 */
import type { Address } from "viem";
import type * as v from "valibot";
import type { Config } from "../config";
import type { Variables } from "../templates";
import type { SendCalls } from "../wallet/send";
import type { SandboxSession } from "../sandbox/session";
import type { DefinitionLimits } from "./support/schema-kit";
import type { AccountCall } from "../chain/userop-account";

/** Step `errorCode` values (API.md §10.2); never HTTP error codes. */
export const STEP_ERROR_CODES = [
  "TEMPLATE_UNRESOLVED",
  "INVALID_INPUT",
  "SANDBOX_ERROR",
  "SANDBOX_TIMEOUT",
  "SANDBOX_MEMORY",
  "HTTP_ERROR",
  "NETWORK_ERROR",
  "DESTINATION_NOT_ALLOWED",
  "RESPONSE_TOO_LARGE",
  "RPC_ERROR",
  "CALL_REVERTED",
  "INSUFFICIENT_BALANCE",
  "USEROP_REJECTED",
  "USEROP_REVERTED",
  "USEROP_TIMEOUT",
  "LOOP_LIMIT_EXCEEDED",
  "ITERATION_FAILED",
  // API.md §11.3: a run's on-chain step fails with this message when the runner is not provably the caller's.
  "WALLET_NOT_OWNED",
  // API.md §18.7: the execution's budgets.
  "OUTPUT_TOO_LARGE",
  "INVALID_RESPONSE",
  "HTTP_BUDGET_EXCEEDED",
  // API.md §17.1: an await node's wait ended by a reject signal, or by its deadline.
  "REJECTED",
  "AWAIT_TIMEOUT",
] as const;
export type StepErrorCode = (typeof STEP_ERROR_CODES)[number];

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

/** A finished step: its output's `data`, its log, the gas it spent. */
export interface NodeResult {
  data: unknown;
  log?: string;
  gas?: Gas;
}

/** What every wait carries: when it began, and when it ends by itself (how: its kind's handler decides). */
interface WaitTimes {
  /** TimeMs at which the wait began. */
  since: number;
  /** TimeMs at which the wait ends by itself: an await node's step then fails AWAIT_TIMEOUT, a timer's succeeds. */
  deadline: number;
}

/**
 * The waits a step can suspend on, by kind, with what each carries besides its times. Each kind has one handler
 * (shared/execution/wait-kinds.ts: how it is stored, shown, resolved and expired), checked to be there for every
 * kind; a new kind is one line here, one handler there, and the node that emits it.
 * - signal: who may signal besides the owner (API.md §17.1);
 * - chainEvent: the chain, the event queries (API.md §8.3.5) whose first matching log ends the wait, and the head
 *   when it began;
 * - timer: nothing; it ends, successfully, at its deadline (internal: no node of the API emits it yet).
 */
interface WaitKinds {
  signal: { prompt?: string; approvers: string[] };
  chainEvent: { prompt?: string; chainId: number; query: unknown[]; afterBlock: number };
  timer: Record<never, never>;
}

export type WaitKind = keyof WaitKinds;

/** A wait of kind `K` (of any kind in `K`, a union of kinds). */
export type WaitOf<K extends WaitKind> = { [P in K]: { kind: P } & WaitTimes & WaitKinds[P] }[K];

/**
 * A step that waits (API.md §17.1.2): nothing downstream of the node runs until the wait ends (a signal, a chain
 * event, or `deadline`), which records the node's step.
 */
export type Suspension = WaitOf<WaitKind>;

/** A runner's answer when its step waits instead of finishing. */
export interface Suspend {
  suspend: Suspension;
}

/** What a runner answers: the step's result (it is done), or a suspension (see the module header). */
export type NodeOutcome = NodeResult | Suspend;

export const isSuspend = (outcome: NodeOutcome): outcome is Suspend => "suspend" in outcome;

export interface NodeEnv {
  /** The node id (for messages) and the chain it acts on (§5: its config.chainId, else the workflow chain). */
  nodeId: string;
  chainId: number;
  variables: Variables;
  /** Renders every string value of a config (contractAbi never), recording the paths. */
  render<T>(config: T): T;
  /**
   * Template substitution as text in JavaScript (non-path `{{ … }}` left as it is). With `maxBytes`, a result
   * that would be longer throws RenderedTooLargeError as soon as it passes that size.
   */
  renderText(text: string, options?: { maxBytes?: number }): string;
  /** filter/loop `inputVariable`: the resolved value itself. */
  resolveWhole(inputVariable: string): unknown;
  mode: "run" | "simulate";
  /** The service clock (TimeMs). */
  now(): number;
  /** The owner the run acts for (a simulation's caller). */
  caller?: Address;
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
  /** The environment of a loop iteration: these variables added, acting on `chainId`; `iteration` keys its sends. */
  child(extra: Record<string, unknown>, chainId: number, iteration?: number): NodeEnv;
  /** Runs another kind (a loop's runner) in `env`. */
  runKind(type: string, config: unknown, env: NodeEnv): Promise<NodeOutcome>;
  /** Whether a kind of the run's registry writes on-chain (a loop runs such runners one at a time). */
  writesOnChain(type: string): boolean;
}

// ---------------------------------------------------------------------------------------------------------
// Declarations

/** What a config schema is built from: the deployment's limits, and (for the loop) the runner variant. */
export interface SchemaContext {
  limits: DefinitionLimits;
  /** `{type, config, id?, name?}` of every kind that may run inside a loop (`inLoop`). */
  loopRunner: v.GenericSchema;
  /** The types of those kinds, in registry order. */
  loopRunnerTypes: readonly string[];
}

/** Reports one problem at `path` (below `body.`). */
export type Add = (path: string, message: string) => void;
export type Raw = Record<string, unknown>;

/** What the cross-field rules of a config may ask of the registry (a loop checks its runner's rules). */
export interface RuleContext {
  /** The names of the trigger and the nodes. */
  names: ReadonlySet<string>;
  nodeProblems(type: string, config: Raw, at: string, add: Add): void;
}

/** A write's fee rule (API.md §9.6): the gas it spends, estimated from its calls when they are literal. */
export interface WriteCost {
  /** Gas units when estimation is impossible. */
  fallbackGas: bigint;
  /** The calls from the runner's account, or undefined when an input is templated (then `fallbackGas`). */
  calls: AccountCall[] | undefined;
  /** The config whose `chainId` (else the workflow's) the write acts on. */
  chainConfig: unknown;
}

/** What a kind's hooks may ask of the other kinds of the registry (a loop delegates to its runner). */
export interface KindLookup {
  node(type: string): AnyNodeKind | undefined;
}

/**
 * What the request schemas and the OpenAPI document need of a node kind: its type, doc and config schema. It
 * is declared apart from the rest (`defineNode(shape, behaviour)`) so that a function that only validates
 * shapes (the catch-all serving the API document) bundles none of the runners' code (the chain client, HTTP).
 */
export interface NodeShape<T extends string = string, C = unknown> {
  type: T;
  /** One line on what the kind does (API.md §8.4), for the reader and the OpenAPI document. */
  doc: string;
  /** The config schema for the given limits. */
  config(ctx: SchemaContext): v.GenericSchema<unknown, C>;
  /** Acts on a chain, so `chainId` may be set (API.md §5). */
  chainAware?: boolean;
  /** May be a loop's runner (API.md §8.4.9). */
  inLoop?: boolean;
  /**
   * Sends user operations from the runner wallet (`settings.runner` is then required by `:simulate`, and the
   * value fee applies); a kind that holds another (the loop) answers from its raw config.
   */
  writesOnChain: boolean | ((config: Raw, kinds: ShapeLookup) => boolean);
  /** Its runs may wait (API.md §17.1): deleting the workflow then ends its waiting executions. */
  waits?: boolean;
  /** At most this many nodes of the kind per workflow (API.md §17.5: 10 `await` nodes). */
  maxPerWorkflow?: number;
  /** Chain ids inside the config besides its own `chainId` (checked as configured, §8.7 item 5), by path below the config. */
  nestedChainIds?(config: Raw): { path: string; chainId: unknown }[];
}

/** What a shape's `writesOnChain` may ask of the other shapes (a loop asks its runner's). */
export interface ShapeLookup {
  node(type: string): AnyNodeShape | undefined;
}

/** Everything else about a node kind: its rules, fee and runner. */
export interface NodeBehaviour<C = unknown> {
  /** Rules across fields, on the raw config (found even when some shapes are wrong); paths below `body.`. */
  problems?(config: Raw, at: string, add: Add, ctx: RuleContext): void;
  /** After validation: what the stored document fills in (defaults that depend on other fields). */
  normalise?(config: C, kinds: KindLookup): C;
  /** JavaScript texts it runs (variables are globals there, so `secrets.X` in them is a reference). */
  javaScript?(config: C, kinds: KindLookup): string[];
  /** Branching kinds: the ids of the conditions edges leave from (`<nodeId>.<conditionId>`, §8.5). */
  conditions?(config: C): string[];
  /** Branching kinds: the condition a step output chose, or null. */
  chosen?(data: unknown, nodeId: string): string | null;
  /** The config whose chain a step's gas is counted on (a loop: its runner's); default the node's own. */
  costChainConfig?(config: C): unknown;
  /** A writing kind: the gas units its write is counted at when the estimate is impossible (API.md §9.6). */
  fallbackGas?: bigint;
  /** The fee rule when the step sends a user operation (undefined: it sends none this time). */
  fee?(config: C, kinds: KindLookup): WriteCost | undefined;
  /** The errorCode of a step stopped by a cut-off (§18.1); "iterations": it stops through its runner's. */
  cutOff: StepErrorCode | "iterations";
  run(config: C, env: NodeEnv): Promise<NodeOutcome>;
}

export interface NodeKind<T extends string = string, C = unknown> extends NodeShape<T, C>, NodeBehaviour<C> {
  /** The shape it was defined from (the registry checks it is the one listed in ./shapes.ts). */
  shape: NodeShape<T, C>;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyNodeShape = NodeShape<string, any>;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyNodeKind = NodeKind<string, any>;

/** The window a create checks a trigger against (§8.7 item 4). */
interface CreateWindow {
  now: number;
  startAt?: number;
  expiredAt?: number;
}

export interface TriggerShape<T extends string = string, C = unknown> {
  type: T;
  /** One line on when it fires and what its step output (`<triggerName>.data`, API.md §8.3.6) carries. */
  doc: string;
  config(ctx: SchemaContext): v.GenericSchema<unknown, C>;
  chainAware?: boolean;
}

export interface TriggerBehaviour {
  problems?(config: Raw, at: string, add: Add): void;
  /** Rules a create adds (the trigger must be able to fire inside the workflow's window). */
  createProblems?(config: Raw, window: CreateWindow, at: string, add: Add): void;
}

export interface TriggerKind<T extends string = string, C = unknown> extends TriggerShape<T, C>, TriggerBehaviour {
  shape: TriggerShape<T, C>;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyTriggerShape = TriggerShape<string, any>;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyTriggerKind = TriggerKind<string, any>;

// The declarations are pure (identity and a spread), marked so for the bundler: a module that imports a kind's
// shape only drops the unused kind and everything its hooks import.

/** Declares a node kind's shape (identity; keeps the literal type). */
/* @__NO_SIDE_EFFECTS__ */
export function nodeShape<const T extends string, C>(shape: NodeShape<T, C>): NodeShape<T, C> {
  return shape;
}
/** Declares a node kind: its shape and its behaviour (the hooks are checked against the config type). */
/* @__NO_SIDE_EFFECTS__ */
export function defineNode<const T extends string, C>(shape: NodeShape<T, C>, behaviour: NodeBehaviour<C>): NodeKind<T, C> {
  return { ...shape, ...behaviour, shape };
}
/* @__NO_SIDE_EFFECTS__ */
export function triggerShape<const T extends string, C>(shape: TriggerShape<T, C>): TriggerShape<T, C> {
  return shape;
}
/* @__NO_SIDE_EFFECTS__ */
export function defineTrigger<const T extends string, C>(shape: TriggerShape<T, C>, behaviour: TriggerBehaviour = {}): TriggerKind<T, C> {
  return { ...shape, ...behaviour, shape };
}
