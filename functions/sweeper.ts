/**
 * Scheduled worker (infra/sweeper.ts, every minute): runs every maintenance pass once
 * (shared/execution/maintenance.ts: pending withdrawals, timed-out executions, expired workflows, interrupted
 * claims, ended waits, lost drivers) and answers what each did. A pass that failed is rethrown once all have
 * finished, so the invocation is retried.
 */
import { awsBus, invocation, wireAws } from "../shared/service/wire-aws";
import { awsScheduler } from "../shared/service/wire-aws-scheduler";
import { runMaintenance } from "../shared/execution/maintenance";

// Recovered claims and ended waits reach the runner function through the bus; expiries remove schedules.
wireAws(awsBus, awsScheduler);

export const handler = invocation(async () => {
  const { results, failures } = await runMaintenance();
  if (failures[0]) throw failures[0].error;
  return results;
});
