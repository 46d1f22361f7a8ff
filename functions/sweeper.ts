/**
 * Scheduled worker: follows pending withdrawals up with the bundler (API.md §11.6) and ends executions still
 * pending after `execution_timeout_ms` with `error` "execution timed out" (API.md §10.3), which counts toward
 * the workflow's consecutive errors like any other `error`. Workflows past `expiredAt` are stored completed / EXPIRED
 * (API.md §8.2), freeing their slot, schedules and watch entry.
 */
import "./bootstrap";
import { followUpPending } from "../shared/wallet/withdraw";
import { sweep } from "../shared/execution/execution";
import { expireDue, recordOutcome } from "../shared/workflow/workflow";

/** Workflows stored expired per invocation; the rest wait for the next minute. */
const EXPIRIES_PER_PASS = 200;

async function sweepExecutions() {
  const now = Date.now();
  const { checked, timedOut } = await sweep(now);
  for (const e of timedOut) await recordOutcome(e.workflowId, "error", now);
  return { checked, timedOut: timedOut.length };
}

export const handler = async () => {
  const [withdrawals, executions, expired] = await Promise.allSettled([followUpPending(), sweepExecutions(), expireDue(Date.now(), EXPIRIES_PER_PASS)]);
  if (withdrawals.status === "rejected") throw withdrawals.reason;
  if (executions.status === "rejected") throw executions.reason;
  if (expired.status === "rejected") throw expired.reason;
  return { withdrawals: withdrawals.value, executions: executions.value, expiredWorkflows: expired.value.length };
};
