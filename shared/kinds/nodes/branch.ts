/**
 * branch (API.md §8.4.7): the `if`/`elseIf` expressions in order in the sandbox (templates substituted as
 * text first; an expression written as one template `{{ E }}` around JavaScript is `E`, §17.6); the first
 * boolean `true` wins, `else` matches when reached. `X` = `{conditionId: "<branchNodeId>.<conditionId>"}` or
 * `{conditionId: null}`.
 */
import * as v from "valibot";
import { defineNode, nodeShape, type Add, type Raw } from "../kind";
import { SandboxFailure, expressionSource, expressionText, sandboxLimits } from "../support/sandbox-step";
import { IdString, list, opt, strict } from "../support/schema-kit";

const BranchCondition = strict(
  {
    id: IdString,
    type: opt(v.picklist(["if", "elseIf", "else"], "must be if, elseIf or else")),
    expression: expressionText,
  },
  "BranchCondition. `type` is inferred when absent: `if` for the first, `else` for a last one with an empty expression, `elseIf` otherwise. The first is `if`, `if` only first, `else` at most once and last with an empty expression; only `else` may have an empty expression. Ids unique within the branch.",
);
type BranchCondition = v.InferOutput<typeof BranchCondition>;
const config = strict({ conditions: list(BranchCondition, 1, 20, "conditions") });
type Config = v.InferOutput<typeof config>;

/** §8.4.7: `if` for the first, `else` for a last one with an empty expression, `elseIf` otherwise. */
function inferConditionType(index: number, count: number, expression: unknown): "if" | "elseIf" | "else" {
  if (index === 0) return "if";
  if (index === count - 1 && typeof expression === "string" && expression.trim() === "") return "else";
  return "elseIf";
}

/** §8.4.7: the first is `if`; `if` only first; `else` at most once, last, with an empty expression; ids unique. */
function branchProblems(conditions: unknown[], at: string, add: Add) {
  const ids = new Map<string, number>();
  conditions.forEach((item, i) => {
    if (typeof item !== "object" || item === null || Array.isArray(item)) return;
    const condition = item as Raw;
    const id = typeof condition.id === "string" ? condition.id : undefined;
    if (id !== undefined) {
      if (ids.has(id)) add(`${at}[${i}].id`, `must be unique within the branch (body.${at}[${ids.get(id)}].id is also ${id})`);
      else ids.set(id, i);
    }
    const present = condition.type !== undefined && condition.type !== null;
    if (present && !["if", "elseIf", "else"].includes(condition.type as string)) return; // a shape error already
    const type = typeof condition.type === "string" ? condition.type : inferConditionType(i, conditions.length, condition.expression);
    const empty = typeof condition.expression === "string" && condition.expression.trim() === "";
    if (i === 0 && type !== "if") add(`${at}[${i}].type`, "must be if for the first condition");
    else if (i > 0 && type === "if") add(`${at}[${i}].type`, "must not be if except for the first condition (use elseIf)");
    else if (type === "else" && i !== conditions.length - 1) add(`${at}[${i}].type`, "else must be the last condition");
    if (type === "else" && typeof condition.expression === "string" && !empty) add(`${at}[${i}].expression`, "must be empty for else");
    if (type !== "else" && empty) add(`${at}[${i}].expression`, "must not be empty (only else has no expression)");
  });
}

export const branchShape = nodeShape({
  type: "branch",
  doc: "Evaluates if/elseIf/else expressions in order; edges leave from the chosen condition.",
  config: () => config,
  writesOnChain: false,
});

export const branch = /* @__PURE__ */ defineNode(branchShape, {
  problems: (config, at, add) => branchProblems(Array.isArray(config.conditions) ? config.conditions : [], `${at}.conditions`, add),
  normalise: (config) => ({
    ...config,
    conditions: config.conditions.map((c, i) => ({ ...c, type: c.type ?? inferConditionType(i, config.conditions.length, c.expression) })),
  }),
  javaScript: (config) => config.conditions.map((c) => c.expression),
  conditions: (config) => config.conditions.map((c) => c.id),
  chosen: (data, nodeId) => chosenCondition(data, nodeId),
  cutOff: "SANDBOX_TIMEOUT",
  run: async (config: Config, env) => {
    const conditions = config.conditions;
    const evaluated = conditions.filter((c) => c.type !== "else");
    const fallback = conditions.find((c) => c.type === "else");
    const expressions = evaluated.map((c) => expressionSource(c.expression, env));
    const result = await env.sandbox.branch({ expressions, globals: env.variables, ...sandboxLimits(env) });
    if (!result.ok) throw new SandboxFailure(result.errorCode, result.error, result.log);
    const chosen = result.value === null ? fallback : evaluated[result.value];
    return { data: { conditionId: chosen ? `${env.nodeId}.${chosen.id}` : null }, log: result.log };
  },
});

/** The condition id a branch step output chose, or null. */
function chosenCondition(data: unknown, nodeId: string): string | null {
  const id = (data as { conditionId?: unknown } | null)?.conditionId;
  return typeof id === "string" && id.startsWith(`${nodeId}.`) ? id.slice(nodeId.length + 1) : null;
}
