/**
 * Scheduled worker (infra/sweeper.ts, every minute): runs every maintenance pass once
 * (shared/execution/maintenance.ts: pending withdrawals, timed-out executions, expired workflows, interrupted
 * claims, ended waits, lost drivers) and answers what each did. A pass that failed is rethrown once all have
 * finished, so the invocation is retried.
 */
import "./bootstrap";
import { installScheduler } from "../shared/service/scheduler";
import { Resource } from "sst";
import { setBus } from "../shared/execution/bus";
import { createEventBridgeBus } from "../shared/execution/bus/eventbridge";
import { runMaintenance } from "../shared/execution/maintenance";

installScheduler();

setBus(createEventBridgeBus({ busName: (Resource as unknown as { Bus: { name: string } }).Bus.name }));

export const handler = async () => {
  const { results, failures } = await runMaintenance();
  if (failures[0]) throw failures[0].error;
  return results;
};
