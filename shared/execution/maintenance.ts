/**
 * The maintenance passes, in one list: what the AWS sweeper (functions/sweeper.ts, every minute) and the local
 * host (local/start.ts, on timers) run in the background. A new pass added here reaches both hosts.
 *
 * - withdrawals: pending withdrawals followed up with the bundler (API.md §11.6);
 * - executions: executions still pending after `execution_timeout_ms` end `error` "execution timed out"
 *   (API.md §10.3), which counts toward the workflow's consecutive errors like any other `error`;
 * - expiredWorkflows: workflows past `expiredAt` stored completed / EXPIRED, freeing their slot, schedules and
 *   watch entry (API.md §8.2);
 * - recoveredClaims: claims a crash interrupted, finished (or dropped) a minute on and their runs handed to the
 *   runner through the bus, so no execution index is lost (API.md §18.4, ./claim.ts);
 * - resumedWaits: waits of `await` nodes past their deadline end AWAIT_TIMEOUT, and waiting runs whose wait ended
 *   are resumed (API.md §17.1, ./waits.ts);
 * - resumedLostRuns: resumed runs whose driver died are taken over from their last sealed state (./recovery.ts).
 *
 * The passes are independent and run at once; one that fails does not stop the others, and the report says
 * which did what (the sweeper rethrows a failure so the invocation is retried; the local host logs it).
 */
import { recoverInterruptedClaims } from "./claim";
import { endDueWaits } from "./waits";
import { resumeLostRuns } from "./recovery";
import { useRuntime } from "../current-runtime";
import { followUpPending } from "../wallet/withdraw-followup";
import { expireDue } from "../workflow/lifecycle";
import { recordOutcome } from "../workflow/outcome";
import { sweep } from "./execution-sweep";

/** Workflows stored expired per pass; the rest wait for the next one. */
const EXPIRIES_PER_PASS = 200;

async function timeOutExecutions(now: number) {
  const { checked, timedOut } = await sweep(now);
  for (const e of timedOut) await recordOutcome(e.workflowId, "error", now);
  return { checked, timedOut: timedOut.length };
}

/** Each pass by the name its result carries in the report, in the order they start. */
const PASSES = {
  withdrawals: (_now: number) => followUpPending(),
  executions: timeOutExecutions,
  expiredWorkflows: async (now: number) => (await expireDue(now, EXPIRIES_PER_PASS)).length,
  recoveredClaims: recoverInterruptedClaims,
  resumedWaits: endDueWaits,
  resumedLostRuns: resumeLostRuns,
};

export type MaintenancePass = keyof typeof PASSES;

/** Every pass, in order. */
export const MAINTENANCE_PASSES = Object.keys(PASSES) as MaintenancePass[];

/** What each pass that ran answered, and the passes that threw. */
export interface MaintenanceReport {
  results: { -readonly [P in MaintenancePass]?: Awaited<ReturnType<(typeof PASSES)[P]>> };
  failures: { pass: MaintenancePass; error: unknown }[];
}

/** Runs the given passes (all by default) once, at once, at `now`, and reports on each. Never throws. */
export async function runMaintenance(options: { now?: number; passes?: readonly MaintenancePass[] } = {}): Promise<MaintenanceReport> {
  const now = options.now ?? useRuntime().now();
  const passes = options.passes ?? MAINTENANCE_PASSES;
  const settled = await Promise.allSettled(passes.map((pass) => PASSES[pass](now)));
  const report: MaintenanceReport = { results: {}, failures: [] };
  settled.forEach((outcome, i) => {
    const pass = passes[i]!;
    if (outcome.status === "fulfilled") (report.results as Record<string, unknown>)[pass] = outcome.value;
    else report.failures.push({ pass, error: outcome.reason });
  });
  return report;
}
