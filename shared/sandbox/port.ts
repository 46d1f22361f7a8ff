/**
 * The sandbox port (API.md §18.1): where a JavaScript evaluation runs. The host's wiring installs it: locally
 * the in-process worker pool (./pool.ts, shared/service/wire-local.ts); on AWS the sandbox function, a Lambda
 * whose role grants nothing but logs (./remote.ts, shared/service/wire-aws-sandbox.ts, infra/sandbox.ts), so
 * that no script runs next to the table, the keys or the process's credentials.
 *
 * Either way evaluations are dispatched fairly across owners, and `elapsedMs` is the evaluation's running time
 * (never time queued or in transit), which the caller charges to the execution's budget (./session.ts).
 */
import type { Answer, Evaluation } from "./quickjs";

export interface Outcome {
  answer: Answer;
  /** Running time of the evaluation (not time queued), in ms. */
  elapsedMs: number;
}

export interface Sandbox {
  /** Runs one evaluation for `owner`; never rejects. `signal` cuts it off (queued or running) with its reason. */
  evaluate(owner: string, evaluation: Evaluation, signal?: AbortSignal): Promise<Outcome>;
}

let installed: Sandbox | undefined;

export function setSandbox(sandbox: Sandbox): Sandbox {
  installed = sandbox;
  return sandbox;
}

/** The sandbox the host installed, if any. */
export const installedSandbox = (): Sandbox | undefined => installed;
