/**
 * The JavaScript sandbox as the engine sees it (API.md §8.4.6 customCode, §8.4.7 branch, §8.4.8 filter,
 * §18.1): evaluations run in QuickJS (./quickjs.ts) on the worker threads of the pool (./pool.ts), never on
 * this thread.
 *
 * A SandboxSession is one execution's access: it names the owner (the pool's fairness is per owner), carries
 * the execution's JavaScript budget (`sandbox_time_per_execution_ms`, summed over the running time of every
 * evaluation it makes) and an optional signal that cuts its evaluations off (a simulation at its cap).
 * Each evaluation's time limit is the smaller of `sandbox_time_limit_ms` and what is left of the budget; an
 * evaluation stopped by the budget fails with the budget's message. Parallel evaluations of one execution
 * (a parallel loop) each start with what is left when they start, so together they may pass the budget by
 * at most one evaluation's limit per parallel iteration before the next evaluation is refused.
 *
 * Variables cross to the worker as one JSON text (a BigInt as its decimal string); results come back as
 * text and are decoded here.
 */
import { type Answer, type Evaluation, type EvaluationLimits, type Json, type SandboxErrorCode } from "./quickjs";
import { currentSandbox } from "./pool";
import type { Sandbox } from "./port";
import { JsonText, stringify } from "../json-text";

export interface SandboxLimits {
  /** Deadline for one evaluation, promise included (`sandbox_time_limit_ms`). */
  timeLimitMs?: number;
  /** Heap the script may use (`sandbox_memory_limit_mib`). */
  memoryLimitMib?: number;
  /** Console output kept, in UTF-8 bytes, the truncation marker included (`max_step_log_bytes`). */
  logLimitBytes?: number;
  /** For tests only: leave QuickJS's own memory accounting off, to show that the WebAssembly cap holds alone. */
  engineMemoryLimit?: false;
}

export type SandboxResult<T> = { ok: true; value: T; log: string } | { ok: false; errorCode: SandboxErrorCode; error: string; log: string };

/** The variables of API.md §8.6, by root name; JSON values (a BigInt is passed as its decimal string). */
export type SandboxGlobals = Readonly<Record<string, unknown>>;

const SANDBOX_DEFAULTS = { timeLimitMs: 5_000, memoryLimitMib: 64, logLimitBytes: 65_536 } as const;

export interface RunInput extends SandboxLimits {
  /** `function-body`: customCode (top-level `return` and `await`; a returned promise is awaited). `expression`: one expression. */
  kind: "function-body" | "expression";
  source: string;
  globals?: SandboxGlobals;
}

export interface FilterInput<T> extends SandboxLimits {
  /** An expression, or a function body when it contains `return`; evaluated once per element, synchronously. */
  source: string;
  /** At most 10,000 elements (the caller checks §8.4.8's bound); passed into the VM as one JSON text. */
  items: readonly T[];
  /** The items' JSON when the caller holds it already. */
  itemsJson?: string;
  globals?: SandboxGlobals;
}

export interface BranchInput extends SandboxLimits {
  /** The expressions of the `if` and `elseIf` conditions, in order (an `else` needs no evaluation). */
  expressions: readonly string[];
  globals?: SandboxGlobals;
}

export interface SessionOptions {
  /** `sandbox_time_per_execution_ms`; no budget when absent. */
  budgetMs?: number;
  /** Cuts every evaluation off, queued or running (SANDBOX_TIMEOUT, the signal's reason as the error). */
  signal?: AbortSignal;
  pool?: Sandbox;
  /** Time the execution's earlier passes used (a run resumed after a wait): counted against `budgetMs`. */
  spentMs?: number;
}

const budgetExceeded = (budgetMs: number) => `execution exceeded its JavaScript budget of ${budgetMs} ms`;

export class SandboxSession {
  private used = 0;

  constructor(
    readonly owner: string,
    private readonly options: SessionOptions = {},
  ) {
    this.used = options.spentMs ?? 0;
  }

  /** Running time of this session's evaluations so far, in ms. */
  get usedMs(): number {
    return this.used;
  }

  /**
   * customCode or an expression. The value is made JSON-safe as §8.4.6 says: `undefined`, NaN and ±Infinity
   * become `null`, a BigInt its decimal string, functions and symbols are dropped from objects and `null` in
   * arrays (JSON's own rules, nested; `toJSON` is honoured).
   */
  run(input: RunInput): Promise<SandboxResult<Json>> {
    return this.evaluate(input, { op: "run", kind: input.kind, source: input.source }, (raw) => JSON.parse(String(raw)) as Json);
  }

  /**
   * As `run`, the value kept as the JSON text the script produced when it is an object or an array (a
   * result of up to the sandbox's memory is never expanded into host objects: §18.2).
   */
  runToText(input: RunInput): Promise<SandboxResult<JsonText | Json>> {
    return this.evaluate(input, { op: "run", kind: input.kind, source: input.source }, (raw) => {
      const json = new JsonText(String(raw));
      return json.isContainer ? json : (JSON.parse(json.text) as Json);
    });
  }

  /**
   * filter (§8.4.8): compiles the source once and calls it for every element in one VM under one deadline,
   * with the extra globals `value` (the element) and `index`. The value is the caller's own elements (not
   * copies) for which the result was the boolean `true`, in order.
   */
  filter<T>(input: FilterInput<T>): Promise<SandboxResult<T[]>> {
    return this.evaluate(input, { op: "filter", source: input.source, itemsJson: input.itemsJson ?? toJson(input.items) }, (raw) => {
      const picked: T[] = [];
      if (raw === "") return picked;
      for (const part of String(raw).split(",")) {
        const i = Number(part);
        if (!Number.isInteger(i) || i < 0 || i >= input.items.length) throw new Error("filter returned an invalid index");
        picked.push(input.items[i] as T);
      }
      return picked;
    });
  }

  /**
   * branch (§8.4.7): evaluates the expressions in order in one VM under one deadline and stops at the first
   * whose value is the boolean `true`; the value is its index, or `null` when none matched. A throw (or a
   * syntax error) in an expression that is reached fails the evaluation.
   */
  branch(input: BranchInput): Promise<SandboxResult<number | null>> {
    return this.evaluate(input, { op: "branch", expressions: input.expressions }, (raw) => (Number(raw) >= 0 ? Number(raw) : null));
  }

  private async evaluate<T>(
    input: SandboxLimits & { globals?: SandboxGlobals },
    operation: DistributiveOmit<Evaluation, "limits" | "globalsJson">,
    decode: (raw: string | number) => T,
  ): Promise<SandboxResult<T>> {
    const stepLimit = input.timeLimitMs ?? SANDBOX_DEFAULTS.timeLimitMs;
    const { budgetMs, signal } = this.options;
    const left = budgetMs === undefined ? Infinity : budgetMs - this.used;
    if (left <= 0) return { ok: false, errorCode: "SANDBOX_TIMEOUT", error: budgetExceeded(budgetMs!), log: "" };
    const byBudget = left < stepLimit;
    const limits: EvaluationLimits = {
      timeLimitMs: Math.max(1, Math.floor(Math.min(stepLimit, left))),
      memoryLimitMib: input.memoryLimitMib ?? SANDBOX_DEFAULTS.memoryLimitMib,
      logLimitBytes: input.logLimitBytes ?? SANDBOX_DEFAULTS.logLimitBytes,
      ...(input.engineMemoryLimit === false ? { engineMemoryLimit: false as const } : {}),
    };
    const evaluation = { ...operation, limits, globalsJson: toJson(input.globals ?? {}) } as Evaluation;
    const { answer, elapsedMs } = await (this.options.pool ?? currentSandbox()).evaluate(this.owner, evaluation, signal);
    this.used += elapsedMs;
    return this.decode(answer, decode, byBudget && !signal?.aborted ? budgetMs : undefined);
  }

  private decode<T>(answer: Answer, decode: (raw: string | number) => T, budgetMs: number | undefined): SandboxResult<T> {
    if (!answer.ok) {
      if (answer.errorCode === "SANDBOX_TIMEOUT" && budgetMs !== undefined) return { ...answer, error: budgetExceeded(budgetMs) };
      return answer;
    }
    try {
      return { ok: true, value: decode(answer.raw), log: answer.log };
    } catch (e) {
      return {
        ok: false,
        errorCode: "SANDBOX_ERROR",
        error: `the sandbox failed: ${e instanceof Error ? e.message : String(e)}`,
        log: answer.log,
      };
    }
  }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** Variables as one JSON text; outputs held as text are spliced in, never parsed (shared/json-text.ts). */
const toJson = (value: unknown): string => stringify(value);

/** One evaluation outside any execution (tests, tools): owner `anonymous`, no budget. */
export const runSandboxed = (input: RunInput) => new SandboxSession("anonymous").run(input);
export const runFilter = <T>(input: FilterInput<T>) => new SandboxSession("anonymous").filter(input);
export const runBranch = (input: BranchInput) => new SandboxSession("anonymous").branch(input);
