/**
 * The EventBridge Scheduler adapter: the workflow's fires as schedules in the stage's schedule group, each
 * targeting the schedule function (functions/schedule.ts) with `{workflowId, triggerId, instant}`.
 * - cron: one `cron(...)` schedule per expression with `ScheduleExpressionTimezone`, `StartDate`/`EndDate` from
 *   `startAt`/`expiredAt`. EventBridge's syntax needs `?` in one day field and numbers Sunday 1; an expression
 *   whose day-of-month and day-of-week are both restricted (§8.3.3: either may match) cannot be written there, so
 *   such a trigger instead keeps one-time `at(...)` schedules for its next instants (from `cronFires`), refreshed
 *   on each fire. The scheduled time reaches the target through `<aws.scheduler.scheduled-time>`.
 * - fixedTime: one-time `at(...)` schedules for the next few future epochs, refreshed on each fire (1,000 epochs
 *   would be 1,000 schedules at create), deleted by EventBridge after they ran.
 * Flexible window off; retries only while the fire can still run (`missed_fire_grace_ms`), then the dead-letter
 * queue. EventBridge's own daylight-saving behaviour does not matter: fire.ts drops any delivery that is not one
 * of the trigger's §8.3.3 instants, and the fire record makes a repeated delivery a no-op.
 */
import {
  CreateScheduleCommand,
  DeleteScheduleCommand,
  ListSchedulesCommand,
  SchedulerClient,
  type CreateScheduleCommandInput,
} from "@aws-sdk/client-scheduler";
import { upcomingFires, type FireResult, type FireTimeTrigger, type Scheduler } from "./scheduler";
import { useRuntime } from "../../current-runtime";
import type { Trigger } from "../../kinds/shapes";
import { effectiveStatus, getForRun } from "../stored";
import type { WorkflowRecord } from "../record";

/** How many one-time schedules a workflow keeps ahead (a lost delivery never stops the ones after it). */
export const ONE_TIME_WINDOW = 3;
const RETRY_ATTEMPTS = 10;

export interface EventBridgeSchedulerOptions {
  client?: Pick<SchedulerClient, "send">;
  groupName: string;
  /** The schedule function's ARN, the role EventBridge Scheduler assumes to invoke it, the dead-letter queue's ARN. */
  targetArn: string;
  roleArn: string;
  deadLetterArn: string;
  /** What a delivered fire is handed to (the host passes shared/execution/time-fire.ts). */
  fire: FireTimeTrigger;
}

// ---------------------------------------------------------------------------------------------------------
// 5-field cron → EventBridge `cron(minutes hours day-of-month month day-of-week year)`

const DESCRIPTORS: Record<string, string> = {
  "@yearly": "0 0 1 1 *",
  "@annually": "0 0 1 1 *",
  "@monthly": "0 0 1 * *",
  "@weekly": "0 0 * * 0",
  "@daily": "0 0 * * *",
  "@hourly": "0 * * * *",
};
const MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/** The values a field selects, or "*" for a bare `*`; undefined when the syntax is not the contract's. */
function expand(field: string, min: number, max: number, names: string[] = [], nameBase = min): number[] | "*" | undefined {
  if (field === "*") return "*";
  const value = (text: string) => {
    const named = names.indexOf(text.toUpperCase());
    if (named >= 0) return named + nameBase;
    if (!/^\d+$/.test(text)) return undefined;
    const n = Number(text);
    return n >= min && n <= max ? n : undefined;
  };
  const out = new Set<number>();
  for (const part of field.split(",")) {
    const [range, stepText, extra] = part.split("/");
    if (extra !== undefined || range === undefined) return undefined;
    const step = stepText === undefined ? 1 : Number(stepText);
    if (!Number.isInteger(step) || step < 1 || (stepText !== undefined && !/^\d+$/.test(stepText))) return undefined;
    let lo: number | undefined;
    let hi: number | undefined;
    if (range === "*") [lo, hi] = [min, max];
    else if (range.includes("-")) [lo, hi] = range.split("-").map(value) as [number | undefined, number | undefined];
    else [lo, hi] = [value(range), stepText === undefined ? value(range) : max];
    if (lo === undefined || hi === undefined || lo > hi) return undefined;
    for (let n = lo; n <= hi; n += step) out.add(n);
  }
  return [...out].sort((a, b) => a - b);
}

/** `1,2,3,5` → `1-3,5`. */
function compress(values: number[]): string {
  const parts: string[] = [];
  for (let i = 0; i < values.length;) {
    let j = i;
    while (j + 1 < values.length && values[j + 1] === values[j]! + 1) j++;
    parts.push(j > i ? `${values[i]}-${values[j]}` : `${values[i]}`);
    i = j + 1;
  }
  return parts.join(",");
}

/**
 * The EventBridge form of a 5-field expression, or undefined when EventBridge cannot express it (both day fields
 * restricted). Every restricted field is written as plain numbers and ranges, which EventBridge reads like cron.
 */
export function toEventBridgeCron(expression: string): string | undefined {
  const fields = (DESCRIPTORS[expression.trim().toLowerCase()] ?? expression).trim().split(/\s+/);
  if (fields.length !== 5) return undefined;
  const [minute, hour, dom, month, dow] = [
    expand(fields[0]!, 0, 59),
    expand(fields[1]!, 0, 23),
    expand(fields[2]!, 1, 31),
    expand(fields[3]!, 1, 12, MONTHS, 1),
    expand(fields[4]!, 0, 7, DAYS, 0),
  ];
  if (!minute || !hour || !dom || !month || !dow) return undefined;
  if (dom !== "*" && dow !== "*") return undefined;
  const text = (v: number[] | "*") => (v === "*" ? "*" : compress(v));
  // Day of week: cron 0-7 (0 and 7 Sunday) → EventBridge 1-7 (1 Sunday).
  const weekDays = dow === "*" ? "?" : compress([...new Set(dow.map((d) => (d % 7) + 1))].sort((a, b) => a - b));
  return `cron(${text(minute)} ${text(hour)} ${dow === "*" ? text(dom) : "?"} ${text(month)} ${weekDays} *)`;
}

// ---------------------------------------------------------------------------------------------------------
// The adapter

interface Desired {
  name: string;
  request: CreateScheduleCommandInput;
}

/** `at(...)` takes seconds; the exact instant travels in the input. */
const atExpression = (instant: number) => `at(${new Date(instant).toISOString().slice(0, 19)})`;

/** True when the trigger is served by one-time schedules refreshed on each fire. */
function usesOneTimeSchedules(trigger: Trigger): boolean {
  if (trigger.type === "fixedTime") return true;
  return trigger.type === "cron" && trigger.config.schedules.some((s) => toEventBridgeCron(s) === undefined);
}

export interface EventBridgeScheduler extends Scheduler {
  /** What functions/schedule.ts does with one delivery: the fire, then removal or the window's refresh. */
  deliver(input: { workflowId?: unknown; triggerId?: unknown; instant?: unknown }, now: number): Promise<FireResult>;
}

export function createEventBridgeScheduler(options: EventBridgeSchedulerOptions): EventBridgeScheduler {
  const group: ScheduleGroup = { client: options.client ?? new SchedulerClient({}), options };
  return {
    ensure: (workflow, now) => ensureSchedules(group, workflow, now),
    remove: (workflowId) => removeSchedules(group, workflowId),
    async afterFire(workflow, now) {
      if (usesOneTimeSchedules(workflow.trigger) && effectiveStatus(workflow, now).status === "enabled")
        await ensureSchedules(group, workflow, now);
    },
    async deliver(input, now) {
      const fire = fireOf(input, now);
      const result = await options.fire(fire);
      if (result.outcome === "skipped" && result.stop) {
        await removeSchedules(group, fire.workflowId);
      } else {
        const workflow = await getForRun(fire.workflowId);
        if (workflow) await this.afterFire!(workflow, now);
      }
      return result;
    },
  };
}

/** The stage's schedule group as the adapter's steps use it: the client that reaches it and the adapter's options. */
interface ScheduleGroup {
  client: Pick<SchedulerClient, "send">;
  options: EventBridgeSchedulerOptions;
}

/** The fire a delivery asks for: the workflow, its trigger and the instant EventBridge scheduled. */
function fireOf(input: { workflowId?: unknown; triggerId?: unknown; instant?: unknown }, now: number) {
  return {
    workflowId: String(input.workflowId ?? ""),
    ...(typeof input.triggerId === "string" ? { triggerId: input.triggerId } : {}),
    instant: typeof input.instant === "number" ? input.instant : Date.parse(String(input.instant)),
    now,
  };
}

/** The schedules the workflow should have now: one per cron expression, or the window of one-time schedules. */
function desiredSchedules(options: EventBridgeSchedulerOptions, workflow: WorkflowRecord, now: number): Desired[] {
  const trigger = workflow.trigger;
  if (trigger.type === "cron" && !usesOneTimeSchedules(trigger)) {
    return trigger.config.schedules.map((expression, i) =>
      scheduleOf(options, workflow, now, {
        name: `${workflow.id}-cron-${i}`,
        expression: toEventBridgeCron(expression)!,
        timezone: trigger.config.timezone ?? "UTC",
        instant: "<aws.scheduler.scheduled-time>",
        recurring: true,
      }),
    );
  }
  return upcomingFires(trigger, workflow, now, ONE_TIME_WINDOW).map((instant) =>
    scheduleOf(options, workflow, now, {
      name: `${workflow.id}-at-${instant}`,
      expression: atExpression(instant),
      timezone: "UTC",
      instant,
      recurring: false,
    }),
  );
}

/** One schedule of the workflow: a recurring one (cron) bounded by its start and expiry, or one-time (`at`). */
function scheduleOf(
  options: EventBridgeSchedulerOptions,
  workflow: WorkflowRecord,
  now: number,
  schedule: { name: string; expression: string; timezone: string; instant: number | string; recurring: boolean },
): Desired {
  const { name, expression, timezone, instant, recurring } = schedule;
  const grace = useRuntime().config.limits.missedFireGraceMs;
  // `instant` is a JSON number, or EventBridge's placeholder replaced by the scheduled time (an ISO string).
  const input = `{"workflowId":${JSON.stringify(workflow.id)},"triggerId":${JSON.stringify(workflow.trigger.id)},"instant":${JSON.stringify(instant)}}`;
  return {
    name,
    request: {
      Name: name,
      GroupName: options.groupName,
      ScheduleExpression: expression,
      ScheduleExpressionTimezone: timezone,
      FlexibleTimeWindow: { Mode: "OFF" },
      State: "ENABLED",
      // EventBridge refuses a start date in the past; a started workflow needs none.
      ...(recurring && workflow.startAt !== undefined && workflow.startAt > now ? { StartDate: new Date(workflow.startAt) } : {}),
      ...(recurring && workflow.expiredAt !== undefined ? { EndDate: new Date(workflow.expiredAt) } : {}),
      ActionAfterCompletion: recurring ? "NONE" : "DELETE",
      Target: {
        Arn: options.targetArn,
        RoleArn: options.roleArn,
        Input: input,
        // Past the grace a fire is skipped anyway (§8.3.7).
        RetryPolicy: { MaximumEventAgeInSeconds: Math.max(60, Math.floor(grace / 1000)), MaximumRetryAttempts: RETRY_ATTEMPTS },
        DeadLetterConfig: { Arn: options.deadLetterArn },
      },
    },
  };
}

/** The names of the workflow's schedules in the group (every page). */
async function existingSchedules({ client, options }: ScheduleGroup, workflowId: string): Promise<string[]> {
  const names: string[] = [];
  let token: string | undefined;
  do {
    const out = await client.send(
      new ListSchedulesCommand({ GroupName: options.groupName, NamePrefix: `${workflowId}-`, NextToken: token }),
    );
    for (const s of out.Schedules ?? []) if (s.Name) names.push(s.Name);
    token = out.NextToken;
  } while (token);
  return names;
}

async function deleteSchedule({ client, options }: ScheduleGroup, name: string) {
  try {
    await client.send(new DeleteScheduleCommand({ Name: name, GroupName: options.groupName }));
  } catch (err) {
    if ((err as { name?: string }).name !== "ResourceNotFoundException") throw err;
  }
}

/** Creates the schedules the workflow should have and lacks, then deletes those it should not have. */
async function ensureSchedules(group: ScheduleGroup, workflow: WorkflowRecord, now: number) {
  const want = desiredSchedules(group.options, workflow, now);
  const have = new Set(await existingSchedules(group, workflow.id));
  for (const d of want) {
    if (have.has(d.name)) continue;
    try {
      await group.client.send(new CreateScheduleCommand(d.request));
    } catch (err) {
      if ((err as { name?: string }).name !== "ConflictException") throw err; // a concurrent ensure made it
    }
  }
  const wanted = new Set(want.map((d) => d.name));
  for (const name of have) if (!wanted.has(name)) await deleteSchedule(group, name);
}

async function removeSchedules(group: ScheduleGroup, workflowId: string) {
  for (const name of await existingSchedules(group, workflowId)) await deleteSchedule(group, name);
}

/** The adapter as a deployed function sees it: infra/scheduler.ts sets these variables. */
export function eventBridgeSchedulerFromEnvironment(
  fire: FireTimeTrigger,
  env: Record<string, string | undefined> = process.env,
): EventBridgeScheduler {
  const need = (name: string) => {
    const value = env[name];
    if (!value) throw new Error(`${name} is not set (infra/scheduler.ts provides it)`);
    return value;
  };
  return createEventBridgeScheduler({
    groupName: need("SCHEDULE_GROUP"),
    targetArn: need("SCHEDULE_TARGET_ARN"),
    roleArn: need("SCHEDULER_ROLE_ARN"),
    deadLetterArn: need("SCHEDULE_DEAD_LETTER_ARN"),
    fire,
  });
}
