/**
 * The scheduler this process uses (the port is ./scheduler.ts): installed by the host's wiring
 * (shared/service/wire-aws.ts, wire-local.ts), used by the workflow module through `startFiring` and `stopFiring`.
 * Workflows with other triggers cost nothing here: both calls return at once for them.
 */
import type { WorkflowRecord } from "../record";
import type { Scheduler } from "./scheduler";

const isTimeTriggered = (workflow: Pick<WorkflowRecord, "trigger">) =>
  workflow.trigger.type === "cron" || workflow.trigger.type === "fixedTime";

let current: Scheduler | undefined;
let makeDefault: (() => Scheduler) | undefined;

/** Installs the process's scheduler (the host: a Lambda entry point, `npm start`, a test). */
export function setScheduler<S extends Scheduler>(scheduler: S): S {
  current = scheduler;
  return scheduler;
}

/** Names the scheduler to make on first use when none is installed by then, so wiring needs no schedule settings (AWS). */
export function setLazyScheduler(make: () => Scheduler): void {
  makeDefault = make;
}

/** The installed scheduler, made now if it was installed to be made on first use. */
async function currentScheduler(): Promise<Scheduler> {
  if (current) return current;
  if (!makeDefault)
    throw new Error("No scheduler is installed: the host's wiring installs one (shared/service/wire-aws.ts, wire-local.ts)");
  return (current = makeDefault());
}

/** Create and resume: schedule a time-triggered workflow. */
export async function startFiring(workflow: WorkflowRecord, now: number): Promise<void> {
  if (isTimeTriggered(workflow)) await (await currentScheduler()).ensure(workflow, now);
}

/** Pause, cancel, completion: remove a time-triggered workflow's schedules. */
export async function stopFiring(workflow: Pick<WorkflowRecord, "id" | "trigger">): Promise<void> {
  if (isTimeTriggered(workflow)) await (await currentScheduler()).remove(workflow.id);
}
