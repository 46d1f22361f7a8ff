/**
 * What the nodes that run JavaScript share (customCode, branch, filter, API.md §8.4.6-§8.4.8): the sandbox's limits
 * from the deployment's settings, the step failure that keeps the console output, and the expressions of branch
 * and filter as the sandbox runs them.
 */
import * as v from "valibot";
import { templateExpression } from "../../templates";
import { StepFailure, type NodeEnv } from "../kind";
import { str } from "./schema-kit";

export const sandboxLimits = (env: NodeEnv) => ({
  timeLimitMs: env.limits.sandboxTimeLimitMs,
  memoryLimitMib: env.limits.sandboxMemoryLimitMib,
  logLimitBytes: env.limits.maxStepLogBytes,
});

/** A JavaScript expression of branch and filter. */
export const expressionText = v.pipe(str(), v.maxBytes(4096, "must be at most 4096 bytes"));

/**
 * The JavaScript of an expression as the sandbox runs it: `E` of a text written as one template `{{ E }}` around
 * an expression (§17.6), else the text itself; path templates substituted as text either way (§8.6).
 */
export const expressionSource = (text: string, env: Pick<NodeEnv, "renderText">): string =>
  env.renderText(templateExpression(text) ?? text);

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
