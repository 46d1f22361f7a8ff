/**
 * The sandbox function's evaluation (functions/sandbox.ts): one invocation, one evaluation, in a QuickJS instance
 * of its own that is dropped afterwards (./quickjs.ts), so nothing of one evaluation survives into the next
 * (API.md §18.1). The next instance is created ahead, once the answer is out, so that a warm invocation only
 * installs the variables and runs; the instance's own interrupt enforces the time limit.
 *
 * This module and what it imports are the function's whole bundle: QuickJS and valibot, no AWS SDK, no table,
 * no keys, no settings (tests/functions/bundles.test.ts).
 */
import * as v from "valibot";
import { createInstance, evaluate, type Evaluation, type Instance } from "./quickjs";
import { SandboxRequest, SandboxReply } from "./protocol";

/** The memory and log limits instances are created ahead for (the engine's defaults, as the pool's). */
const USUAL = { memoryLimitMib: 64, logLimitBytes: 65_536 };

const now = performance.now.bind(performance);
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A handler that evaluates the event's evaluation; it never throws (a bad event answers SANDBOX_ERROR). */
export function sandboxEvaluator(): (event: unknown) => Promise<v.InferOutput<typeof SandboxReply>> {
  const prepare = () => createInstance(USUAL.memoryLimitMib, USUAL.logLimitBytes).catch(() => undefined);
  let ahead: Promise<Instance | undefined> = prepare();
  return async (event) => {
    const parsed = v.safeParse(SandboxRequest, event);
    if (!parsed.success)
      return { answer: { ok: false, errorCode: "SANDBOX_ERROR", error: "the sandbox failed: not an evaluation", log: "" }, elapsedMs: 0 };
    const evaluation = parsed.output.evaluation as Evaluation;
    const { memoryLimitMib, logLimitBytes } = evaluation.limits;
    const usual = memoryLimitMib === USUAL.memoryLimitMib && logLimitBytes === USUAL.logLimitBytes;
    try {
      let instance = usual ? await ahead : undefined;
      // Taken: the next invocation waits for a new one, made once this answer is out.
      if (usual) ahead = nextTurn().then(prepare);
      instance ??= await createInstance(memoryLimitMib);
      const started = now();
      const answer = evaluate(instance, evaluation);
      return { answer, elapsedMs: now() - started };
    } catch (e) {
      const error = `the sandbox failed: ${e instanceof Error ? e.message : String(e)}`;
      return { answer: { ok: false, errorCode: "SANDBOX_ERROR", error, log: "" }, elapsedMs: 0 };
    }
  };
}
