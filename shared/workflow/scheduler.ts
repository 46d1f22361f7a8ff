/**
 * The scheduler port: how time triggers (cron, fixedTime) fire by themselves (API.md §8.3.2, §8.3.3, §8.3.7).
 * The workflow module calls `ensure` when a workflow starts firing (create, resume) and `remove` when it stops
 * (pause, cancel, completion); the adapter turns that into due fires that reach `fireTimeTrigger`
 * (shared/schedule/fire.ts), which decides at fire time whether an execution is claimed. Two adapters, in
 * shared/schedule/ (they build on this module, never the other way round):
 * - local (local.ts): due fires in the table (store pattern 16), a timer loop in `npm start`;
 * - AWS (aws.ts): EventBridge Scheduler schedules in the stage's group, targeting functions/schedule.ts.
 * Which one a process uses is wired above: a host installs one (`setScheduler`), or the composition root
 * (shared/service/scheduler.ts) names the default (`setDefaultScheduler`).
 * Workflows with other triggers cost nothing here: both calls return at once for them.
 */
import type { WorkflowRecord } from "./record";

export interface Scheduler {
  /** Makes the workflow's future fires (after `now`) due; idempotent. Fires before `now` are never replayed. */
  ensure(workflow: WorkflowRecord, now: number): Promise<void>;
  /** Removes every schedule of the workflow; idempotent. */
  remove(workflowId: string): Promise<void>;
  /** Called after each delivered fire of the workflow (adapters that keep a window of one-time schedules refresh it). */
  afterFire?(workflow: WorkflowRecord, now: number): Promise<void>;
}

const isTimeTriggered = (workflow: Pick<WorkflowRecord, "trigger">) =>
  workflow.trigger.type === "cron" || workflow.trigger.type === "fixedTime";

let current: Scheduler | undefined;
let makeDefault: (() => Scheduler) | undefined;

/** Installs the process's scheduler (the host: a Lambda entry point, `npm start`, a test). */
export function setScheduler<S extends Scheduler>(scheduler: S): S {
  current = scheduler;
  return scheduler;
}

/** Names the scheduler made on first use when no host installed one (the composition root does). */
export function setDefaultScheduler(make: () => Scheduler): void {
  makeDefault = make;
}

/** The installed scheduler, else the default made now (shared/service/scheduler.ts: EventBridge or local). */
async function currentScheduler(): Promise<Scheduler> {
  if (current) return current;
  if (!makeDefault) throw new Error("No scheduler: the host imports shared/service/scheduler.ts or calls setScheduler");
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
