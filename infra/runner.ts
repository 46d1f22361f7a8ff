// The runner (functions/runner.ts), fed through the runner queue (infra/bus.ts): an event source mapping hands its
// messages to the runner under a concurrency cap, so a burst of runs waits in the queue instead of taking the
// account's concurrency from the API (docs/deploy.md, "Fairness on AWS"). A message whose run threw comes back after
// the visibility timeout; after 3 receives it moves to the dead-letter queue for an operator. A re-delivery is
// harmless: the runner is idempotent per execution id.
import { table } from "./table";
import { keyEnvironment, keyPermissions } from "./kms";
import { chains } from "./secrets";
import { RUNNER_TIMEOUT_S, runnerQueue } from "./bus";
import { schedulerEnvironment, schedulerPermissions } from "./scheduler";
import { production } from "./stage";
import { sandboxEnvironment, sandboxInvoke } from "./sandbox";

export const runner = new sst.aws.Function("Runner", {
  handler: "functions/runner.handler",
  runtime: "nodejs22.x",
  architecture: "arm64",
  memory: "1024 MB",
  timeout: `${RUNNER_TIMEOUT_S} seconds`,
  link: [table, chains],
  // Runs decrypt secrets and sign; a run that waits seals its state under a fresh data key and opens it again
  // when it resumes (API.md §17.1); a run that completes its workflow (error limit) removes its schedules.
  environment: { ...keyEnvironment, ...schedulerEnvironment, ...sandboxEnvironment },
  permissions: [
    sandboxInvoke, // scripts run in the sandbox function (infra/sandbox.ts)
    keyPermissions.open,
    keyPermissions.seal,
    keyPermissions.sign,
    ...schedulerPermissions.stop,
    {
      actions: ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"],
      resources: [runnerQueue.arn],
    },
  ],
});

// One message per invocation: a run can wait minutes on a receipt, and a batch would hold the messages behind it.
// At most 200 runs at once in production (about 600 one-node runs a second at 300 ms each), 20 in a preview that
// shares the account; what is beyond waits in the queue. The cap leaves the API groups' floors and the stream's
// reservation (infra/api.ts, infra/stream.ts) whole within the account's 1,000 concurrent executions.
new aws.lambda.EventSourceMapping("RunnerEventSource", {
  eventSourceArn: runnerQueue.arn,
  functionName: runner.name,
  batchSize: 1,
  functionResponseTypes: ["ReportBatchItemFailures"],
  scalingConfig: { maximumConcurrency: production ? 200 : 20 },
});
