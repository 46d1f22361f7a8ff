// The runner (functions/runner.ts), fed through a queue: a rule on the app's bus puts each `execution.requested` into
// the runner queue, and an event source mapping hands its messages to the runner under a concurrency cap, so a
// burst of runs waits in the queue instead of taking the account's concurrency from the API (docs/deploy.md,
// "Fairness on AWS"). A message whose run threw comes back after the visibility timeout; after 3 receives it moves
// to the dead-letter queue for an operator, where the rule also puts what it could not deliver. A re-delivery is
// harmless: the runner is idempotent per execution id.
import { table } from "./table";
import { keyEnvironment, keyPermissions } from "./kms";
import { chains } from "./secrets";
import { bus } from "./bus";
import { schedulerEnvironment, schedulerPermissions } from "./scheduler";
import { production } from "./stage";
import { sandboxEnvironment, sandboxInvoke } from "./sandbox";

export const runnerDeadLetters = new sst.aws.Queue("RunnerDeadLetters", {
  transform: { queue: { messageRetentionSeconds: 14 * 24 * 3600 } },
});

// EventBridge (the rule's dead-letter config) writes here with this policy; the runner queue's redrive needs none.
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

/** A run may wait up to userop_receipt_wait_ms per on-chain step; the sweeper ends it after 15 min, Lambda's limit. */
const RUNNER_TIMEOUT_S = 15 * 60;

// A standard queue: messages that carry a MessageGroupId (the owner) make it a fair queue, with no setting of its
// own. AWS asks for a visibility timeout of at least six times the consumer's timeout, so that a message the event
// source mapping retries after a throttle is not received twice meanwhile.
export const runnerQueue = new sst.aws.Queue("RunnerQueue", {
  visibilityTimeout: `${6 * RUNNER_TIMEOUT_S} seconds`,
  dlq: { queue: runnerDeadLetters.arn, retry: 3 },
});

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

const rule = new aws.cloudwatch.EventRule("RunnerRule", {
  eventBusName: bus.name,
  eventPattern: JSON.stringify({ source: ["workflow-automation"], "detail-type": ["execution.requested"] }),
});

// Only this rule may send to the queue (the service principal alone would admit any account's rule).
new aws.sqs.QueuePolicy("RunnerQueuePolicy", {
  queueUrl: runnerQueue.url,
  policy: $jsonStringify({
    Version: "2012-10-17",
    Statement: [
      {
        Effect: "Allow",
        Principal: { Service: "events.amazonaws.com" },
        Action: "sqs:SendMessage",
        Resource: runnerQueue.arn,
        Condition: { ArnEquals: { "aws:SourceArn": rule.arn } },
      },
    ],
  }),
});

// The message body is the whole event (shared/execution/bus/sqs.ts reads it). A rule target can name only a fixed
// message group, not one per event, so these messages carry the owner in their body alone (docs/deploy.md).
new aws.cloudwatch.EventTarget("RunnerTarget", {
  rule: rule.name,
  eventBusName: bus.name,
  arn: runnerQueue.arn,
  retryPolicy: { maximumRetryAttempts: 8, maximumEventAgeInSeconds: 3600 },
  deadLetterConfig: { arn: runnerDeadLetters.arn },
});
