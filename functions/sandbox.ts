/**
 * The sandbox function (infra/sandbox.ts): evaluates one JavaScript evaluation per invocation for the functions
 * that run workflows (shared/sandbox/remote.ts invokes it). Its role grants nothing but logs, it links nothing,
 * and it imports no wiring: its bundle is the QuickJS evaluation alone (shared/sandbox/evaluator.ts).
 *
 * Lambda gives every function its role's credentials in the environment; this one needs none (its logs go to
 * stdout), so they are removed at load, before any evaluation.
 */
import { sandboxEvaluator } from "../shared/sandbox/evaluator";

for (const name of ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"]) delete process.env[name];

export const handler = sandboxEvaluator();
