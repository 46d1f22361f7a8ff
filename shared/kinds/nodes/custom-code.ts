/**
 * customCode (API.md §8.4.6): templates substituted into the source as text, then the body runs in the
 * sandbox with the §8.6 variables as globals; console output is the step log.
 */
import * as v from "valibot";
import { JsonText } from "../../json-text";
import { defineNode, nodeShape, type SchemaContext } from "../kind";
import { opt, str, strict } from "../support/schema-kit";
import { SandboxFailure, sandboxLimits } from "../support/sandbox-step";

/** A JavaScript source of 1 to `maxSourceBytes` bytes. */
const sourceText = ({ limits }: Pick<SchemaContext, "limits">) =>
  v.pipe(str(), v.minBytes(1, "must not be empty"), v.maxBytes(limits.maxSourceBytes, `must be at most ${limits.maxSourceBytes} bytes`));

const config = (ctx: Pick<SchemaContext, "limits">) =>
  strict({
    lang: opt(v.literal("javascript", "must be javascript"), "javascript"),
    source: v.pipe(sourceText(ctx), v.description(`JavaScript function body, 1 to ${ctx.limits.maxSourceBytes} bytes.`)),
  });
type Config = v.InferOutput<ReturnType<typeof config>>;

export const customCodeShape = nodeShape({
  type: "customCode",
  doc: "Runs a JavaScript function body in the sandbox; its return value is the output.",
  config,
  inLoop: true,
  writesOnChain: false,
});

export const customCode = /* @__PURE__ */ defineNode(customCodeShape, {
  javaScript: (config) => [config.source],
  cutOff: "SANDBOX_TIMEOUT",
  run: async (config: Config, env) => {
    const source = env.renderText(config.source);
    const result = await env.sandbox.runToText({ kind: "function-body", source, globals: env.variables, ...sandboxLimits(env) });
    if (!result.ok) throw new SandboxFailure(result.errorCode, result.error, result.log);
    // Held against the execution's state like a response body, whatever the result's type (§18.2).
    if (result.value instanceof JsonText) env.holdState(result.value.text.length);
    else if (typeof result.value === "string") env.holdState(result.value.length);
    return { data: result.value, log: result.log };
  },
});
