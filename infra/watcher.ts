// The chain watcher (functions/watcher.ts): started every minute, it keeps polling the configured chains until
// just before the next start, so block and event fires follow their block by about one block time. A lease on
// each chain's checkpoint keeps two overlapping invocations off the same blocks; the fire record of each claim
// makes a repeated range harmless anyway.
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
export const watcherFailures = new sst.aws.Queue("WatcherFailures", {
  transform: { queue: { messageRetentionSeconds: 14 * 24 * 3600 } },
});

export const watcher = new sst.aws.Cron("ChainWatcher", {
  schedule: "rate(1 minute)",
  function: {
    handler: "functions/watcher.handler",
    runtime: "nodejs22.x",
    architecture: "arm64",
    memory: "512 MB",
    // Polls for about 55 s; the margin lets a slow last pass finish and release its leases.
    timeout: "70 seconds",
    link: [table, chains, runnerQueue],
    // Claims and publishes fires and reads chains; it never signs nor decrypts. A fire that reaches a workflow's
    // maxExecution completes it, which removes its schedules.
    environment: { ...keyEnvironment, ...schedulerEnvironment },
    permissions: [...schedulerPermissions.stop, { actions: ["sqs:SendMessage"], resources: [watcherFailures.arn] }],
  },
});

new aws.lambda.FunctionEventInvokeConfig("WatcherInvokeConfig", {
  functionName: watcher.nodes.function.name,
  maximumRetryAttempts: 0,
  destinationConfig: { onFailure: { destination: watcherFailures.arn } },
});
