/**
 * filter (API.md §8.4.8): `inputVariable` resolves to an array (at most 10,000 items, else INVALID_INPUT);
 * the expression (templates substituted as text; written as one template `{{ E }}` around JavaScript, `E`:
 * §17.6) runs once per element with `value` and `index`. `X` = the elements for which it gave the boolean `true`.
 */
import * as v from "valibot";
import { StepFailure, defineNode, nodeShape } from "../kind";
import { arrayLength, elements, JsonText } from "../../json-text";
import { SandboxFailure, expressionSource, expressionText, sandboxLimits } from "../support/sandbox-step";
import { WholeTemplate, strict } from "../support/schema-kit";

const config = strict({
  inputVariable: WholeTemplate,
  expression: v.pipe(
    expressionText,
    v.regex(/\S/, "must not be empty"), // = s.trim() !== "" (\s is trim's set), and the document shows it as a pattern
  ),
});
type Config = v.InferOutput<typeof config>;

const FILTER_MAX_ITEMS = 10_000;

export const filterShape = nodeShape({
  type: "filter",
  doc: "Keeps the elements of an array for which a JavaScript expression is true.",
  config: () => config,
  writesOnChain: false,
});

export const filter = /* @__PURE__ */ defineNode(filterShape, {
  javaScript: (config) => [config.expression],
  cutOff: "SANDBOX_TIMEOUT",
  run: async (config: Config, env) => {
    const input = env.resolveWhole(config.inputVariable);
    const held = input instanceof JsonText && input.isArray ? input : undefined;
    // An array held as text is split into its elements' texts, not parsed (§18.2).
    const items: unknown[] | undefined = held ? elements(held, FILTER_MAX_ITEMS) : Array.isArray(input) ? input : undefined;
    if (!items) throw new StepFailure("INVALID_INPUT", `filter input ${config.inputVariable} is not an array`);
    if (items.length > FILTER_MAX_ITEMS) {
      throw new StepFailure(
        "INVALID_INPUT",
        `filter input has ${held ? arrayLength(held) : items.length} items; the limit is ${FILTER_MAX_ITEMS}`,
      );
    }
    // A function body (it contains `return`, §8.4.8: the sandbox's isFunctionBody) stays as written: `{{ … }}`
    // around statements is two blocks, valid JavaScript, so §17.6 leaves it alone.
    const source = /\breturn\b/.test(config.expression) ? env.renderText(config.expression) : expressionSource(config.expression, env);
    const result = await env.sandbox.filter({
      source,
      items,
      ...(held ? { itemsJson: held.text } : {}),
      globals: env.variables,
      ...sandboxLimits(env),
    });
    if (!result.ok) throw new SandboxFailure(result.errorCode, result.error, result.log);
    return { data: result.value, log: result.log };
  },
});
