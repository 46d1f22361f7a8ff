// The sweeper (functions/sweeper.ts), every minute: follows pending withdrawals up with the bundler, ends
// executions pending past execution_timeout_ms, stores expired workflows completed (removing their schedules) and
// hands the runs of claims a crash interrupted to the runner through the bus.
import { table } from "./table";
import { keyEnvironment } from "./kms";
import { chains } from "./secrets";
import { runnerQueue } from "./bus";
import { schedulerEnvironment, schedulerPermissions } from "./scheduler";

/**
 * Where a failed invocation goes (an asynchronous invocation by the rule: Lambda's failure destination). It is not
 * retried: the next minute's invocation is the retry, and the lease or the conditional writes make an overlap
 * harmless. A message here means a whole invocation failed; infra/alarms.ts pages on it.
 */
export const sweeperFailures = new sst.aws.Queue("SweeperFailures", {
  transform: { queue: { messageRetentionSeconds: 14 * 24 * 3600 } },
});

export const sweeper = new sst.aws.Cron("WithdrawalFollowUp", {
  schedule: "rate(1 minute)",
  function: {
    handler: "functions/sweeper.handler",
    runtime: "nodejs22.x",
    architecture: "arm64",
    memory: "512 MB",
    timeout: "29 seconds",
    link: [table, chains, runnerQueue],
    environment: { ...keyEnvironment, ...schedulerEnvironment },
    // No KMS client in its bundle (tests/functions/bundles.test.ts): no key permission.
    permissions: [...schedulerPermissions.stop, { actions: ["sqs:SendMessage"], resources: [sweeperFailures.arn] }],
  },
});

new aws.lambda.FunctionEventInvokeConfig("SweeperInvokeConfig", {
  functionName: sweeper.nodes.function.name,
  maximumRetryAttempts: 0,
  destinationConfig: { onFailure: { destination: sweeperFailures.arn } },
});
