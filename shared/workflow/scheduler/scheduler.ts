/**
 * The scheduler port: how time triggers (cron, fixedTime) fire by themselves (API.md §8.3.2, §8.3.3, §8.3.7).
 * The interface, and what its adapters share. The workflow module calls `ensure` when a workflow starts firing
 * (create, resume) and `remove` when it stops (pause, cancel, completion) through ./install.ts; an adapter turns
 * that into due fires that it hands to the `FireTimeTrigger` it was made with (the host's wiring passes
 * `fireTimeTrigger`, shared/execution/time-fire.ts, which decides at fire time whether an execution is claimed; the
 * port never imports it, so it sits below the execution module that claims). One file per adapter beside this one:
 * - local.ts: due fires in the table (store pattern 16), a timer loop in `npm start`;
 * - eventbridge.ts: EventBridge Scheduler schedules in the stage's group, targeting functions/schedule.ts.
 */
import type { WorkflowRecord } from "../record";
import { cronFires } from "../chain-rules";
import type { Trigger } from "../../kinds/shapes";

export interface Scheduler {
  /** Makes the workflow's future fires (after `now`) due; idempotent. Fires before `now` are never replayed. */
  ensure(workflow: WorkflowRecord, now: number): Promise<void>;
  /** Removes every schedule of the workflow; idempotent. */
  remove(workflowId: string): Promise<void>;
  /** Called after each delivered fire of the workflow (adapters that keep a window of one-time schedules refresh it). */
  afterFire?(workflow: WorkflowRecord, now: number): Promise<void>;
}

export type FireResult =
  | { outcome: "fired"; executionId: string }
  | { outcome: "duplicate" }
  /** `stop`: the workflow will never fire again (deleted, terminal, not time-triggered): its schedules can go. */
  | { outcome: "skipped"; reason: string; stop: boolean };

/** One delivered fire of a time trigger, as often as it is delivered (shared/execution/time-fire.ts). */
export type FireTimeTrigger = (fire: { workflowId: string; triggerId?: string; instant: number; now: number }) => Promise<FireResult>;

type Window = Pick<WorkflowRecord, "startAt" | "expiredAt">;

/** The trigger's next `count` fire instants after `after` (exclusive) inside `[startAt, expiredAt)`, ascending. */
export function upcomingFires(trigger: Trigger, window: Window, after: number, count: number): number[] {
  const from = window.startAt !== undefined ? Math.max(after, window.startAt - 1) : after;
  const inside = (t: number) => window.expiredAt === undefined || t < window.expiredAt;
  if (trigger.type === "fixedTime") {
    return [...new Set(trigger.config.epochs)]
      .filter((t) => t > from && inside(t))
      .sort((a, b) => a - b)
      .slice(0, count);
  }
  if (trigger.type === "cron") {
    return cronFires(trigger.config.schedules, trigger.config.timezone ?? "UTC", from, count)
      .map((f) => f.at)
      .filter(inside);
  }
  return [];
}
