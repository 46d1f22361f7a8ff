/**
 * The scheduler port: how time triggers (cron, fixedTime) fire by themselves (API.md §8.3.2, §8.3.3, §8.3.7).
 * The interface alone. The workflow module calls `ensure` when a workflow starts firing (create, resume) and
 * `remove` when it stops (pause, cancel, completion) through ./install.ts; the adapter turns that into due fires that
 * reach `fireTimeTrigger` (shared/schedule/fire.ts), which decides at fire time whether an execution is claimed.
 * Its two adapters are one file each in shared/schedule/ (they build on the fire, which claims executions, so they
 * sit above this module, never the other way round):
 * - local.ts: due fires in the table (store pattern 16), a timer loop in `npm start`;
 * - eventbridge.ts: EventBridge Scheduler schedules in the stage's group, targeting functions/schedule.ts.
 */
import type { WorkflowRecord } from "../record";

export interface Scheduler {
  /** Makes the workflow's future fires (after `now`) due; idempotent. Fires before `now` are never replayed. */
  ensure(workflow: WorkflowRecord, now: number): Promise<void>;
  /** Removes every schedule of the workflow; idempotent. */
  remove(workflowId: string): Promise<void>;
  /** Called after each delivered fire of the workflow (adapters that keep a window of one-time schedules refresh it). */
  afterFire?(workflow: WorkflowRecord, now: number): Promise<void>;
}
