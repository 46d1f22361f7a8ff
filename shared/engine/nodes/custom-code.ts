/**
 * customCode (API.md §8.4.6): templates substituted into the source as text, then the body runs in the
 * sandbox with the §8.6 variables as globals; console output is the step log.
 */
import type { NodeOf } from "../../workflow/schemas";
import { JsonText } from "../../json-text";
import { StepFailure, type NodeEnv, type NodeKind } from "./kind";

type Config = NodeOf<"customCode">["config"];

export const sandboxLimits = (env: NodeEnv) => ({
  timeLimitMs: env.limits.sandboxTimeLimitMs,
  memoryLimitMib: env.limits.sandboxMemoryLimitMib,
  logLimitBytes: env.limits.maxStepLogBytes,
});

export const customCode: NodeKind<Config> = {
  async run(config, env) {
    const source = env.renderText(config.source);
    const result = await env.sandbox.runToText({ kind: "function-body", source, globals: env.variables, ...sandboxLimits(env) });
    if (!result.ok) throw new SandboxFailure(result.errorCode, result.error, result.log);
    // Held against the execution's state like a response body, whatever the result's type (§18.2).
    if (result.value instanceof JsonText) env.holdState(result.value.text.length);
    else if (typeof result.value === "string") env.holdState(result.value.length);
    return { data: result.value, log: result.log };
  },
};

/** A sandbox failure keeps the console output written before it. */
export class SandboxFailure extends StepFailure {
  constructor(
    code: "SANDBOX_ERROR" | "SANDBOX_TIMEOUT" | "SANDBOX_MEMORY",
    message: string,
    readonly log: string,
  ) {
    super(code, message);
  }
}
