/**
 * Time triggers (API.md §8.3.2, §8.3.3, §8.3.7) through the scheduler port: one contract run against both
 * adapters with a fake clock. The local adapter fires from its table items (store pattern 16); the EventBridge
 * adapter talks to a recording fake SchedulerClient whose requests are checked and which delivers each schedule's
 * fires (its `cron(...)` read back with croner in the schedule's time zone, its `at(...)` at their time) to the
 * adapter's `deliver`, as the schedule function does in AWS. Workflows are created, paused and resumed over HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { freePort } from "../../../local/processes";
import { signInWithAccount } from "../../../local/client";
import { Cron } from "croner";
import {
  CreateScheduleCommand,
  DeleteScheduleCommand,
  ListSchedulesCommand,
  type CreateScheduleCommandInput,
} from "@aws-sdk/client-scheduler";
import { GetCommand, PutCommand } from "@aws-sdk/lib-dynamodb";
import { useTestRuntime } from "../../support/runtime";
import { startTestServer, type TestServer } from "../../support/server";
import { trigger } from "../../support/workflows";
import { exited, waitFor } from "../../support/wait";
import { jsonClient, type Json, type Owner } from "../../support/client";
import { createServiceApp } from "../../../shared/service/app";
import { setBus } from "../../../shared/execution/bus/install";
import { createInProcessBus, type InProcessBus } from "../../../shared/execution/bus/in-process";
import { withRunner } from "../../../shared/execution/runner";
import { setScheduler } from "../../../shared/workflow/scheduler/install";
import { type FireResult, type Scheduler } from "../../../shared/workflow/scheduler/scheduler";
import { createLocalScheduler, type LocalScheduler } from "../../../shared/workflow/scheduler/local";
import {
  createEventBridgeScheduler,
  toEventBridgeCron,
  ONE_TIME_WINDOW,
  type EventBridgeScheduler,
} from "../../../shared/workflow/scheduler/eventbridge";
import { fireTimeTrigger } from "../../../shared/execution/time-fire";
import type { Runtime } from "../../../shared/current-runtime";
import { scheduleKey } from "../../../shared/store/entities/schedule";

let runtime: Runtime;
let server: TestServer;
let bus: InProcessBus;
let clock = Date.now();
const { call, ownerWithWallet, createWorkflow } = jsonClient(() => server.url);
const MIN = 60_000;
const HOUR = 60 * MIN;

beforeAll(async () => {
  runtime = await useTestRuntime({ RATE_LIMIT_BURST: "100000", RATE_LIMIT_RPS: "10000" });
  runtime.now = () => clock;
  bus = setBus(withRunner(createInProcessBus()));
  server = await startTestServer(createServiceApp());
});

afterAll(async () => {
  await bus?.idle();
  await server?.close();
});

// ---------------------------------------------------------------------------------------------------------
// Harnesses: the same moves on each adapter

interface Fired {
  workflowId: string;
  instant: number;
  result: FireResult;
}

interface Harness {
  scheduler: Scheduler;
  /** Moves the clock to `t`, delivering every due fire at its time on the way. */
  runUntil(t: number): Promise<Fired[]>;
  /** The service is down until `t`: nothing is delivered before; then what the adapter still delivers, at `t`. */
  outageUntil(t: number): Promise<Fired[]>;
  /** Delivers the last delivered fire of the workflow once more (at-least-once delivery; a crash before advancing). */
  redeliverLast(workflowId: string): Promise<Fired[]>;
  /** The workflow's schedules as the adapter stores them (empty when it cannot fire). */
  scheduled(workflowId: string): Promise<string[]>;
}

function localHarness(): Harness {
  const scheduler: LocalScheduler = createLocalScheduler(fireTimeTrigger);
  const last = new Map<string, number>();
  const tick = async (now: number) => {
    const fired = await scheduler.tick(now);
    for (const f of fired) last.set(f.workflowId, f.instant);
    return fired;
  };
  return {
    scheduler,
    async runUntil(t) {
      const fired: Fired[] = [];
      for (;;) {
        const next = await scheduler.nextDueAt();
        if (next === undefined || next > t) break;
        clock = Math.max(clock, next);
        fired.push(...(await tick(clock)));
      }
      clock = t;
      return fired;
    },
    async outageUntil(t) {
      clock = t;
      return tick(t);
    },
    async redeliverLast(workflowId) {
      // A loop that fired and died before advancing leaves the item at the fired instant.
      const instant = last.get(workflowId)!;
      const { Item } = await runtime.db.send(new GetCommand({ TableName: runtime.config.tableName, Key: scheduleKey(workflowId) }));
      await runtime.db.send(
        new PutCommand({
          TableName: runtime.config.tableName,
          Item: { ...Item, nextFireAt: instant, gsi2sk: `${String(instant).padStart(15, "0")}#${workflowId}` },
        }),
      );
      return tick(clock);
    },
    async scheduled(workflowId) {
      const { Item } = await runtime.db.send(new GetCommand({ TableName: runtime.config.tableName, Key: scheduleKey(workflowId) }));
      return Item ? [`next ${Item.nextFireAt}`] : [];
    },
  };
}

const GROUP = "workflow-automation-test";
const TARGET = "arn:aws:lambda:us-east-1:123456789012:function:workflow-automation-test-schedule";
const ROLE = "arn:aws:iam::123456789012:role/workflow-automation-test-scheduler";
const DLQ = "arn:aws:sqs:us-east-1:123456789012:workflow-automation-test-schedule-dlq";

/** A recording stand-in for EventBridge Scheduler: the requests, the schedules they leave, and their deliveries. */
class FakeSchedulerClient {
  readonly requests: { command: string; input: Record<string, unknown> }[] = [];
  readonly schedules = new Map<string, CreateScheduleCommandInput>();
  /** Last time each schedule was evaluated up to. */
  readonly deadLettered: string[] = [];

  async send(command: unknown): Promise<Record<string, unknown>> {
    const input = (command as { input: Record<string, unknown> }).input;
    const error = (name: string) => Object.assign(new Error(name), { name });
    if (command instanceof CreateScheduleCommand) {
      this.requests.push({ command: "CreateSchedule", input });
      const key = `${input.GroupName}/${input.Name}`;
      if (this.schedules.has(key)) throw error("ConflictException");
      this.schedules.set(key, command.input);
      return { ScheduleArn: `arn:aws:scheduler:::schedule/${key}` };
    }
    if (command instanceof DeleteScheduleCommand) {
      this.requests.push({ command: "DeleteSchedule", input });
      if (!this.schedules.delete(`${input.GroupName}/${input.Name}`)) throw error("ResourceNotFoundException");
      return {};
    }
    if (command instanceof ListSchedulesCommand) {
      const prefix = `${input.GroupName}/${input.NamePrefix ?? ""}`;
      return { Schedules: [...this.schedules.keys()].filter((k) => k.startsWith(prefix)).map((k) => ({ Name: k.split("/")[1] })) };
    }
    throw new Error(`unexpected command ${(command as object).constructor.name}`);
  }

  /** Every delivery in `(from, to]`, in time order: `[time, schedule key, input]`. */
  due(from: number, to: number): [number, string, Json][] {
    const out: [number, string, Json][] = [];
    for (const [key, s] of this.schedules) {
      const expression = s.ScheduleExpression!;
      const at = /^at\((.+)\)$/.exec(expression);
      const times: number[] = [];
      if (at) {
        const t = Date.parse(`${at[1]}Z`);
        if (t > from && t <= to) times.push(t);
      } else {
        const [m, h, dom, mon, dow] = /^cron\((.+)\)$/.exec(expression)![1]!.split(" ");
        const weekDays = dow === "?" ? "*" : dow!.replace(/\d/g, (d) => String(Number(d) - 1));
        const cron = new Cron(`${m} ${h} ${dom === "?" ? "*" : dom} ${mon} ${weekDays}`, { timezone: s.ScheduleExpressionTimezone });
        let previous = new Date(Math.max(from, s.StartDate ? s.StartDate.getTime() - 1 : from));
        for (;;) {
          const next = cron.nextRun(previous);
          if (!next || next.getTime() > to || (s.EndDate && next >= s.EndDate)) break;
          times.push(next.getTime());
          previous = next;
        }
      }
      for (const t of times) {
        const text = s.Target!.Input!.replace("<aws.scheduler.scheduled-time>", new Date(t).toISOString().replace(".000Z", "Z"));
        out.push([t, key, JSON.parse(text) as Json]);
      }
    }
    return out.sort((a, b) => a[0] - b[0]);
  }
}

function awsHarness(): Harness & { fake: FakeSchedulerClient } {
  const fake = new FakeSchedulerClient();
  const scheduler: EventBridgeScheduler = createEventBridgeScheduler({
    fire: fireTimeTrigger,
    client: fake as never,
    groupName: GROUP,
    targetArn: TARGET,
    roleArn: ROLE,
    deadLetterArn: DLQ,
  });
  const last = new Map<string, Json>();
  const deliver = async (input: Json, now: number): Promise<Fired> => {
    last.set(String(input.workflowId), input);
    const result = await scheduler.deliver(input, now);
    return {
      workflowId: String(input.workflowId),
      instant: typeof input.instant === "number" ? input.instant : Date.parse(input.instant),
      result,
    };
  };
  /** Delivers what is due up to `to`; each at its time, or all at `to` after an outage (EventBridge retrying). */
  const deliverUpTo = async (to: number, late: boolean) => {
    const fired: Fired[] = [];
    for (;;) {
      const [next] = fake.due(clock, to);
      if (!next) break;
      const [t, key, input] = next;
      const schedule = fake.schedules.get(key)!;
      if (schedule.ActionAfterCompletion === "DELETE") fake.schedules.delete(key);
      if (late) {
        // Retries stop at the schedule's maximum event age; then the event goes to the dead-letter queue.
        const maxAgeMs = schedule.Target!.RetryPolicy!.MaximumEventAgeInSeconds! * 1000;
        if (to - t > maxAgeMs) {
          fake.deadLettered.push(key);
          clock = Math.max(clock, t);
          continue;
        }
        clock = Math.max(clock, t);
        const now = clock;
        clock = to;
        fired.push(await deliver(input, to));
        clock = now;
      } else {
        clock = t;
        fired.push(await deliver(input, t));
      }
    }
    clock = to;
    return fired;
  };
  return {
    fake,
    scheduler,
    runUntil: (t) => deliverUpTo(t, false),
    outageUntil: (t) => deliverUpTo(t, true),
    async redeliverLast(workflowId) {
      return [await deliver(last.get(workflowId)!, clock)];
    },
    async scheduled(workflowId) {
      return [...fake.schedules.keys()].filter((k) => k.startsWith(`${GROUP}/${workflowId}-`));
    },
  };
}

// ---------------------------------------------------------------------------------------------------------

const code = (id: string) => ({ id, name: id, type: "customCode", config: { source: "return 1" } });

const executionCount = async (who: Owner, id: string) => (await call(who, "GET", `/workflows/${id}`)).body.executionCount as number;
const firedInstants = (fired: Fired[], workflowId: string) =>
  fired.filter((f) => f.workflowId === workflowId && f.result.outcome === "fired").map((f) => f.instant);

/** HTTP calls are made at a clock near the real one (the sign-in token's lifetime); the runs move it freely. */
const atRealTime = () => {
  clock = Math.max(clock, Date.now());
};

describe.each([
  ["local", localHarness],
  ["EventBridge", awsHarness],
] as const)("scheduler contract: %s adapter", (_name, makeHarness) => {
  let harness: Harness;
  let who: Owner;

  beforeAll(async () => {
    harness = makeHarness();
    setScheduler(harness.scheduler);
    atRealTime();
    who = await ownerWithWallet(_name === "local" ? "11" : "12");
  });

  it("fires a cron in its time zone across daylight-saving changes: a skipped local time does not fire, a repeated one fires once", async () => {
    atRealTime();
    const start = clock;
    // New York: 2027-03-14 02:00 EST jumps to 03:00 EDT; 2027-11-07 01:00-02:00 happens twice (EDT, then EST).
    const spring = await createWorkflow(who, {
      trigger: trigger("cron", { schedules: ["30 2 * * *"], timezone: "America/New_York" }),
      startAt: Date.parse("2027-03-13T05:00:00Z"),
      expiredAt: Date.parse("2027-03-16T04:00:00Z"),
    });
    const autumn = await createWorkflow(who, {
      trigger: trigger("cron", { schedules: ["30 1 * * *"], timezone: "America/New_York" }),
      startAt: Date.parse("2027-11-06T04:00:00Z"),
      expiredAt: Date.parse("2027-11-09T05:00:00Z"),
    });
    const fired = await harness.runUntil(Date.parse("2027-11-10T00:00:00Z"));
    expect(firedInstants(fired, spring.id).map((t) => new Date(t).toISOString())).toEqual([
      "2027-03-13T07:30:00.000Z", // 02:30 EST
      "2027-03-15T06:30:00.000Z", // 02:30 EDT; 2027-03-14 02:30 does not exist
    ]);
    expect(firedInstants(fired, autumn.id).map((t) => new Date(t).toISOString())).toEqual([
      "2027-11-06T05:30:00.000Z", // 01:30 EDT
      "2027-11-07T05:30:00.000Z", // 01:30 EDT, the first pass; 01:30 EST (06:30Z) does not fire
      "2027-11-08T06:30:00.000Z", // 01:30 EST
    ]);
    // Whatever a scheduler delivers in the gap (03:00 EDT for the skipped 02:30) or the second pass (01:30 EST)
    // is not a §8.3.3 instant and runs nothing.
    for (const f of fired.filter((f) => f.result.outcome !== "fired"))
      expect(f.result).toEqual({ outcome: "skipped", reason: "NOT_A_FIRE_INSTANT", stop: false });
    // The fake EventBridge reads its cron like Vixie cron, so it did deliver the skipped 02:30 at 03:00 EDT.
    if (_name === "EventBridge")
      expect(fired.some((f) => f.instant === Date.parse("2027-03-14T07:00:00Z") && f.result.outcome === "skipped")).toBe(true);
    for (const [workflowId, iso] of [
      [spring.id, "2027-03-14T07:00:00Z"],
      [spring.id, "2027-03-14T07:30:00Z"],
      [autumn.id, "2027-11-07T06:30:00Z"],
    ] as const) {
      const instant = Date.parse(iso);
      clock = instant;
      expect(await fireTimeTrigger({ workflowId, triggerId: "t", instant, now: instant })).toEqual({
        outcome: "skipped",
        reason: "NOT_A_FIRE_INSTANT",
        stop: false,
      });
    }
    await bus.idle();
    clock = start;
    expect(await executionCount(who, spring.id)).toBe(2);
    expect(await executionCount(who, autumn.id)).toBe(3);
    // The execution's trigger step carries the scheduled instant (§8.3.6).
    const first = fired.find((f) => f.workflowId === spring.id && f.result.outcome === "fired")!;
    const execution = await call(
      who,
      "GET",
      `/executions/${(first.result as { executionId: string }).executionId}?workflowId=${spring.id}`,
    );
    expect(execution.status).toBe(200);
    expect(execution.body.steps[0].output).toEqual({
      data: { timestamp: first.instant, timestampIso: new Date(first.instant).toISOString() },
    });
    expect(execution.body.status).toBe("success");
  });

  it("fires each distinct fixedTime epoch once", async () => {
    atRealTime();
    const t0 = Math.ceil(clock / MIN) * MIN;
    const epochs = [t0 + 10 * MIN, t0 + 20 * MIN, t0 + 20 * MIN, t0 + 40 * MIN + 123, t0 + 50 * MIN, t0 + 70 * MIN];
    const wf = await createWorkflow(who, { trigger: trigger("fixedTime", { epochs }) });
    const fired = await harness.runUntil(t0 + 2 * HOUR);
    expect(firedInstants(fired, wf.id)).toEqual([t0 + 10 * MIN, t0 + 20 * MIN, t0 + 40 * MIN + 123, t0 + 50 * MIN, t0 + 70 * MIN]);
    expect(fired.filter((f) => f.workflowId === wf.id && f.result.outcome !== "fired")).toEqual([]);
    expect(await harness.scheduled(wf.id)).toEqual([]);
    await bus.idle();
    expect(await executionCount(who, wf.id)).toBe(5);
  });

  it("stops on pause and does not replay missed fires on resume", async () => {
    atRealTime();
    const t0 = Math.ceil(clock / HOUR) * HOUR;
    const wf = await createWorkflow(who, { trigger: trigger("cron", { schedules: ["*/5 * * * *"] }) });
    const before = firedInstants(await harness.runUntil(t0 + 12 * MIN), wf.id);
    expect(before.filter((t) => t > t0)).toEqual([t0 + 5 * MIN, t0 + 10 * MIN]);

    expect((await call(who, "POST", `/workflows/${wf.id}:pause`)).status).toBe(200);
    expect(await harness.scheduled(wf.id)).toEqual([]);
    expect(firedInstants(await harness.runUntil(t0 + 33 * MIN), wf.id)).toEqual([]);

    const resumed = await call(who, "POST", `/workflows/${wf.id}:resume`);
    expect(resumed.status).toBe(200);
    expect(resumed.body.status).toBe("enabled");
    // 15, 20, 25 and 30 are within the grace of the resume but were missed while disabled: never replayed.
    expect(firedInstants(await harness.runUntil(t0 + 44 * MIN), wf.id)).toEqual([t0 + 35 * MIN, t0 + 40 * MIN]);
    await bus.idle();
    expect(await executionCount(who, wf.id)).toBe(before.length + 2);
    await call(who, "DELETE", `/workflows/${wf.id}`);
    expect(await harness.scheduled(wf.id)).toEqual([]);
  });

  it("makes one execution of a fire delivered twice", async () => {
    atRealTime();
    const t0 = Math.ceil(clock / MIN) * MIN;
    const wf = await createWorkflow(who, { trigger: trigger("fixedTime", { epochs: [t0 + 5 * MIN, t0 + 30 * MIN] }) });
    expect(firedInstants(await harness.runUntil(t0 + 6 * MIN), wf.id)).toEqual([t0 + 5 * MIN]);
    const again = await harness.redeliverLast(wf.id);
    expect(again.map((f) => [f.instant, f.result.outcome])).toEqual([[t0 + 5 * MIN, "duplicate"]]);
    await bus.idle();
    expect(await executionCount(who, wf.id)).toBe(1);
    await call(who, "DELETE", `/workflows/${wf.id}`);
  });

  it("runs a fire missed by an outage once when at most 15 minutes late and skips an older one", async () => {
    atRealTime();
    const t0 = Math.ceil(clock / MIN) * MIN;
    const [e1, e2, e3] = [t0 + 30 * MIN, t0 + 90 * MIN, t0 + 150 * MIN];
    const wf = await createWorkflow(who, { trigger: trigger("fixedTime", { epochs: [e1, e2, e3] }) });
    const late = await harness.outageUntil(e1 + 10 * MIN);
    expect(firedInstants(late, wf.id)).toEqual([e1]);
    const older = await harness.outageUntil(e2 + 20 * MIN);
    expect(firedInstants(older, wf.id)).toEqual([]);
    // Delivered anyway (a dead-letter redrive, a slow retry), it is skipped as missed.
    expect(await fireTimeTrigger({ workflowId: wf.id, triggerId: "t", instant: e2, now: e2 + 20 * MIN })).toEqual({
      outcome: "skipped",
      reason: "MISSED",
      stop: false,
    });
    // Later fires are unaffected.
    expect(firedInstants(await harness.runUntil(e3 + MIN), wf.id)).toEqual([e3]);
    await bus.idle();
    expect(await executionCount(who, wf.id)).toBe(2);
  });
});

describe("local scheduler", () => {
  it("resumes from the table after a restart: a new instance fires what is due, once", async () => {
    const first = setScheduler(createLocalScheduler(fireTimeTrigger));
    atRealTime();
    const who = await ownerWithWallet("13");
    const t0 = Math.ceil(clock / MIN) * MIN;
    const wf = await createWorkflow(who, { trigger: trigger("fixedTime", { epochs: [t0 + 5 * MIN, t0 + 10 * MIN] }) });
    expect(firedInstants(await first.tick(t0 + 5 * MIN), wf.id)).toEqual([t0 + 5 * MIN]);
    // The process stops; seven minutes later a new one starts on the same table.
    const second = setScheduler(createLocalScheduler(fireTimeTrigger));
    clock = t0 + 12 * MIN;
    expect(firedInstants(await second.tick(clock), wf.id)).toEqual([t0 + 10 * MIN]);
    expect(firedInstants(await second.tick(clock), wf.id)).toEqual([]);
    expect(firedInstants(await first.tick(clock), wf.id)).toEqual([]);
    await bus.idle();
    expect(await executionCount(who, wf.id)).toBe(2);
  });

  it("fires on the real clock from its loop, and stops with it", async () => {
    runtime.now = Date.now;
    try {
      const scheduler = setScheduler(createLocalScheduler(fireTimeTrigger));
      const who = await ownerWithWallet("16");
      const epoch = Date.now() + 1_500;
      const wf = await createWorkflow(who, { trigger: trigger("fixedTime", { epochs: [epoch, epoch + 3_600_000] }) });
      scheduler.start();
      for (let i = 0; i < 60 && (await executionCount(who, wf.id)) === 0; i++) await new Promise((r) => setTimeout(r, 100));
      await scheduler.stop();
      expect(Date.now()).toBeGreaterThanOrEqual(epoch);
      expect(await executionCount(who, wf.id)).toBe(1);
      await bus.idle();
      const list = await call(who, "GET", `/workflows/${wf.id}/executions`);
      expect(list.status).toBe(200);
      expect(list.body.data).toHaveLength(1);
      expect(list.body.data[0].status).toBe("success");
    } finally {
      runtime.now = () => clock;
    }
  });
});

describe("EventBridge requests", () => {
  it("converts 5-field expressions: descriptors, names, day of week 0 and 7, steps; both day fields restricted cannot be written", () => {
    expect(toEventBridgeCron("@daily")).toBe("cron(0 0 * * ? *)");
    expect(toEventBridgeCron("@hourly")).toBe("cron(0 * * * ? *)");
    expect(toEventBridgeCron("@weekly")).toBe("cron(0 0 ? * 1 *)");
    expect(toEventBridgeCron("@monthly")).toBe("cron(0 0 1 * ? *)");
    expect(toEventBridgeCron("@yearly")).toBe(toEventBridgeCron("@annually"));
    expect(toEventBridgeCron("@yearly")).toBe("cron(0 0 1 1 ? *)");
    expect(toEventBridgeCron("*/15 9-17 * * MON-FRI")).toBe("cron(0,15,30,45 9-17 ? * 2-6 *)");
    expect(toEventBridgeCron("0 12 * * 0")).toBe(toEventBridgeCron("0 12 * * 7"));
    expect(toEventBridgeCron("0 12 * * 5-7")).toBe("cron(0 12 ? * 1,6-7 *)");
    expect(toEventBridgeCron("0 0 1,15 jan-mar *")).toBe("cron(0 0 1,15 1-3 ? *)");
    expect(toEventBridgeCron("0 0 1 * MON")).toBeUndefined();
  });

  it("creates one schedule per cron expression with the time zone, window, retries and dead-letter queue; deletes them on pause", async () => {
    const harness = awsHarness();
    setScheduler(harness.scheduler);
    atRealTime();
    const who = await ownerWithWallet("14");
    const startAt = clock + 2 * HOUR;
    const expiredAt = clock + 30 * 24 * HOUR;
    const wf = await createWorkflow(who, {
      trigger: trigger("cron", { schedules: ["0 9 * * MON-FRI", "@daily"], timezone: "Europe/Berlin" }),
      startAt,
      expiredAt,
    });
    const common = {
      GroupName: GROUP,
      ScheduleExpressionTimezone: "Europe/Berlin",
      FlexibleTimeWindow: { Mode: "OFF" },
      State: "ENABLED",
      StartDate: new Date(startAt),
      EndDate: new Date(expiredAt),
      ActionAfterCompletion: "NONE",
    };
    const target = {
      Arn: TARGET,
      RoleArn: ROLE,
      Input: JSON.stringify({ workflowId: wf.id, triggerId: "t", instant: "<aws.scheduler.scheduled-time>" }),
      RetryPolicy: { MaximumEventAgeInSeconds: 900, MaximumRetryAttempts: 10 },
      DeadLetterConfig: { Arn: DLQ },
    };
    expect(harness.fake.requests).toEqual([
      {
        command: "CreateSchedule",
        input: { Name: `${wf.id}-cron-0`, ScheduleExpression: "cron(0 9 ? * 2-6 *)", ...common, Target: target },
      },
      { command: "CreateSchedule", input: { Name: `${wf.id}-cron-1`, ScheduleExpression: "cron(0 0 * * ? *)", ...common, Target: target } },
    ]);
    harness.fake.requests.length = 0;
    expect((await call(who, "POST", `/workflows/${wf.id}:pause`)).status).toBe(200);
    expect(harness.fake.requests).toEqual([
      { command: "DeleteSchedule", input: { Name: `${wf.id}-cron-0`, GroupName: GROUP } },
      { command: "DeleteSchedule", input: { Name: `${wf.id}-cron-1`, GroupName: GROUP } },
    ]);
    // Resumed after startAt: EventBridge refuses a start date in the past, and none is needed.
    harness.fake.requests.length = 0;
    clock = startAt + HOUR;
    expect((await call(who, "POST", `/workflows/${wf.id}:resume`)).status).toBe(200);
    const { StartDate: _, ...started } = common;
    expect(harness.fake.requests).toEqual([
      {
        command: "CreateSchedule",
        input: { Name: `${wf.id}-cron-0`, ScheduleExpression: "cron(0 9 ? * 2-6 *)", ...started, Target: target },
      },
      {
        command: "CreateSchedule",
        input: { Name: `${wf.id}-cron-1`, ScheduleExpression: "cron(0 0 * * ? *)", ...started, Target: target },
      },
    ]);
  });

  it("keeps one-time schedules for a cron whose day fields are both restricted, refreshed on each fire", async () => {
    const harness = awsHarness();
    setScheduler(harness.scheduler);
    atRealTime();
    const who = await ownerWithWallet("15");
    // Either the 13th or a Friday, at noon UTC.
    const wf = await createWorkflow(who, { trigger: trigger("cron", { schedules: ["0 12 13 * FRI"] }) });
    const creates = harness.fake.requests.filter((r) => r.command === "CreateSchedule").map((r) => r.input);
    expect(creates).toHaveLength(ONE_TIME_WINDOW);
    for (const c of creates) {
      const instant = JSON.parse(String((c.Target as Json).Input)).instant as number;
      expect(c.ScheduleExpression).toBe(`at(${new Date(instant).toISOString().slice(0, 19)})`);
      expect(c.ActionAfterCompletion).toBe("DELETE");
      expect(c.ScheduleExpressionTimezone).toBe("UTC");
      const day = new Date(instant);
      expect(day.getUTCHours()).toBe(12);
      expect(day.getUTCDate() === 13 || day.getUTCDay() === 5).toBe(true);
    }
    const fired = await harness.runUntil(clock + 40 * 24 * HOUR);
    const instants = firedInstants(fired, wf.id);
    expect(instants.length).toBeGreaterThanOrEqual(5);
    for (const t of instants) expect(new Date(t).getUTCDate() === 13 || new Date(t).getUTCDay() === 5).toBe(true);
    expect(await harness.scheduled(wf.id)).toHaveLength(ONE_TIME_WINDOW);
    await bus.idle();
  });
});

describe("npm start", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "wa-schedule-"));
  let child: ChildProcess | undefined;
  afterAll(async () => {
    if (child && !exited(child)) {
      child.kill("SIGINT");
      // npm start stops its components before it exits; only then is its data directory removed.
      await waitFor("npm start to exit", () => exited(child!), { timeoutMs: 10_000 }).catch(() => undefined);
    }
    rmSync(dataDir, { recursive: true, force: true });
  });

  it(
    "stopped and started again keeps firing a fixedTime workflow and a block workflow: no duplicate, no loss",
    { timeout: 240_000 },
    async () => {
      const port = await freePort();
      const base = `http://127.0.0.1:${port}`;
      const start = async () => {
        const proc = spawn(process.execPath, ["--import", "tsx", "local/start.ts"], {
          env: { ...process.env, PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: "warn", MIN_BLOCK_INTERVAL_S: "0" },
          stdio: ["ignore", "pipe", "pipe"],
        });
        let output = "";
        proc.stdout!.on("data", (d) => (output += d));
        proc.stderr!.on("data", (d) => (output += d));
        const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
        for (let i = 0; i < 1200 && !output.includes("listening on"); i++) await new Promise((r) => setTimeout(r, 100));
        if (!output.includes("listening on")) throw new Error(`npm start did not come up:\n${output}`);
        child = proc;
        return { stop: async () => (proc.kill("SIGINT"), exited) };
      };
      const first = await start();
      const token = await signInWithAccount(base, privateKeyToAccount(generatePrivateKey()));
      const json = async (method: string, path: string, body?: unknown) => {
        const res = await fetch(base + path, {
          method,
          headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return { status: res.status, body: (await res.json()) as Json };
      };
      const wallet = (await json("POST", "/wallets", { salt: "1" })).body.address as string;
      // A block workflow beside it: every 2nd block of the devnet (one block every 2 s, kept across restarts).
      const blocks = await json("POST", "/workflows", {
        smartWalletAddress: wallet,
        trigger: { id: "b", name: "blocks", type: "block", config: { interval: 2 } },
        nodes: [code("n")],
      });
      expect(blocks.status, JSON.stringify(blocks.body)).toBe(201);
      const blockRuns = async () => {
        const res = await json("GET", `/workflows/${blocks.body.id as string}/executions?limit=200`);
        expect(res.status).toBe(200);
        return (res.body.data as Json[]).map((e) => e.steps[0].output.data.blockNumber as number).sort((a, b) => a - b);
      };
      const e1 = Date.now() + 3_000;
      const e2 = e1 + 12_000;
      const created = await json("POST", "/workflows", {
        smartWalletAddress: wallet,
        trigger: { id: "t", name: "tick", type: "fixedTime", config: { epochs: [e1, e2] } },
        nodes: [code("n")],
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const id = created.body.id as string;
      const count = async () => (await json("GET", `/workflows/${id}`)).body.executionCount as number;
      for (let i = 0; i < 200 && (await count()) < 1; i++) await new Promise((r) => setTimeout(r, 100));
      expect(await count()).toBe(1);
      for (let i = 0; i < 200 && (await blockRuns()).length < 2; i++) await new Promise((r) => setTimeout(r, 100));
      const beforeStop = await blockRuns();
      expect(beforeStop.length).toBeGreaterThanOrEqual(2);
      expect(await first.stop()).toBe(0);
      expect(Date.now()).toBeLessThan(e2); // the first process never saw e2 due

      // e2 passes while the service is down; it is at most 15 minutes late when the service is back.
      await new Promise((r) => setTimeout(r, Math.max(0, e2 + 1_000 - Date.now())));
      const second = await start();
      for (let i = 0; i < 100 && (await count()) < 2; i++) await new Promise((r) => setTimeout(r, 100));

      // The block workflow goes on from where the first process stopped: at least 3 more fires after the restart.
      const lastBefore = (await blockRuns()).at(-1)!;
      for (let i = 0; i < 300 && (await blockRuns()).filter((b) => b > lastBefore).length < 3; i++)
        await new Promise((r) => setTimeout(r, 100));
      // Those fires (seconds) were also the time for a duplicate of e2 to show, if there were one.
      const executions = await json("GET", `/workflows/${id}/executions`);
      expect(executions.status).toBe(200);
      expect((executions.body.data as Json[]).map((e) => e.index as number).sort()).toEqual([0, 1]);
      expect(await count()).toBe(2);
      const fired = await blockRuns();
      expect(await second.stop()).toBe(0);
      expect(fired.filter((b) => b > lastBefore).length).toBeGreaterThanOrEqual(3);
      // Every multiple of 2 from the first fire to the last, exactly once: no duplicate, nothing lost across the restart.
      const expected = Array.from({ length: (fired.at(-1)! - fired[0]!) / 2 + 1 }, (_, i) => fired[0]! + 2 * i);
      expect(fired[0]! % 2).toBe(0);
      expect(fired).toEqual(expected);
      expect(fired.slice(0, beforeStop.length)).toEqual(beforeStop);
    },
  );
});
