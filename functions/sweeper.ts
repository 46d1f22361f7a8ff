/**
 * Scheduled worker: follows pending withdrawals up with the bundler (API.md §11.6) and ends executions still
 * pending after `execution_timeout_ms` with `error` "execution timed out" (API.md §10.3), which counts toward
 * the workflow's consecutive errors like any other `error`.
 */
import "./bootstrap";
import { followUpPending } from "../shared/wallet/withdraw";
import { sweep } from "../shared/execution/execution";
import { recordOutcome } from "../shared/workflow/workflow";

async function sweepExecutions() {
  const now = Date.now();
  const { checked, timedOut } = await sweep(now);
  for (const e of timedOut) await recordOutcome(e.workflowId, "error", now);
  return { checked, timedOut: timedOut.length };
}

export const handler = async () => {
  const [withdrawals, executions] = await Promise.allSettled([followUpPending(), sweepExecutions()]);
  if (withdrawals.status === "rejected") throw withdrawals.reason;
  if (executions.status === "rejected") throw executions.reason;
  return { withdrawals: withdrawals.value, executions: executions.value };
};
