/**
 * Scheduled worker: follows pending withdrawals up with the bundler (API.md §11.6) and ends executions still
 * pending after `execution_timeout_ms` with `error` "execution timed out" (API.md §10.3).
 */
import "./bootstrap";
import { followUpPending } from "../shared/wallet/withdraw";
import { sweep } from "../shared/execution/execution";

export const handler = async () => {
  const [withdrawals, executions] = await Promise.allSettled([followUpPending(), sweep()]);
  if (withdrawals.status === "rejected") throw withdrawals.reason;
  if (executions.status === "rejected") throw executions.reason;
  return { withdrawals: withdrawals.value, executions: { checked: executions.value.checked, timedOut: executions.value.timedOut.length } };
};
