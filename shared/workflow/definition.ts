/**
 * Validating a workflow definition (API.md §8.7) for create, simulate and estimateFees, and normalising it into
 * what is stored and run: defaults filled in, the chain edges generated, the trigger id assigned, `settings`
 * written, addresses in EIP-55 form, plus the compiled graph for the engine.
 *
 * Pure: no I/O, no chain code, no global config; the route passes `now`, the limits and the chains.
 *
 * Items of §8.7 and where they are checked:
 *   1-4  shapes (schemas.ts) and the rules across fields (below): one 400 VALIDATION_FAILED listing every problem
 *   5    non-zero chain ids are configured: 400 UNSUPPORTED_CHAIN
 *   6    graph rules (graph.ts): 400 WORKFLOW_GRAPH_INVALID
 *   7    (create) frequency floors of cron and block triggers: 400 TRIGGER_TOO_FREQUENT
 *   8-10 need I/O and belong to the route, after `validateDefinition` returns, in this order:
 *        8  (create) the stored document (canonical JSON, UTF-8) is at most `max_workflow_bytes` → 413 PAYLOAD_TOO_LARGE
 *        9  (create) `smartWalletAddress` is a wallet the caller registered, else 400 WALLET_NOT_OWNED
 *           (simulate: the same check on `definition.runner` when set)
 *        10 (create) the caller's active workflows are under the cap → 429 WORKFLOWS_LIMIT_REACHED
 */
import * as v from "valibot";
import { Cron } from "croner";
import { ulid } from "ulid";
import { validationFailed, type FieldError } from "../errors";
import { fieldErrors } from "../http/validate";
import { checkGraph, chainEdges, compileGraph, type CompiledGraph } from "./graph";
import { cronMinimumGap, firstGapBelow } from "./cron-gap";
import {
  AddressString,
  CHAIN_AWARE_TYPES,
  CRONER_OPTIONS,
  WRITE_NODE_TYPES,
  workflowSchemas,
  type DefinitionLimits,
  type Edge,
  type Node,
  type Trigger,
} from "./schemas";

export type Mode = "create" | "simulate" | "estimateFees";

/** A configured chain: its id and, optionally, its block time (API.md §5 table otherwise). */
export interface ChainInfo {
  chainId: number;
  blockTimeSeconds?: number;
}

export interface ValidateOptions<M extends Mode> {
  mode: M;
  /** The server's clock, ms. */
  now: number;
  limits: DefinitionLimits;
  chains: readonly ChainInfo[];
  defaultChainId: number;
  /** Id for a trigger sent without one; default a ULID of `now`. */
  newId?: () => string;
}

export type Settings = Record<string, unknown> & { runner?: string; chainId: number };

/** What create, simulate and estimateFees share once validated. */
export interface Definition {
  /** The workflow chain: body `chainId` (non-zero), else `default_chain_id`. */
  chainId: number;
  trigger: Trigger & { id: string };
  nodes: Node[];
  /** As sent, or the generated chain `_e0`, `_e1`, … when omitted or `[]`. */
  edges: Edge[];
  /** As sent, plus `settings.runner` (when there is a runner) and `settings.chainId`. */
  inputVariables: Record<string, unknown> & { settings: Settings };
}
export interface CreateDefinition extends Definition {
  name?: string;
  smartWalletAddress: string;
  startAt?: number;
  expiredAt?: number;
  maxExecution: number;
}
export interface SimulateDefinition extends Definition {
  /** `inputVariables.settings.runner` (EIP-55) when set; the route checks it is the caller's (item 9). */
  runner?: string;
  triggerOutput?: Record<string, unknown>;
}
export interface EstimateFeesDefinition extends Definition {
  /** Body `runner`, else `inputVariables.settings.runner`; any address. */
  runner?: string;
  createdAt: number;
  expireAt: number;
  maxExecution: number;
}
export type DefinitionFor<M extends Mode> = M extends "create"
  ? CreateDefinition
  : M extends "simulate"
    ? SimulateDefinition
    : EstimateFeesDefinition;

export interface ValidatedDefinition<M extends Mode> {
  definition: DefinitionFor<M>;
  graph: CompiledGraph;
}

/**
 * §8.7 items 1-7 in order; throws ApiError (400 VALIDATION_FAILED, UNSUPPORTED_CHAIN, WORKFLOW_GRAPH_INVALID,
 * TRIGGER_TOO_FREQUENT) with FieldErrors whose paths start with `body.`. `input` is the parsed JSON body; an
 * optional member sent as `null` counts as absent at every level (API.md §1.3), so the HTTP layer's dropping of
 * top-level nulls is not needed here.
 */
export function validateDefinition<M extends Mode>(input: unknown, options: ValidateOptions<M>): ValidatedDefinition<M> {
  const { mode, limits } = options;
  const schemas = workflowSchemas(limits);
  const schema = mode === "create" ? schemas.CreateBody : mode === "simulate" ? schemas.SimulateBody : schemas.EstimateFeesBody;

  // Items 1-4: every problem together.
  const parsed = v.safeParse(schema, input, { abortEarly: false });
  const errors: FieldError[] = parsed.success ? [] : fieldErrors(parsed.issues, "body");
  errors.push(...crossFieldProblems(input, options));
  if (errors.length || !parsed.success) throw validationFailed(dedupe(errors));

  const body = parsed.output as Record<string, unknown>;
  const definition = normalise(body, options);

  // Item 5.
  const chainProblems = unsupportedChains(definition, options.chains);
  if (chainProblems.length) throw validationFailed(chainProblems, "UNSUPPORTED_CHAIN");

  // Item 6.
  const graphProblems = graphRules(definition, body.edges as Edge[] | undefined);
  if (graphProblems.length) throw validationFailed(graphProblems, "WORKFLOW_GRAPH_INVALID");
  const graph = compileGraph(definition);

  // Item 7.
  if (mode === "create") {
    const floor = frequencyProblems(definition, options);
    if (floor.length) throw validationFailed(floor, "TRIGGER_TOO_FREQUENT");
  }
  return { definition: definition as DefinitionFor<M>, graph };
}

function dedupe(errors: FieldError[]): FieldError[] {
  const seen = new Set<string>();
  return errors.filter((e) => {
    const key = `${e.path}\u0000${e.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

// ---------------------------------------------------------------------------------------------------------
// Normalising (after items 1-4 passed)

function normalise(body: Record<string, unknown>, options: ValidateOptions<Mode>): Definition {
  const chainId = (body.chainId as number | undefined) || options.defaultChainId;
  const trigger = body.trigger as Trigger;
  const withId = { id: trigger.id ?? options.newId?.() ?? ulid(options.now), ...trigger } as Trigger & { id: string };
  const nodes = (body.nodes as Node[]).map(normaliseNode);
  const sentEdges = body.edges as Edge[] | undefined;
  // With a branch node the generated chain is refused by the graph rules (item 6), which see that edges were omitted.
  const edges = sentEdges?.length ? sentEdges : chainEdges(withId.id, nodes);

  const inputVariables = { ...((body.inputVariables as Record<string, unknown> | undefined) ?? {}) };
  const sent = (inputVariables.settings as Record<string, unknown> | undefined) ?? {};
  let runner: string | undefined;
  if (options.mode === "create") runner = body.smartWalletAddress as string;
  else if (options.mode === "estimateFees") runner = (body.runner as string | undefined) ?? address(sent.runner);
  else runner = address(sent.runner);
  const settings: Settings = { ...sent, ...(runner ? { runner } : {}), chainId };
  inputVariables.settings = settings;

  const common: Definition = { chainId, trigger: withId, nodes, edges, inputVariables: inputVariables as Definition["inputVariables"] };
  if (options.mode === "create") {
    const out: CreateDefinition = {
      ...(body.name !== undefined ? { name: body.name as string } : {}),
      smartWalletAddress: body.smartWalletAddress as string,
      ...common,
      ...(body.startAt !== undefined ? { startAt: body.startAt as number } : {}),
      ...(body.expiredAt !== undefined ? { expiredAt: body.expiredAt as number } : {}),
      maxExecution: body.maxExecution as number,
    };
    return out;
  }
  if (options.mode === "simulate") {
    const out: SimulateDefinition = {
      ...common,
      ...(runner ? { runner } : {}),
      ...(body.triggerOutput !== undefined ? { triggerOutput: triggerOutput(body.triggerOutput, trigger, options.limits) } : {}),
    };
    return out;
  }
  const out: EstimateFeesDefinition = {
    ...common,
    ...(runner ? { runner } : {}),
    createdAt: body.createdAt as number,
    expireAt: body.expireAt as number,
    maxExecution: body.maxExecution as number,
  };
  return out;
}

const address = (value: unknown): string | undefined => {
  const r = v.safeParse(AddressString, value);
  return r.success ? r.output : undefined;
};

function triggerOutput(value: unknown, trigger: Trigger, limits: DefinitionLimits): Record<string, unknown> {
  if (trigger.type !== "manual") return value as Record<string, unknown>;
  return v.parse(workflowSchemas(limits).ManualTriggerOutput, value) as Record<string, unknown>;
}

function normaliseNode(node: Node): Node {
  if (node.type === "loop") {
    const runner = node.config.runner;
    return { ...node, config: { ...node.config, runner: { ...runner, config: normaliseConfig(runner.type, runner.config) } } } as Node;
  }
  return { ...node, config: normaliseConfig(node.type, node.config) } as Node;
}

function normaliseConfig<C>(type: string, config: C): C {
  const c = config as Record<string, unknown>;
  if (type === "contractWrite" && c.value === undefined) {
    const calls = c.methodCalls as unknown[] | undefined;
    if (c.callData !== undefined || calls?.length === 1) return { ...c, value: "0" } as C;
  }
  if (type === "branch") {
    const conditions = c.conditions as { type?: string; expression: string }[];
    return { ...c, conditions: conditions.map((cond, i) => ({ ...cond, type: cond.type ?? inferConditionType(i, conditions.length, cond.expression) })) } as C;
  }
  return config;
}

/** §8.4.7: `if` for the first, `else` for a last one with an empty expression, `elseIf` otherwise. */
export function inferConditionType(index: number, count: number, expression: unknown): "if" | "elseIf" | "else" {
  if (index === 0) return "if";
  if (index === count - 1 && typeof expression === "string" && expression.trim() === "") return "else";
  return "elseIf";
}

// ---------------------------------------------------------------------------------------------------------
// Items 1-4: rules across fields, on the raw body (so they are found even when some shapes are wrong)

type Raw = Record<string, unknown>;
const isObject = (x: unknown): x is Raw => typeof x === "object" && x !== null && !Array.isArray(x);
const present = (x: unknown) => x !== undefined && x !== null;
const arrayOf = (x: unknown): unknown[] => (Array.isArray(x) ? x : []);
const text = (x: unknown): string | undefined => (typeof x === "string" ? x : undefined);

function crossFieldProblems(input: unknown, options: ValidateOptions<Mode>): FieldError[] {
  if (!isObject(input)) return [];
  const out: FieldError[] = [];
  const add = (path: string, message: string) => out.push({ path: `body.${path}`, message });
  const trigger = isObject(input.trigger) ? input.trigger : undefined;
  const nodes = arrayOf(input.nodes);

  // Item 2: ids and names unique across the trigger and the nodes; edge ids unique among edges.
  const parts: { path: string; part: Raw }[] = [
    ...(trigger ? [{ path: "trigger", part: trigger }] : []),
    ...nodes.flatMap((n, i) => (isObject(n) ? [{ path: `nodes[${i}]`, part: n }] : [])),
  ];
  for (const member of ["id", "name"] as const) {
    const first = new Map<string, string>();
    for (const { path, part } of parts) {
      const value = text(part[member]);
      if (value === undefined) continue;
      const earlier = first.get(value);
      if (earlier !== undefined) add(`${path}.${member}`, `must be unique among the trigger and node ${member}s (${earlier}.${member} is also ${value})`);
      else first.set(value, `body.${path}`);
    }
  }
  const edgeIds = new Map<string, number>();
  arrayOf(input.edges).forEach((edge, i) => {
    const id = isObject(edge) ? text(edge.id) : undefined;
    if (id === undefined) return;
    if (edgeIds.has(id)) add(`edges[${i}].id`, `must be unique among edge ids (body.edges[${edgeIds.get(id)}].id is also ${id})`);
    else edgeIds.set(id, i);
  });
  const names = new Set(parts.map(({ part }) => text(part.name)).filter((n): n is string => n !== undefined));

  // Trigger and node configs.
  if (trigger && isObject(trigger.config)) triggerConfigProblems(String(trigger.type), trigger.config, "trigger.config", add);
  nodes.forEach((node, i) => {
    if (!isObject(node) || !isObject(node.config)) return;
    nodeConfigProblems(String(node.type), node.config, `nodes[${i}].config`, add);
    if (node.type === "loop") {
      const iterVar = text(node.config.iterVar);
      if (iterVar !== undefined && names.has(iterVar)) add(`nodes[${i}].config.iterVar`, "must not equal a trigger or node name");
      const runner = node.config.runner;
      if (isObject(runner) && isObject(runner.config)) nodeConfigProblems(String(runner.type), runner.config, `nodes[${i}].config.runner.config`, add);
    }
  });

  // Item 3: inputVariables and settings.
  const inputVariables = input.inputVariables;
  if (isObject(inputVariables)) {
    for (const key of Object.keys(inputVariables)) {
      if (names.has(key)) add(`inputVariables.${key}`, "must not equal a trigger or node name");
    }
    settingsProblems(inputVariables.settings, input, options, nodes, add);
  }

  // Item 4 (create), and the body rules of the other endpoints.
  if (options.mode === "create") {
    const startAt = typeof input.startAt === "number" ? input.startAt : undefined;
    const expiredAt = typeof input.expiredAt === "number" ? input.expiredAt : undefined;
    if (expiredAt !== undefined && expiredAt <= options.now) add("expiredAt", "must be after now");
    else if (expiredAt !== undefined && startAt !== undefined && expiredAt <= startAt) add("expiredAt", "must be after startAt");
    if (trigger?.type === "fixedTime" && isObject(trigger.config) && Array.isArray(trigger.config.epochs)) {
      const epochs = trigger.config.epochs.filter((e): e is number => typeof e === "number");
      const inside = epochs.some((e) => e > options.now && (startAt === undefined || e >= startAt) && (expiredAt === undefined || e < expiredAt));
      if (epochs.length === trigger.config.epochs.length && epochs.length > 0 && !inside) {
        add("trigger.config.epochs", "must include an epoch after now and inside [startAt, expiredAt)");
      }
    }
  }
  if (options.mode === "estimateFees" && typeof input.createdAt === "number" && typeof input.expireAt === "number") {
    if (input.expireAt <= input.createdAt) add("expireAt", "must be after createdAt");
  }
  if (options.mode === "simulate" && trigger?.type === "manual" && isObject(input.triggerOutput)) {
    const r = v.safeParse(workflowSchemas(options.limits).ManualTriggerOutput, input.triggerOutput, { abortEarly: false });
    if (!r.success) out.push(...fieldErrors(r.issues, "body").map((e) => ({ ...e, path: e.path.replace(/^body/, "body.triggerOutput") })));
  }
  return out;
}

type Add = (path: string, message: string) => void;

function settingsProblems(settings: unknown, input: Raw, options: ValidateOptions<Mode>, nodes: unknown[], add: Add) {
  if (present(settings) && !isObject(settings)) {
    add("inputVariables.settings", "must be an object");
    return;
  }
  const s = isObject(settings) ? settings : {};
  if (present(s.runner)) {
    const runner = address(s.runner);
    if (!runner) add("inputVariables.settings.runner", "must be an address");
    else if (options.mode === "create") {
      const wallet = address(input.smartWalletAddress);
      if (wallet && wallet !== runner) add("inputVariables.settings.runner", "must equal smartWalletAddress");
    }
  } else if (options.mode === "simulate" && nodes.some(sendsUserOperation)) {
    add("inputVariables.settings.runner", "is required when a node sends a user operation (ethTransfer, contractWrite, or a loop of them)");
  }
  if (present(s.chainId)) {
    const sentChain = typeof input.chainId === "number" ? input.chainId : 0;
    const workflowChain = sentChain || options.defaultChainId;
    if (s.chainId !== workflowChain) add("inputVariables.settings.chainId", `must equal the workflow chain (${workflowChain})`);
  }
}

/** ethTransfer, contractWrite, or a loop whose runner is one of them. */
export function sendsUserOperation(node: unknown): boolean {
  if (!isObject(node)) return false;
  if (WRITE_NODE_TYPES.includes(String(node.type))) return true;
  const runner = isObject(node.config) ? node.config.runner : undefined;
  return node.type === "loop" && isObject(runner) && WRITE_NODE_TYPES.includes(String(runner.type));
}

function triggerConfigProblems(type: string, config: Raw, at: string, add: Add) {
  if (type === "manual" && config.lang === "javascript" && present(config.data) && typeof config.data !== "string") {
    add(`${at}.data`, "must be a string (the source text) when lang is javascript");
  }
  if (type === "event") {
    arrayOf(config.queries).forEach((query, q) => {
      if (isObject(query)) eventQueryProblems(query, `${at}.queries[${q}]`, add);
    });
  }
}

function eventQueryProblems(query: Raw, at: string, add: Add) {
  const addresses = arrayOf(query.addresses);
  const topic0 = arrayOf(query.topics)[0];
  if (addresses.length === 0 && (topic0 === undefined || topic0 === null || topic0 === "")) {
    add(at, "must set at least one address or a non-null topics[0]");
  }
  const conditions = arrayOf(query.conditions);
  const abi = Array.isArray(query.contractAbi) ? query.contractAbi : undefined;
  if (conditions.length > 0 && !abi) add(`${at}.contractAbi`, "is required when conditions are set");
  if (abi) {
    conditions.forEach((condition, c) => {
      if (!isObject(condition) || typeof condition.fieldName !== "string") return;
      const argument = eventArgument(abi, condition.fieldName);
      if (!argument) {
        add(`${at}.conditions[${c}].fieldName`, `names no event argument in contractAbi: ${condition.fieldName}`);
        return;
      }
      const type = text(condition.fieldType) ?? argument.type;
      if (type === "address" && typeof condition.operator === "string" && !["eq", "ne"].includes(condition.operator)) {
        add(`${at}.conditions[${c}].operator`, "must be eq or ne for an address");
      }
    });
  }
  methodCallProblems(arrayOf(query.methodCalls), abi, `${at}.methodCalls`, add);
}

function nodeConfigProblems(type: string, config: Raw, at: string, add: Add) {
  switch (type) {
    case "contractWrite": {
      const calls = Array.isArray(config.methodCalls) ? config.methodCalls : undefined;
      if (present(config.callData) && calls) add(`${at}.methodCalls`, "must be absent when callData is given (one or the other)");
      if (!present(config.callData) && !calls) add(at, "must set callData or methodCalls");
      const abi = Array.isArray(config.contractAbi) ? config.contractAbi : undefined;
      if (!abi && calls?.some((call) => isObject(call) && !present(call.callData))) {
        add(`${at}.contractAbi`, "is required when a method call has no callData");
      }
      if (present(config.value) && calls && calls.length > 1) add(`${at}.value`, "is allowed only with callData or a single method call");
      methodCallProblems(calls ?? [], abi, `${at}.methodCalls`, add);
      break;
    }
    case "contractRead":
      methodCallProblems(arrayOf(config.methodCalls), Array.isArray(config.contractAbi) ? config.contractAbi : undefined, `${at}.methodCalls`, add);
      break;
    case "restApi": {
      const method = text(config.method)?.toUpperCase();
      if (present(config.body) && (method === "GET" || method === "HEAD")) add(`${at}.body`, `is not allowed with ${method}`);
      break;
    }
    case "branch":
      branchProblems(arrayOf(config.conditions), `${at}.conditions`, add);
      break;
    case "balance": {
      const chain = text(config.chain);
      const chainId = typeof config.chainId === "number" ? config.chainId : 0;
      if (chain !== undefined && /^[0-9]+$/.test(chain) && Number(chain) !== 0 && chainId !== 0 && Number(chain) !== chainId) {
        add(`${at}.chain`, "must agree with chainId");
      }
      break;
    }
  }
}

/** §8.4.7: the first is `if`; `if` only first; `else` at most once, last, with an empty expression; ids unique. */
function branchProblems(conditions: unknown[], at: string, add: Add) {
  const ids = new Map<string, number>();
  conditions.forEach((condition, i) => {
    if (!isObject(condition)) return;
    const id = text(condition.id);
    if (id !== undefined) {
      if (ids.has(id)) add(`${at}[${i}].id`, `must be unique within the branch (body.${at}[${ids.get(id)}].id is also ${id})`);
      else ids.set(id, i);
    }
    if (present(condition.type) && !["if", "elseIf", "else"].includes(condition.type as string)) return; // a shape error already
    const type = text(condition.type) ?? inferConditionType(i, conditions.length, condition.expression);
    const empty = typeof condition.expression === "string" && condition.expression.trim() === "";
    if (i === 0 && type !== "if") add(`${at}[${i}].type`, "must be if for the first condition");
    else if (i > 0 && type === "if") add(`${at}[${i}].type`, "must not be if except for the first condition (use elseIf)");
    else if (type === "else" && i !== conditions.length - 1) add(`${at}[${i}].type`, "else must be the last condition");
    if (type === "else" && typeof condition.expression === "string" && !empty) add(`${at}[${i}].expression`, "must be empty for else");
    if (type !== "else" && empty) add(`${at}[${i}].expression`, "must not be empty (only else has no expression)");
  });
}

// ABI lookups ----------------------------------------------------------------------------------------------

interface AbiParam {
  name?: string;
  type: string;
  components?: AbiParam[];
}

function canonicalType(param: AbiParam): string {
  if (param.type.startsWith("tuple")) return `(${(param.components ?? []).map(canonicalType).join(",")})${param.type.slice(5)}`;
  return param.type;
}

function abiEntries(abi: unknown[], kind: "function" | "event") {
  return abi.flatMap((item) => {
    if (!isObject(item) || typeof item.name !== "string") return [];
    const type = item.type ?? "function";
    if (type !== kind) return [];
    const inputs = arrayOf(item.inputs).filter((p): p is AbiParam & Raw => isObject(p) && typeof p.type === "string");
    return [{ name: item.name, inputs, signature: `${item.name}(${inputs.map(canonicalType).join(",")})` }];
  });
}

function methodCallProblems(calls: unknown[], abi: unknown[] | undefined, at: string, add: Add) {
  calls.forEach((call, m) => {
    if (!isObject(call)) return;
    const here = `${at}[${m}]`;
    if (present(call.callData)) {
      if (present(call.methodParams)) add(`${here}.methodParams`, "must be absent when callData is given");
      return;
    }
    const name = text(call.methodName);
    if (!abi || name === undefined || name === "") return;
    const params = arrayOf(call.methodParams).length;
    const functions = abiEntries(abi, "function");
    if (name.includes("(")) {
      const signature = name.replace(/\s+/g, "");
      const fn = functions.find((f) => f.signature === signature);
      if (!fn) add(`${here}.methodName`, `names no function of contractAbi: ${name}`);
      else if (fn.inputs.length !== params) add(`${here}.methodParams`, `must have ${fn.inputs.length} items, one per input of ${fn.signature}`);
      return;
    }
    const candidates = functions.filter((f) => f.name === name);
    if (candidates.length === 0) {
      add(`${here}.methodName`, `names no function of contractAbi: ${name}`);
      return;
    }
    const matching = candidates.filter((f) => f.inputs.length === params);
    if (matching.length === 0) {
      const counts = [...new Set(candidates.map((f) => f.inputs.length))].join(" or ");
      add(`${here}.methodParams`, `must have ${counts} items, one per input of ${name}`);
    } else if (matching.length > 1) {
      add(`${here}.methodName`, `is overloaded in contractAbi; use the full signature, e.g. ${matching[0]!.signature}`);
    }
  });
}

/** The event argument a condition names: `value`, `Transfer.value`, or `argN` for an unnamed input. */
function eventArgument(abi: unknown[], fieldName: string): AbiParam | undefined {
  const dot = fieldName.indexOf(".");
  const eventName = dot < 0 ? undefined : fieldName.slice(0, dot);
  const argName = dot < 0 ? fieldName : fieldName.slice(dot + 1);
  for (const event of abiEntries(abi, "event")) {
    if (eventName !== undefined && event.name !== eventName) continue;
    const found = event.inputs.find((p, i) => (typeof p.name === "string" && p.name !== "" ? p.name === argName : `arg${i}` === argName));
    if (found) return found;
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------------------
// Item 5: chains

/** The chain a trigger, node or loop runner acts on: its `config.chainId` (or balance `chain`) if non-zero, else the workflow chain. */
export function partChainId(config: unknown, workflowChainId: number): number {
  const c = isObject(config) ? config : {};
  const chainId = typeof c.chainId === "number" ? c.chainId : 0;
  const alias = typeof c.chain === "string" && /^[0-9]+$/.test(c.chain) ? Number(c.chain) : 0;
  return chainId || alias || workflowChainId;
}

function unsupportedChains(definition: Definition, chains: readonly ChainInfo[]): FieldError[] {
  const configured = new Set(chains.map((c) => c.chainId));
  const problems: FieldError[] = [];
  const check = (path: string, chainId: unknown) => {
    if (typeof chainId === "number" && chainId !== 0 && !configured.has(chainId)) {
      problems.push({ path, message: `chain ${chainId} is not supported by this service` });
    }
  };
  const checkConfig = (type: string, config: unknown, at: string) => {
    if (!CHAIN_AWARE_TYPES.includes(type) || !isObject(config)) return;
    check(`${at}.chainId`, config.chainId);
    if (typeof config.chain === "string" && /^[0-9]+$/.test(config.chain)) check(`${at}.chain`, Number(config.chain));
  };
  check("body.chainId", definition.chainId);
  checkConfig(definition.trigger.type, definition.trigger.config, "body.trigger.config");
  definition.nodes.forEach((node, i) => {
    checkConfig(node.type, node.config, `body.nodes[${i}].config`);
    if (node.type === "loop") checkConfig(node.config.runner.type, node.config.runner.config, `body.nodes[${i}].config.runner.config`);
  });
  return problems;
}

// ---------------------------------------------------------------------------------------------------------
// Item 6: graph

function graphRules(definition: Definition, sentEdges: Edge[] | undefined): FieldError[] {
  const prefix = (problems: { path: string; message: string }[]) => problems.map((p) => ({ path: `body.${p.path}`, message: p.message }));
  if (!sentEdges?.length) {
    const branches = definition.nodes.flatMap((n, i) => (n.type === "branch" ? [i] : []));
    if (branches.length) {
      return branches.map((i) => ({
        path: `body.nodes[${i}]`,
        message: "is a branch node: branches need explicit edges (edges may be omitted only when the nodes form a chain)",
      }));
    }
  }
  return prefix(checkGraph(definition));
}

// ---------------------------------------------------------------------------------------------------------
// Item 7: frequency floors

/** Block times of API.md §5, seconds; any other chain 1 s. A chain's configured `blockTimeSeconds` wins. */
export const DEFAULT_BLOCK_TIMES: Readonly<Record<number, number>> = {
  1: 12, 11155111: 12, 10: 2, 8453: 2, 84532: 2, 56: 0.75, 42161: 0.25, 130: 0.2, 4663: 0.1,
};

export function blockTimeSeconds(chainId: number, chains: readonly ChainInfo[] = []): number {
  return chains.find((c) => c.chainId === chainId)?.blockTimeSeconds ?? DEFAULT_BLOCK_TIMES[chainId] ?? 1;
}

function frequencyProblems(definition: Definition, options: ValidateOptions<Mode>): FieldError[] {
  const trigger = definition.trigger;
  if (trigger.type === "block") {
    const chainId = partChainId(trigger.config, definition.chainId);
    const blockMs = Math.round(blockTimeSeconds(chainId, options.chains) * 1000);
    const floorMs = options.limits.minBlockIntervalS * 1000;
    if (trigger.config.interval * blockMs < floorMs) {
      const least = Math.ceil(floorMs / blockMs);
      return [
        {
          path: "body.trigger.config.interval",
          message: `fires every ${(trigger.config.interval * blockMs) / 1000} s on chain ${chainId} (${blockMs / 1000} s blocks); the minimum is ${options.limits.minBlockIntervalS} s, so the interval must be at least ${least}`,
        },
      ];
    }
  }
  if (trigger.type === "cron") {
    // Every fire of a whole cycle counts (§18.4), computed from the expressions' fields (cron-gap.ts).
    const { schedules, timezone } = trigger.config;
    const floorMs = options.limits.minCronIntervalS * 1000;
    const least = cronMinimumGap(schedules, timezone, options.now);
    if (least >= floorMs) return [];
    const floor = `the minimum is ${options.limits.minCronIntervalS} s`;
    // The first such pair from now, for the message; the walk finds one unless the zone's changes broke the
    // assumption of cron-gap.ts (changes repeat by year type), which then still refuses.
    const pair = firstGapBelow(schedules, timezone, options.now, floorMs);
    if (!pair) return [{ path: "body.trigger.config.schedules", message: `fires ${least / 1000} s apart at least once; ${floor}` }];
    const { a, b } = pair;
    const shared = schedules.findIndex((s) => {
      const cron = new Cron(s, { ...CRONER_OPTIONS, timezone });
      return cron.match(new Date(a)) && cron.match(new Date(b));
    });
    return [
      {
        path: shared < 0 ? "body.trigger.config.schedules" : `body.trigger.config.schedules[${shared}]`,
        message: `fires ${(b - a) / 1000} s apart (${new Date(a).toISOString()} and ${new Date(b).toISOString()}); ${floor}`,
      },
    ];
  }
  return [];
}

/** A fire instant of a cron trigger and the indices of the schedules that fire then. */
export interface CronFire {
  at: number;
  schedules: number[];
}

/**
 * The first `count` fire instants after `after` of the union of `schedules` in `timezone`, with the contract's
 * daylight-saving rules (§8.3.3): a local time skipped by a change does not fire, and a local time that
 * occurs twice fires once, at its first occurrence.
 *
 * croner computes the instants. Its own DST handling follows Vixie cron instead (a fixed-time job skipped by
 * a change runs just after the gap; an interval job runs in both passes of a repeated hour), so its instants
 * are filtered: one whose local time does not match the expression (moved out of a gap) or whose local time
 * already happened earlier (second pass) is dropped.
 */
export function cronFires(schedules: readonly string[], timezone: string, after: number, count: number): CronFire[] {
  // A k-way merge: each schedule yields its next kept instant; the earliest is taken until `count` are found.
  const streams = schedules.map((expression) => {
    const cron = new Cron(expression, { ...CRONER_OPTIONS, timezone });
    let previous = new Date(after);
    return () => {
      // Dropped instants come in runs of at most a repeated hour or two of minutes.
      for (let guard = 0; guard < 1500; guard++) {
        const next = cron.nextRun(previous);
        if (!next) return undefined;
        previous = next;
        if (cron.match(next) && !isRepeatedLocalTime(next.getTime(), timezone)) return next.getTime();
      }
      return undefined;
    };
  });
  const heads = streams.map((next) => next());
  const fires: CronFire[] = [];
  while (fires.length < count) {
    let at: number | undefined;
    for (const head of heads) if (head !== undefined && (at === undefined || head < at)) at = head;
    if (at === undefined) break;
    const indices = heads.flatMap((head, i) => (head === at ? [i] : []));
    for (const i of indices) heads[i] = streams[i]!();
    fires.push({ at, schedules: indices });
  }
  return fires;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

/** The UTC offset of `timezone` at instant `t`, in ms (local wall time = t + offset). */
function utcOffset(t: number, timezone: string): number {
  let f = formatters.get(timezone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone: timezone,
      hourCycle: "h23",
      year: "numeric", month: "numeric", day: "numeric", hour: "numeric", minute: "numeric", second: "numeric",
    });
    formatters.set(timezone, f);
  }
  const parts = Object.fromEntries(f.formatToParts(new Date(t)).map((p) => [p.type, p.value]));
  const wall = Date.UTC(+parts.year!, +parts.month! - 1, +parts.day!, +parts.hour!, +parts.minute!, +parts.second!);
  return wall - Math.floor(t / 1000) * 1000;
}

/** True when the local wall time at `t` already occurred earlier (the second pass of a repeated hour). */
function isRepeatedLocalTime(t: number, timezone: string): boolean {
  const offset = utcOffset(t, timezone);
  // A clock set back by Δ within the last 3 hours shows a larger offset 3 hours ago; without one, nothing repeats.
  if (utcOffset(t - 3 * 3_600_000, timezone) <= offset) return false;
  const earlierOffsets = new Set<number>();
  for (let k = 1; k <= 12; k++) {
    const o = utcOffset(t - k * 15 * 60_000, timezone);
    if (o > offset) earlierOffsets.add(o);
  }
  for (const o of earlierOffsets) {
    const earlier = t + offset - o;
    if (earlier < t && utcOffset(earlier, timezone) === o) return true;
  }
  return false;
}
