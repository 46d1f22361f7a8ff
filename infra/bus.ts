// The event bus on AWS (shared/execution/bus/): the functions that request runs (`:trigger`, time, block and event
// fires, signals and awaits that end a wait, the sweeper's recoveries) send each `execution.requested` straight to
// the runner queue with the run's owner as its MessageGroupId, which makes this standard queue a fair queue: one
// owner's backlog does not delay the others' runs (docs/deploy.md, "Fairness on AWS"). The runner function consumes
// it (infra/runner.ts). A message received 3 times without success moves to the dead-letter queue for an operator.

/** A run may wait up to userop_receipt_wait_ms per on-chain step; the sweeper ends it after 15 min, Lambda's limit. */
export const RUNNER_TIMEOUT_S = 15 * 60;

export const runnerDeadLetters = new sst.aws.Queue("RunnerDeadLetters", {
  transform: { queue: { messageRetentionSeconds: 14 * 24 * 3600 } },
});

// A standard queue: messages that carry a MessageGroupId (the owner) make it a fair queue, with no setting of its
// own. AWS asks for a visibility timeout of at least six times the consumer's timeout, so that a message the event
// source mapping retries after a throttle is not received twice meanwhile.
export const runnerQueue = new sst.aws.Queue("RunnerQueue", {
  visibilityTimeout: `${6 * RUNNER_TIMEOUT_S} seconds`,
  dlq: { queue: runnerDeadLetters.arn, retry: 3 },
});

// What linking a queue grants (SST's own link grants `sqs:*`): sending to it, nothing else. Functions read
// `Resource.RunnerQueue.url`. No queue policy: only roles of this account that hold the permission can send.
sst.Linkable.wrap(sst.aws.Queue, (q) => ({
  properties: { url: q.url },
  include: [sst.aws.permission({ actions: ["sqs:SendMessage"], resources: [q.arn] })],
}));
