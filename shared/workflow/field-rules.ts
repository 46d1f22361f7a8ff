/**
 * §8.7 items 1-4, the rules across fields (./definition.ts, module header): checked on the raw body, so they are
 * found even when some shapes are wrong; reported together with the shapes' problems.
 */
import * as v from "valibot";
import type { FieldError } from "../errors";
import { fieldErrors } from "../http/validate";
import { AddressString, WRITE_NODE_TYPES, workflowSchemas } from "./schemas";
import type { Mode, ValidateOptions } from "./definition-types";

/** `value` as an EIP-55 address, or undefined when it is not one. */
export const address = (value: unknown): string | undefined => {
  const r = v.safeParse(AddressString, value);
  return r.success ? r.output : undefined;
};

/** §8.4.7: `if` for the first, `else` for a last one with an empty expression, `elseIf` otherwise. */
export function inferConditionType(index: number, count: number, expression: unknown): "if" | "elseIf" | "else" {
  if (index === 0) return "if";
  if (index === count - 1 && typeof expression === "string" && expression.trim() === "") return "else";
  return "elseIf";
}

// ---------------------------------------------------------------------------------------------------------
// Items 1-4: rules across fields, on the raw body (so they are found even when some shapes are wrong)

export type Raw = Record<string, unknown>;
export const isObject = (x: unknown): x is Raw => typeof x === "object" && x !== null && !Array.isArray(x);
export const present = (x: unknown) => x !== undefined && x !== null;
export const arrayOf = (x: unknown): unknown[] => (Array.isArray(x) ? x : []);
export const text = (x: unknown): string | undefined => (typeof x === "string" ? x : undefined);

export function crossFieldProblems(input: unknown, options: ValidateOptions<Mode>): FieldError[] {
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
      if (earlier !== undefined)
        add(`${path}.${member}`, `must be unique among the trigger and node ${member}s (${earlier}.${member} is also ${value})`);
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
      if (isObject(runner) && isObject(runner.config))
        nodeConfigProblems(String(runner.type), runner.config, `nodes[${i}].config.runner.config`, add);
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
      const inside = epochs.some(
        (e) => e > options.now && (startAt === undefined || e >= startAt) && (expiredAt === undefined || e < expiredAt),
      );
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
      methodCallProblems(
        arrayOf(config.methodCalls),
        Array.isArray(config.contractAbi) ? config.contractAbi : undefined,
        `${at}.methodCalls`,
        add,
      );
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
      else if (fn.inputs.length !== params)
        add(`${here}.methodParams`, `must have ${fn.inputs.length} items, one per input of ${fn.signature}`);
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
