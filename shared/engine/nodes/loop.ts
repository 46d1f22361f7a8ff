/**
 * loop (API.md §8.4.9): the runner once per element of `inputVariable`, with `iterVar` (default `value`) and
 * `index` as extra variables. At most `loop_max_iterations` elements (LOOP_LIMIT_EXCEEDED). Sequential: an
 * iteration failure stops the rest (their elements stay null). Parallel: at most `loop_max_parallel` at a
 * time and every started iteration completes; ethTransfer and contractWrite runners always run one at a
 * time (user operations from one wallet are serialised). Failed iterations are null; the step fails
 * ITERATION_FAILED naming the first failed index. Gas of every iteration is summed.
 */
import type { NodeOf } from "../../workflow/schemas";
import { WRITE_NODE_TYPES } from "../../workflow/schemas";
import { partChainId } from "../../workflow/definition";
import { StepFailure, type Gas, type NodeKind, type NodeResult } from "./kind";
import { arrayLength, elements, JsonText, parse } from "../../json-text";

type Config = NodeOf<"loop">["config"];

type Iteration = { ok: true; result: NodeResult } | { ok: false; error: unknown };

export const loop: NodeKind<Config> = {
  async run(config, env) {
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
    const sequential = config.executionMode !== "parallel" || WRITE_NODE_TYPES.includes(runner.type);
    const width = sequential ? 1 : Math.max(1, env.limits.loopMaxParallel);

    const outcomes: (Iteration | undefined)[] = Array.from({ length: items.length }, () => undefined);
    const runOne = async (i: number): Promise<Iteration> => {
      try {
        const child = env.child({ [iterVar]: items[i], index: i }, chainId);
        return { ok: true, result: await env.runKind(runner.type, runner.config, child) };
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
};

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
