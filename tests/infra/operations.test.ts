/**
 * What an operator of a stage gets (infra/tracing.ts, infra/alarms.ts, the workers' failure destinations), read
 * from the resource graph that `sst.config.ts` builds without AWS (tests/infra/graph.ts).
 */
import { FUNCTIONS, SERVICE_FUNCTIONS } from "./functions";
import { describe, expect, it } from "vitest";
import { stageGraph } from "./graph";

const { ofType, one } = stageGraph();
const alarms = () => ofType("aws:cloudwatch/metricAlarm:MetricAlarm");
const alarmOn = (metric: string, dimensions: Record<string, unknown>) =>
  alarms().filter(
    (a) =>
      a.inputs.metricName === metric &&
      Object.entries(dimensions).every(([k, v]) => (a.inputs.dimensions as Record<string, unknown> | undefined)?.[k] === v),
  );

const lambdaOf = (id: string) => one("aws:lambda/function:Function", `${id}Function`);

describe("every function", () => {
  it("traces actively (X-Ray), with the managed policy that lets it write segments", () => {
    for (const id of SERVICE_FUNCTIONS) {
      expect(lambdaOf(id).inputs.tracingConfig, id).toEqual({ mode: "Active" });
      const managed = (one("aws:iam/role:Role", `${id}Role`).inputs.managedPolicyArns ?? []) as string[];
      expect(managed, id).toContain("arn:aws:iam::aws:policy/AWSXRayDaemonWriteAccess");
    }
  });

  it("writes its metrics under the stage's namespace", () => {
    for (const id of SERVICE_FUNCTIONS) {
      const variables = (lambdaOf(id).inputs.environment as { variables: Record<string, string> }).variables;
      expect(variables.METRICS_NAMESPACE, id).toBe("workflow-automation/test");
    }
  });

  it("raises an alarm on its errors and on its throttles (the sandbox function's too)", () => {
    for (const id of Object.keys(FUNCTIONS)) {
      const name = lambdaOf(id).inputs.name;
      for (const metric of ["Errors", "Throttles"]) {
        const [alarm] = alarmOn(metric, { FunctionName: name });
        expect(alarm?.inputs.namespace, `${id} ${metric}`).toBe("AWS/Lambda");
        expect(alarm?.inputs.threshold, `${id} ${metric}`).toBe(1);
      }
    }
  });
});

describe("asynchronous invocations", () => {
  it("end in a failure destination when they fail: the schedule target in its dead-letter queue", () => {
    // The runner is invoked by its queue's event source mapping, not asynchronously: its queue's redrive
    // policy is its dead-letter destination (tests/infra/fairness.test.ts).
    expect(lambdaOf("ScheduleTarget").inputs.deadLetterConfig).toBeTruthy();
  });

  it("send the watcher's and the sweeper's failed invocations to their own queues, not retried (the next minute is)", () => {
    for (const [config, fn, queue] of [
      ["WatcherInvokeConfig", "ChainWatcherHandler", "WatcherFailuresQueue"],
      ["SweeperInvokeConfig", "WithdrawalFollowUpHandler", "SweeperFailuresQueue"],
    ] as const) {
      const invoke = one("aws:lambda/functionEventInvokeConfig:FunctionEventInvokeConfig", config);
      expect(invoke.inputs.functionName).toBe(lambdaOf(fn).inputs.name);
      expect(invoke.inputs.maximumRetryAttempts).toBe(0);
      const destination = (invoke.inputs.destinationConfig as { onFailure: { destination: string } }).onFailure.destination;
      const queueName = String(one("aws:sqs/queue:Queue", queue).inputs.name);
      expect(destination).toBe(`arn:aws:sqs:us-east-1:123456789012:${queueName}`);
    }
  });
});

describe("alarms", () => {
  it("page through one topic, when raised and when cleared, and never on missing data", () => {
    const [topic] = ofType("aws:sns/topic:Topic");
    expect(topic).toBeTruthy();
    expect(alarms().length).toBeGreaterThan(20);
    for (const alarm of alarms()) {
      expect((alarm.inputs.alarmActions as string[]).length, alarm.name).toBe(1);
      expect(alarm.inputs.okActions, alarm.name).toEqual(alarm.inputs.alarmActions);
      expect(alarm.inputs.treatMissingData, alarm.name).toBe("notBreaching");
    }
  });

  it("watch every dead-letter queue for a single message", () => {
    const queues = ofType("aws:sqs/queue:Queue").filter((q) => q.name !== "RunnerQueueQueue");
    expect(queues.map((q) => q.name).sort()).toEqual([
      "RunnerDeadLettersQueue",
      "ScheduleDeadLettersQueue",
      "SweeperFailuresQueue",
      "WatcherFailuresQueue",
    ]);
    for (const queue of queues) {
      const [alarm] = alarmOn("ApproximateNumberOfMessagesVisible", { QueueName: queue.inputs.name });
      expect(alarm?.inputs, queue.name).toMatchObject({ namespace: "AWS/SQS", statistic: "Maximum", threshold: 1 });
    }
  });

  it("watch the API's 5xx answers, the table's and each index's throttles, the scheduler's failures and the watcher's lag", () => {
    expect(alarmOn("5xx", { Stage: "$default" })).toHaveLength(1);
    expect(alarmOn("ReadThrottleEvents", {})).toHaveLength(1);
    expect(alarmOn("WriteThrottleEvents", {})).toHaveLength(4);
    for (const index of ["gsi1", "gsi2", "gsi3"])
      expect(alarmOn("WriteThrottleEvents", { GlobalSecondaryIndexName: index })).toHaveLength(1);
    // The due-key index holds keys only (a write that keeps an execution's keys costs it nothing: bench/keys.ts).
    const indexes = ofType("aws:dynamodb/table:Table")[0]!.inputs.globalSecondaryIndexes as { name: string; projectionType: string }[];
    expect(Object.fromEntries(indexes.map((i) => [i.name, i.projectionType]))).toEqual({
      gsi1: "KEYS_ONLY",
      gsi2: "ALL",
      gsi3: "KEYS_ONLY",
    });
    for (const metric of ["TargetErrorCount", "InvocationDroppedCount"]) {
      const [alarm] = alarmOn(metric, { ScheduleGroup: "workflow-automation-test" });
      expect(alarm?.inputs.namespace, metric).toBe("AWS/Scheduler");
    }
    const [lag] = alarmOn("WatcherLagBlocks", {});
    expect(lag?.inputs).toMatchObject({ namespace: "workflow-automation/test", statistic: "Maximum", evaluationPeriods: 5 });
  });
});
