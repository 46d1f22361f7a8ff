// What pages an operator: one SNS topic (subscribe an address or a chat hook to it once per stage; docs/deploy.md,
// "Runbook", says what each alarm means and what to do). Every alarm also reports when it clears. Missing data is
// not breaching: a quiet stage is a healthy one.
import { table } from "./table";
import { api, core, executions, secrets, wallets, workflows } from "./api";
import { stream } from "./stream";
import { runner } from "./runner";
import { runnerDeadLetters, runnerQueue } from "./bus";
import { scheduleDeadLetters, scheduleGroup, scheduleTarget } from "./scheduler";
import { watcher, watcherFailures } from "./watcher";
import { sweeper, sweeperFailures } from "./sweeper";
import { sandbox } from "./sandbox";
import { metricsNamespace } from "./stage";

export const alarmTopic = new sst.aws.SnsTopic("Alarms");

interface Watch {
  namespace: string;
  metric: string;
  dimensions?: Record<string, $util.Input<string>>;
  statistic?: "Sum" | "Maximum";
  /** Breaches at or above this value. */
  threshold: number;
  periodSeconds?: number;
  /** Consecutive breaching periods before the alarm fires. */
  periods?: number;
}

function alarm(name: string, description: string, watch: Watch) {
  return new aws.cloudwatch.MetricAlarm(`Alarm${name}`, {
    alarmDescription: description,
    namespace: watch.namespace,
    metricName: watch.metric,
    dimensions: watch.dimensions,
    statistic: watch.statistic ?? "Sum",
    period: watch.periodSeconds ?? 300,
    evaluationPeriods: watch.periods ?? 1,
    threshold: watch.threshold,
    comparisonOperator: "GreaterThanOrEqualToThreshold",
    treatMissingData: "notBreaching",
    alarmActions: [alarmTopic.arn],
    okActions: [alarmTopic.arn],
  });
}

// Dead letters: a run, a time fire or a worker's invocation that nothing will retry.
const deadLetters = {
  Runner: runnerDeadLetters,
  Schedule: scheduleDeadLetters,
  Watcher: watcherFailures,
  Sweeper: sweeperFailures,
};
for (const [name, queue] of Object.entries(deadLetters))
  alarm(`${name}DeadLetters`, `${name}: a delivery gave up and is waiting in its dead-letter queue (runbook: redrive)`, {
    namespace: "AWS/SQS",
    metric: "ApproximateNumberOfMessagesVisible",
    dimensions: { QueueName: queue.nodes.queue.name },
    statistic: "Maximum",
    threshold: 1,
  });

// The runner queue: runs waiting longer than a minute mean the runner's concurrency cap (infra/runner.ts) is short.
alarm("RunnerBacklog", "Runner: the oldest queued run waited a minute or more, three minutes running", {
  namespace: "AWS/SQS",
  metric: "ApproximateAgeOfOldestMessage",
  dimensions: { QueueName: runnerQueue.nodes.queue.name },
  statistic: "Maximum",
  threshold: 60,
  periodSeconds: 60,
  periods: 3,
});

// Functions: an error is an exception that escaped a handler (the HTTP apps answer problems themselves, so
// even one means a fault); a throttle means the account's or the function's concurrency ran out.
const functions = {
  Core: core.nodes.function.name,
  Secrets: secrets.nodes.function.name,
  Wallets: wallets.nodes.function.name,
  Workflows: workflows.nodes.function.name,
  Executions: executions.nodes.function.name,
  Stream: stream.nodes.function.name,
  Runner: runner.nodes.function.name,
  ScheduleTarget: scheduleTarget.nodes.function.name,
  Watcher: watcher.nodes.function.name,
  Sweeper: sweeper.nodes.function.name,
  // A script's own errors are answers; an error here is an instance that crashed or ran past its timeout.
  Sandbox: sandbox.nodes.function.name,
};
for (const [name, functionName] of Object.entries(functions)) {
  const dimensions = { FunctionName: functionName };
  alarm(`${name}Errors`, `${name}: invocations failed with an error`, {
    namespace: "AWS/Lambda",
    metric: "Errors",
    dimensions,
    threshold: 1,
  });
  alarm(`${name}Throttles`, `${name}: invocations were throttled (concurrency exhausted)`, {
    namespace: "AWS/Lambda",
    metric: "Throttles",
    dimensions,
    threshold: 1,
  });
}

// The API: answers of 500 and more (a 503 for a lease or a dependency counts too).
alarm("Api5xx", "API: five or more 5xx answers in 5 minutes", {
  namespace: "AWS/ApiGateway",
  metric: "5xx",
  dimensions: { ApiId: api.nodes.api.id, Stage: "$default" },
  threshold: 5,
});

// The table and its indexes: a throttle is a request DynamoDB refused for capacity (a hot key, or a burst).
const tableName = table.nodes.table.name;
for (const kind of ["Read", "Write"] as const) {
  alarm(`Table${kind}Throttles`, `Table: ${kind.toLowerCase()} requests throttled`, {
    namespace: "AWS/DynamoDB",
    metric: `${kind}ThrottleEvents`,
    dimensions: { TableName: tableName },
    threshold: 1,
  });
}
for (const index of ["gsi1", "gsi2", "gsi3"])
  alarm(`Table${index}WriteThrottles`, `Table index ${index}: writes throttled (they throttle the table's writes too)`, {
    namespace: "AWS/DynamoDB",
    metric: "WriteThrottleEvents",
    dimensions: { TableName: tableName, GlobalSecondaryIndexName: index },
    threshold: 1,
  });

// Time fires: the scheduler could not invoke the schedule target, or gave up on a fire.
for (const metric of ["TargetErrorCount", "InvocationDroppedCount"])
  alarm(`Scheduler${metric}`, `Scheduler: ${metric} in the stage's schedule group`, {
    namespace: "AWS/Scheduler",
    metric,
    dimensions: { ScheduleGroup: scheduleGroup.name },
    threshold: 1,
  });

// The watcher: how many blocks the least advanced workflow of a chain is behind the head (shared/watch/loop.ts),
// sustained for 5 minutes. One alarm per stage over the worst chain: chain ids are a dimension of the metric too.
alarm("WatcherLag", "Watcher: a chain's watched workflows are 100 or more blocks behind its head for 5 minutes", {
  namespace: metricsNamespace,
  metric: "WatcherLagBlocks",
  statistic: "Maximum",
  threshold: 100,
  periodSeconds: 60,
  periods: 5,
});
