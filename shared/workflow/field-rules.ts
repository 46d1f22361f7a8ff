/**
 * §8.7 items 1-4, the rules across fields (./definition.ts, module header): checked on the raw body, so they are
 * found even when some shapes are wrong; reported together with the shapes' problems.
 */
import * as v from "valibot";
import type { FieldError } from "../errors";
import { fieldErrors } from "../http/validate";
import { workflowSchemas } from "./schemas";
import type { Mode, ValidateOptions } from "./definition-types";
import { kinds as defaultKinds } from "../kinds/kinds";
import type { Add, RuleContext } from "../kinds/kind";
import { AddressString } from "../http/address-schemas";
/** `value` as an EIP-55 address, or undefined when it is not one. */
export const address = (value: unknown): string | undefined => {
  const r = v.safeParse(AddressString, value);
  return r.success ? r.output : undefined;
};

// ---------------------------------------------------------------------------------------------------------
// Items 1-4: rules across fields, on the raw body (so they are found even when some shapes are wrong)

export type Raw = Record<string, unknown>;
export const isObject = (x: unknown): x is Raw => typeof x === "object" && x !== null && !Array.isArray(x);
const present = (x: unknown) => x !== undefined && x !== null;
const arrayOf = (x: unknown): unknown[] => (Array.isArray(x) ? x : []);
const text = (x: unknown): string | undefined => (typeof x === "string" ? x : undefined);

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

  // Trigger and node configs: each kind's rules.
  const kinds = options.kinds ?? defaultKinds;
  if (trigger && isObject(trigger.config)) kinds.trigger(String(trigger.type))?.problems?.(trigger.config, "trigger.config", add);
  const ctx: RuleContext = { names, nodeProblems: (type, config, at, add) => kinds.node(type)?.problems?.(config, at, add, ctx) };
  nodes.forEach((node, i) => {
    if (isObject(node) && isObject(node.config)) ctx.nodeProblems(String(node.type), node.config, `nodes[${i}].config`, add);
  });
  const perKind = new Map<string, number>();
  nodes.forEach((node, i) => {
    if (!isObject(node)) return;
    const type = String(node.type);
    const max = kinds.node(type)?.maxPerWorkflow;
    const seen = (perKind.get(type) ?? 0) + 1;
    perKind.set(type, seen);
    if (max !== undefined && seen === max + 1) add(`nodes[${i}]`, `must not be more than ${max} ${type} nodes in one workflow`);
  });

  // Item 3: inputVariables and settings.
  const inputVariables = input.inputVariables;
  if (isObject(inputVariables)) {
    for (const key of Object.keys(inputVariables)) {
      if (names.has(key)) add(`inputVariables.${key}`, "must not equal a trigger or node name");
    }
    settingsProblems(inputVariables.settings, input, options, nodes, add, (node) => kinds.sendsUserOperation(node));
  }

  // Item 4 (create), and the body rules of the other endpoints.
  if (options.mode === "create") {
    const startAt = typeof input.startAt === "number" ? input.startAt : undefined;
    const expiredAt = typeof input.expiredAt === "number" ? input.expiredAt : undefined;
    if (expiredAt !== undefined && expiredAt <= options.now) add("expiredAt", "must be after now");
    else if (expiredAt !== undefined && startAt !== undefined && expiredAt <= startAt) add("expiredAt", "must be after startAt");
    if (trigger && isObject(trigger.config)) {
      const window = { now: options.now, ...(startAt !== undefined ? { startAt } : {}), ...(expiredAt !== undefined ? { expiredAt } : {}) };
      kinds.trigger(String(trigger.type))?.createProblems?.(trigger.config, window, "trigger.config", add);
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

function settingsProblems(
  settings: unknown,
  input: Raw,
  options: ValidateOptions<Mode>,
  nodes: unknown[],
  add: Add,
  sendsUserOperation: (node: unknown) => boolean,
) {
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
