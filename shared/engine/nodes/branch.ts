/**
 * branch (API.md §8.4.7): the `if`/`elseIf` expressions in order in the sandbox (templates substituted as
 * text first); the first boolean `true` wins, `else` matches when reached. `X` = `{conditionId:
 * "<branchNodeId>.<conditionId>"}` or `{conditionId: null}`.
 */
import type { NodeOf } from "../../workflow/schemas";
import type { NodeKind } from "./kind";
import { SandboxFailure, sandboxLimits } from "./custom-code";

type Config = NodeOf<"branch">["config"];

export const branch: NodeKind<Config> = {
  async run(config, env) {
    const conditions = config.conditions;
    const evaluated = conditions.filter((c) => c.type !== "else");
    const fallback = conditions.find((c) => c.type === "else");
    const expressions = evaluated.map((c) => env.renderText(c.expression));
    const result = await env.sandbox.branch({ expressions, globals: env.variables, ...sandboxLimits(env) });
    if (!result.ok) throw new SandboxFailure(result.errorCode, result.error, result.log);
    const chosen = result.value === null ? fallback : evaluated[result.value];
    return { data: { conditionId: chosen ? `${env.nodeId}.${chosen.id}` : null }, log: result.log };
  },
};

/** The condition id a branch step output chose, or null. */
export function chosenCondition(data: unknown, nodeId: string): string | null {
  const id = (data as { conditionId?: unknown } | null)?.conditionId;
  return typeof id === "string" && id.startsWith(`${nodeId}.`) ? id.slice(nodeId.length + 1) : null;
}
