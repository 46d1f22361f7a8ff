// The event bus (shared/execution/bus.ts): `:trigger` (and the automatic fires) publish `execution.requested`;
// a rule on the app's bus targets the runner function. EventBridge invokes Lambda asynchronously, so failures are
// retried twice: by EventBridge when the invocation itself fails (throttling, permissions), by Lambda when the
// function throws. What is still undelivered lands in the dead-letter queue for an operator. A re-delivery is
// harmless: the runner is idempotent per execution id.
import { table } from "./table";
import { keyPermissions, controllerKey, secretsKey } from "./keys";
import { jwtSigningKey, chains } from "./secrets";

export const bus = new sst.aws.Bus("Bus");

export const runnerDeadLetters = new sst.aws.Queue("RunnerDeadLetters", {
  transform: { queue: { messageRetentionSeconds: 14 * 24 * 3600 } },
});

// EventBridge (the rule's dead-letter config) and Lambda (failed asynchronous invocations) both write to it.
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
    link: [table, jwtSigningKey, bus, runnerDeadLetters],
    environment: { SECRETS_KMS_KEY_ID: secretsKey.arn, CONTROLLER_KMS_KEY_ID: controllerKey.arn, CHAINS: chains.value },
    permissions: [keyPermissions.secrets, keyPermissions.controller],
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
