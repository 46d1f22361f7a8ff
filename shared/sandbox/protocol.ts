/**
 * What crosses to the sandbox function and back (./remote.ts → functions/sandbox.ts): one evaluation as texts
 * and numbers only (./quickjs.ts, Evaluation), and its answer with the running time measured inside the
 * function. Checked on both sides: the function trusts no event, the caller no reply.
 */
import * as v from "valibot";
import type { Answer, Evaluation } from "./quickjs";

const count = (min: number) => v.pipe(v.number(), v.integer(), v.minValue(min));

const Limits = v.object({
  timeLimitMs: count(1),
  memoryLimitMib: count(1),
  logLimitBytes: count(0),
});

const Common = { limits: Limits, globalsJson: v.string() };

export const SandboxRequest = v.object({
  evaluation: v.variant("op", [
    v.object({ op: v.literal("run"), kind: v.picklist(["function-body", "expression"]), source: v.string(), ...Common }),
    v.object({ op: v.literal("filter"), source: v.string(), itemsJson: v.string(), ...Common }),
    v.object({ op: v.literal("branch"), expressions: v.array(v.string()), ...Common }),
  ]),
});

const ErrorCode = v.picklist(["SANDBOX_ERROR", "SANDBOX_TIMEOUT", "SANDBOX_MEMORY"]);

export const SandboxReply = v.object({
  answer: v.variant("ok", [
    v.object({ ok: v.literal(true), raw: v.union([v.string(), v.number()]), log: v.string() }),
    v.object({ ok: v.literal(false), errorCode: ErrorCode, error: v.string(), log: v.string() }),
  ]),
  elapsedMs: v.pipe(v.number(), v.minValue(0)),
});

// The schemas describe the engine's own types exactly: a change to one fails the build here.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const requestMatches: Same<
  Omit<v.InferOutput<typeof SandboxRequest>["evaluation"]["limits"], never>,
  Omit<Evaluation["limits"], "engineMemoryLimit">
> = true;
const replyMatches: Same<v.InferOutput<typeof SandboxReply>["answer"], Answer> = true;
void requestMatches;
void replyMatches;
