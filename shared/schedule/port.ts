/**
 * The scheduler port: how time triggers (cron, fixedTime) fire by themselves (API.md §8.3.2, §8.3.3, §8.3.7).
 * The workflow module calls `ensure` when a workflow starts firing (create, resume) and `remove` when it stops
 * (pause, cancel, completion); the adapter turns that into due fires that reach `fireTimeTrigger` (./fire.ts),
 * which decides at fire time whether an execution is claimed. Two adapters:
 * - local (./local.ts): due fires in the table (store pattern 16), a timer loop in `npm start`;
 * - AWS (./aws.ts): EventBridge Scheduler schedules in the stage's group, targeting functions/schedule.ts.
 * Workflows with other triggers cost nothing here: both calls return at once for them.
 */
import type { WorkflowRecord } from "../workflow/workflow";
import { createLocalScheduler } from "./local";
// Static, not import(): a dynamic import makes esbuild wrap everything it reaches for lazy start-up, and the
// wrapped AWS SDK clients then keep every command they have (+45 KB DynamoDB, +25 KB KMS per function).
import { eventBridgeSchedulerFromEnvironment } from "./aws";

export interface Scheduler {
  /** Makes the workflow's future fires (after `now`) due; idempotent. Fires before `now` are never replayed. */
  ensure(workflow: WorkflowRecord, now: number): Promise<void>;
  /** Removes every schedule of the workflow; idempotent. */
  remove(workflowId: string): Promise<void>;
  /** Called after each delivered fire of the workflow (adapters that keep a window of one-time schedules refresh it). */
  afterFire?(workflow: WorkflowRecord, now: number): Promise<void>;
}

export const isTimeTriggered = (workflow: Pick<WorkflowRecord, "trigger">) =>
  workflow.trigger.type === "cron" || workflow.trigger.type === "fixedTime";

let current: Scheduler | undefined;

/** Installs the process's scheduler (the host: a Lambda entry point, `npm start`, a test). */
export function setScheduler<S extends Scheduler>(scheduler: S): S {
  current = scheduler;
  return scheduler;
}

/**
 * The installed scheduler. Without one: the EventBridge adapter where infra/scheduler.ts configured the function
 * (SCHEDULE_GROUP set), else the local adapter (its due items are inert until a loop reads them).
 */
export async function currentScheduler(): Promise<Scheduler> {
  if (current) return current;
  if (process.env.SCHEDULE_GROUP) return (current ??= eventBridgeSchedulerFromEnvironment());
  return (current = createLocalScheduler());
}

/** Create and resume: schedule a time-triggered workflow. */
export async function startFiring(workflow: WorkflowRecord, now: number): Promise<void> {
  if (isTimeTriggered(workflow)) await (await currentScheduler()).ensure(workflow, now);
}

/** Pause, cancel, completion: remove a time-triggered workflow's schedules. */
export async function stopFiring(workflow: Pick<WorkflowRecord, "id" | "trigger">): Promise<void> {
  if (isTimeTriggered(workflow)) await (await currentScheduler()).remove(workflow.id);
}
