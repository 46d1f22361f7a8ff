// The runner (functions/runner.ts): a rule on the app's bus sends each `execution.requested` to it. EventBridge
// invokes Lambda asynchronously, so failures are retried twice over: by EventBridge when the invocation itself
// fails (throttling, permissions), by Lambda when the function throws. What is still undelivered lands in the
// dead-letter queue for an operator. A re-delivery is harmless: the runner is idempotent per execution id.
import { table } from "./table";
import { keyEnvironment, keyPermissions } from "./kms";
import { chains } from "./secrets";
import { bus } from "./bus";
import { schedulerEnvironment, schedulerPermissions } from "./scheduler";
import { sandboxEnvironment, sandboxInvoke } from "./sandbox";

export const runnerDeadLetters = new sst.aws.Queue("RunnerDeadLetters", {
  transform: { queue: { messageRetentionSeconds: 14 * 24 * 3600 } },
});

// EventBridge (the rule's dead-letter config) writes here with this policy; Lambda (failed asynchronous
// invocations) with the function's role.
new aws.sqs.QueuePolicy("RunnerDeadLettersPolicy", {
  queueUrl: runnerDeadLetters.url,
  policy: $jsonStringify({
    Version: "2012-10-17",
    Statement: [
      {
        Effect: "Allow",
        Principal: { Service: "events.amazonaws.com" },
        Action: "sqs:SendMessage",
        Resource: runnerDeadLetters.arn,
      },
    ],
  }),
});

export const runner = bus.subscribe(
  "Runner",
  {
    handler: "functions/runner.handler",
    runtime: "nodejs22.x",
    architecture: "arm64",
    memory: "1024 MB",
    // A run may wait up to userop_receipt_wait_ms per on-chain step; the sweeper ends anything still pending
    // after execution_timeout_ms (15 min), which is also Lambda's limit.
    timeout: "15 minutes",
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
      { actions: ["sqs:SendMessage"], resources: [runnerDeadLetters.arn] },
    ],
    transform: {
      function: (args) => {
        args.deadLetterConfig = { targetArn: runnerDeadLetters.arn };
      },
    },
  },
  {
    pattern: { source: ["workflow-automation"], detailType: ["execution.requested"] },
    transform: {
      target: (args) => {
        args.retryPolicy = { maximumRetryAttempts: 8, maximumEventAgeInSeconds: 3600 };
        args.deadLetterConfig = { arn: runnerDeadLetters.arn };
      },
    },
  },
);
