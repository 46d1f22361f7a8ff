/**
 * One fire of a time trigger (API.md §8.3.7), whoever delivers it (the local scheduler's loop, EventBridge
 * Scheduler through functions/schedule.ts), as often as it is delivered:
 * 1. the instant must be one of the trigger's own fires (a listed epoch; for cron an instant `cronFires` yields,
 *    so a delivery in a skipped or repeated local hour that §8.3.3 does not fire is dropped whatever the
 *    scheduler's own daylight-saving rules) inside `[startAt, expiredAt)`;
 * 2. outage rule: a fire at most `missed_fire_grace_ms` late runs (once), an older one is skipped;
 * 3. the claim (execution/claim.ts, Workflow.claim): its intent is the fire record
 *    `FIRE#<workflow>:<trigger>:<instant>` (store pattern 17), a conditional put made before the workflow's count
 *    is taken, so a second delivery claims nothing and takes no index (DuplicateFire); runnable at fire time is
 *    checked atomically by the count update;
 * 4. the execution goes to a runner through the bus, like an asynchronous manual trigger.
 */
import { ApiError } from "../errors";
import { cronFires } from "../workflow/chain-rules";
import { triggerStepOutput } from "./trigger-output";
import { claimExecution, handOver } from "./claim";
import type { FireTimeTrigger } from "../workflow/scheduler/scheduler";
import { useRuntime } from "../current-runtime";
import type { Trigger } from "../kinds/shapes";
import { getForRun } from "../workflow/stored";
import { DuplicateFire } from "../workflow/claim";

type TimeTrigger = Extract<Trigger, { type: "cron" | "fixedTime" }> & { id: string };

const fireId = (workflowId: string, triggerId: string, instant: number) => `${workflowId}:${triggerId}:${instant}`;

const isTimeTrigger = (trigger: Trigger & { id: string }): trigger is TimeTrigger =>
  trigger.type === "cron" || trigger.type === "fixedTime";

/** True when `instant` is one of the trigger's fires (ignoring the window). */
function isFireInstant(trigger: TimeTrigger, instant: number): boolean {
  if (trigger.type === "fixedTime") return trigger.config.epochs.includes(instant);
  return cronFires(trigger.config.schedules, trigger.config.timezone ?? "UTC", instant - 1, 1)[0]?.at === instant;
}

export const fireTimeTrigger: FireTimeTrigger = async (input) => {
  const { workflowId, instant, now } = input;
  const workflow = await getForRun(workflowId);
  if (!workflow) return { outcome: "skipped", reason: "WORKFLOW_NOT_FOUND", stop: true };
  const trigger = workflow.trigger;
  if (!isTimeTrigger(trigger)) return { outcome: "skipped", reason: "NOT_TIME_TRIGGERED", stop: true };
  if (input.triggerId !== undefined && input.triggerId !== trigger.id)
    return { outcome: "skipped", reason: "TRIGGER_CHANGED", stop: false };
  if (!Number.isSafeInteger(instant) || !isFireInstant(trigger, instant))
    return { outcome: "skipped", reason: "NOT_A_FIRE_INSTANT", stop: false };
  if (workflow.startAt !== undefined && instant < workflow.startAt) return { outcome: "skipped", reason: "BEFORE_START", stop: false };
  if (workflow.expiredAt !== undefined && instant >= workflow.expiredAt) return { outcome: "skipped", reason: "EXPIRED", stop: true };
  const grace = useRuntime().config.limits.missedFireGraceMs;
  if (now - instant > grace) return { outcome: "skipped", reason: "MISSED", stop: false };

  const id = fireId(workflow.id, trigger.id, instant);
  const output = triggerStepOutput(trigger, undefined, instant);
  let executionId: string;
  try {
    executionId = await claimExecution(workflow.id, {
      now,
      workflow, // just read (strongly consistent): the claim does not read it again
      // The record only has to outlive every delivery that could still claim: later ones are skipped as missed.
      fire: { fireId: id, expiresAt: Math.ceil((instant + grace) / 1000) + 3600 },
      stepOutput: output,
      runInput: { triggerOutput: output },
    });
  } catch (err) {
    if (err instanceof DuplicateFire) return { outcome: "duplicate" };
    if (err instanceof ApiError && err.status === 404) return { outcome: "skipped", reason: "WORKFLOW_NOT_FOUND", stop: true };
    if (err instanceof ApiError && err.status === 412) {
      const reason = err.extra.reason ?? "NOT_RUNNABLE";
      return { outcome: "skipped", reason, stop: !["DISABLED", "NOT_STARTED"].includes(reason) };
    }
    throw err;
  }
  await handOver(workflow.id, executionId);
  return { outcome: "fired", executionId };
};
