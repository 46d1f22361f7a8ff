/**
 * Scheduled worker: follows pending withdrawals up with the bundler (API.md §11.6) and ends executions still
 * pending after `execution_timeout_ms` with `error` "execution timed out" (API.md §10.3), which counts toward
 * the workflow's consecutive errors like any other `error`. Workflows past `expiredAt` are stored completed / EXPIRED
 * (API.md §8.2), freeing their slot, schedules and watch entry. Claims a crash interrupted are finished and their
 * runs handed to the runner through the bus (shared/execution/claim.ts), so no execution index is lost. Waits of
 * `await` nodes past their deadline end AWAIT_TIMEOUT, and waiting runs with an ended wait are resumed
 * (shared/execution/waits.ts); resumed runs whose driver died are taken over (shared/execution/recovery.ts).
 */
import "./bootstrap";
import "../shared/service/scheduler";
import { Resource } from "sst";
import { createEventBridgeBus, setBus } from "../shared/execution/bus";
import { recoverInterruptedClaims } from "../shared/execution/claim";
import { followUpPending } from "../shared/wallet/withdraw";
import { sweep } from "../shared/execution/execution";
import { endDueWaits } from "../shared/execution/waits";
import { resumeLostRuns } from "../shared/execution/recovery";
import { expireDue, recordOutcome } from "../shared/workflow/workflow";

setBus(createEventBridgeBus({ busName: (Resource as unknown as { Bus: { name: string } }).Bus.name }));

/** Workflows stored expired per invocation; the rest wait for the next minute. */
const EXPIRIES_PER_PASS = 200;

async function sweepExecutions() {
  const now = Date.now();
  const { checked, timedOut } = await sweep(now);
  for (const e of timedOut) await recordOutcome(e.workflowId, "error", now);
  return { checked, timedOut: timedOut.length };
}

export const handler = async () => {
  const [withdrawals, executions, expired, claims, waits, lost] = await Promise.allSettled([
    followUpPending(),
    sweepExecutions(),
    expireDue(Date.now(), EXPIRIES_PER_PASS),
    recoverInterruptedClaims(Date.now()),
    endDueWaits(Date.now()),
    resumeLostRuns(Date.now()),
  ]);
  for (const part of [withdrawals, executions, expired, claims, waits, lost]) if (part.status === "rejected") throw part.reason;
  const value = <T>(part: PromiseSettledResult<T>) => (part as PromiseFulfilledResult<T>).value;
  return {
    withdrawals: value(withdrawals),
    executions: value(executions),
    expiredWorkflows: value(expired).length,
    recoveredClaims: value(claims),
    resumedWaits: value(waits),
    resumedLostRuns: value(lost),
  };
};
