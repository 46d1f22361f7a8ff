/**
 * loop (API.md §8.4.9): the runner once per element of `inputVariable`, with `iterVar` (default `value`) and
 * `index` as extra variables. At most `loop_max_iterations` elements (LOOP_LIMIT_EXCEEDED). Sequential: an
 * iteration failure stops the rest (their elements stay null). Parallel: at most `loop_max_parallel` at a
 * time and every started iteration completes; ethTransfer and contractWrite runners always run one at a
 * time (user operations from one wallet are serialised). Failed iterations are null; the step fails
 * ITERATION_FAILED naming the first failed index. Gas of every iteration is summed.
 */
import * as v from "valibot";
import { RESERVED_WORDS } from "../../templates";
import { StepFailure, defineNode, isSuspend, nodeShape, type Gas, type NodeResult, type Raw, type SchemaContext } from "../kind";
import { arrayLength, elements, JsonText, parse } from "../../json-text";
import { NAME_PATTERN, WholeTemplate, opt, str, strict, partChainId } from "../support/schema-kit";

/** A loop's runner: a kind that may run in a loop (`inLoop`), its config, and optionally an id and a name. */
interface LoopRunner {
  type: string;
  config: unknown;
  id?: string;
  name?: string;
}

const config = (ctx: SchemaContext) =>
  strict({
    inputVariable: WholeTemplate,
    iterVar: opt(
      v.pipe(
        str(),
        v.regex(NAME_PATTERN, "must be a JavaScript identifier that is not a reserved word (value is allowed)"),
        v.notValues(
          RESERVED_WORDS.filter((w) => w !== "value"),
          "must be a JavaScript identifier that is not a reserved word (value is allowed)",
        ),
        v.description("Default `value`. Must not equal a trigger or node name or `index`."),
      ),
      "value",
    ),
    executionMode: opt(v.picklist(["sequential", "parallel"], "must be sequential or parallel"), "sequential"),
    runner: ctx.loopRunner as v.GenericSchema<unknown, LoopRunner>,
  });
type Config = v.InferOutput<ReturnType<typeof config>>;

type Iteration = { ok: true; result: NodeResult } | { ok: false; error: unknown };

const isObject = (x: unknown): x is Raw => typeof x === "object" && x !== null && !Array.isArray(x);

export const loopShape = nodeShape({
  type: "loop",
  doc: "Runs its runner (another kind) once per element of an array, sequentially or in parallel.",
  config,
  writesOnChain: (config, kinds) => isObject(config.runner) && kinds.node(String(config.runner.type))?.writesOnChain === true,
});

export const loop = /* @__PURE__ */ defineNode(loopShape, {
  problems(config, at, add, ctx) {
    const iterVar = typeof config.iterVar === "string" ? config.iterVar : undefined;
    if (iterVar !== undefined && ctx.names.has(iterVar)) add(`${at}.iterVar`, "must not equal a trigger or node name");
    const runner = config.runner;
    if (isObject(runner) && isObject(runner.config)) ctx.nodeProblems(String(runner.type), runner.config, `${at}.runner.config`, add);
  },
  normalise: (config, kinds) => {
    const runner = config.runner;
    const normalise = kinds.node(runner.type)?.normalise;
    return normalise ? { ...config, runner: { ...runner, config: normalise(runner.config, kinds) } } : config;
  },
  javaScript: (config, kinds) => kinds.node(config.runner.type)?.javaScript?.(config.runner.config, kinds) ?? [],
  costChainConfig: (config) => config.runner.config,
  fee: (config, kinds) => kinds.node(config.runner.type)?.fee?.(config.runner.config, kinds),
  cutOff: "iterations",
  run: async (config: Config, env) => {
    const input = env.resolveWhole(config.inputVariable);
    const limit = env.limits.loopMaxIterations;
    // An array held as text is split into its elements' texts (§18.2); each is parsed only if it is a scalar.
    const items = input instanceof JsonText && input.isArray ? elements(input, limit).map((e) => (e.isContainer ? e : parse(e))) : input;
    if (!Array.isArray(items)) throw new StepFailure("INVALID_INPUT", `loop input ${config.inputVariable} is not an array`);
    if (items.length > limit) {
      const count = input instanceof JsonText ? arrayLength(input) : items.length;
      throw new StepFailure("LOOP_LIMIT_EXCEEDED", `loop input has ${count} items; the limit is ${limit}`);
    }

    const { runner } = config;
    const iterVar = config.iterVar ?? "value";
    const chainId = partChainId(runner.config, env.chainId);
    const sequential = config.executionMode !== "parallel" || env.writesOnChain(runner.type);
    const width = sequential ? 1 : Math.max(1, env.limits.loopMaxParallel);

    const outcomes: (Iteration | undefined)[] = Array.from({ length: items.length }, () => undefined);
    const runOne = async (i: number): Promise<Iteration> => {
      try {
        const child = env.child({ [iterVar]: items[i], index: i }, chainId, i);
        const outcome = await env.runKind(runner.type, runner.config, child);
        if (isSuspend(outcome)) throw new Error(`a ${runner.type} runner cannot wait inside a loop`);
        return { ok: true, result: outcome };
      } catch (error) {
        return { ok: false, error };
      }
    };

    let next = 0;
    let stop = false;
    const worker = async () => {
      while (!stop && next < items.length) {
        const i = next++;
        const outcome = await runOne(i);
        outcomes[i] = outcome;
        if (!outcome.ok && sequential) stop = true;
      }
    };
    await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));

    const data = outcomes.map((o) => (o?.ok ? (o.result.data ?? null) : null));
    const logs = outcomes.flatMap((o, i) => {
      const text = o?.ok ? o.result.log : o && o.error instanceof StepFailure ? (o.error as { log?: string }).log : undefined;
      return text ? [`iteration ${i}: ${text}`] : [];
    });
    const gas = sumGas(outcomes.map((o) => (o?.ok ? o.result.gas : o?.error instanceof StepFailure ? o.error.gas : undefined)));
    const failed = outcomes.findIndex((o) => o && !o.ok);
    if (failed >= 0) {
      const error = (outcomes[failed] as { error: unknown }).error;
      if (!(error instanceof StepFailure || (error instanceof Error && "code" in error))) throw error;
      throw new LoopFailure(`iteration ${failed}: ${error.message}`, data, gas, logs.join("\n"));
    }
    return { data, ...(logs.length ? { log: logs.join("\n") } : {}), ...(gas ? { gas } : {}) };
  },
});

class LoopFailure extends StepFailure {
  constructor(
    message: string,
    data: unknown,
    gas: Gas | undefined,
    readonly log: string,
  ) {
    super("ITERATION_FAILED", message, data, gas);
  }
}

function sumGas(all: (Gas | undefined)[]): Gas | undefined {
  const present = all.filter((g): g is Gas => g !== undefined);
  if (!present.length) return undefined;
  return present.reduce((a, b) => ({ gasUsed: a.gasUsed + b.gasUsed, totalGasCost: a.totalGasCost + b.totalGasCost }));
}
