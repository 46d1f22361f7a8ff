/**
 * Fair shares on AWS (docs/deploy.md, "Fairness on AWS"), read from the resource graph `sst.config.ts` builds without
 * AWS (tests/infra/graph.ts): the functions that request runs send them to a standard SQS queue (grouped by owner:
 * tests/execution/bus-sqs-publisher.unit.test.ts) and nothing else can, the runner reads it under a concurrency cap,
 * failed messages end in the dead-letter queue, and in production the stream function has a cap and the API groups a
 * floor.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { buildGraph, ensurePlatform, type Graph, type GraphResource } from "./graph";

let preview: Graph;
let production: Graph;

beforeAll(async () => {
  ensurePlatform();
  [preview, production] = await Promise.all([buildGraph({ stage: "test" }), buildGraph({ stage: "production" })]);
}, 300_000);

const one = (g: Graph, type: string, name: string): GraphResource => {
  const found = g.resources.find((r) => r.type === type && r.name === name);
  if (!found) throw new Error(`no ${type} named ${name}`);
  return found;
};
const queue = (g: Graph, name: string) => one(g, "aws:sqs/queue:Queue", `${name}Queue`);
const lambda = (g: Graph, id: string) => one(g, "aws:lambda/function:Function", `${id}Function`);
const arnOf = (q: GraphResource) => `arn:aws:sqs:us-east-1:123456789012:${String(q.inputs.name)}`;
const mapping = (g: Graph) => one(g, "aws:lambda/eventSourceMapping:EventSourceMapping", "RunnerEventSource");

const RUNNER_TIMEOUT_S = 15 * 60;
const API_GROUPS = ["ApiCore", "ApiSecrets", "ApiWallets", "ApiWorkflows", "ApiExecutions"];

describe("the runner queue", () => {
  it("is a standard queue (a fair queue once messages carry a group), not FIFO", () => {
    const runnerQueue = queue(preview, "RunnerQueue");
    expect(runnerQueue.inputs.fifoQueue).toBe(false);
    expect(runnerQueue.inputs.contentBasedDeduplication).toBe(false);
  });

  it("hides a received message for six times the runner's timeout, as AWS asks of a Lambda consumer", () => {
    expect(lambda(preview, "Runner").inputs.timeout).toBe(RUNNER_TIMEOUT_S);
    expect(queue(preview, "RunnerQueue").inputs.visibilityTimeoutSeconds).toBe(6 * RUNNER_TIMEOUT_S);
  });

  it("moves a message received three times to the runner's dead-letter queue", () => {
    const redrive = JSON.parse(String(queue(preview, "RunnerQueue").inputs.redrivePolicy)) as Record<string, unknown>;
    expect(redrive).toEqual({ deadLetterTargetArn: arnOf(queue(preview, "RunnerDeadLetters")), maxReceiveCount: 3 });
  });
});

/** The functions whose code requests runs: `:trigger`, signals, the watcher's and the schedule target's fires, the sweeper. */
const PUBLISHERS = ["ApiWorkflows", "ApiExecutions", "ChainWatcherHandler", "ScheduleTarget", "WithdrawalFollowUpHandler"];

interface Statement {
  actions: string[];
  resources: string[];
}
const statementsOf = (role: GraphResource): Statement[] =>
  ((role.inputs.inlinePolicies ?? []) as { policy: string }[]).flatMap(
    (p) => (JSON.parse(p.policy) as { Statement: Statement[] }).Statement,
  );

describe("sending to the runner queue", () => {
  it("is granted to the functions that request runs, SendMessage alone, on that queue alone", () => {
    const queueArn = arnOf(queue(preview, "RunnerQueue"));
    const senders = preview.resources
      .filter((r) => r.type === "aws:iam/role:Role")
      .filter((role) => statementsOf(role).some((s) => s.resources.includes(queueArn)))
      .map((role) => role.name.replace(/Role$/, ""))
      .sort();
    // The runner reads it (its own statement, below); the publishers send.
    expect(senders).toEqual([...PUBLISHERS, "Runner"].sort());
    for (const id of PUBLISHERS) {
      const onQueue = statementsOf(one(preview, "aws:iam/role:Role", `${id}Role`)).filter((s) => s.resources.includes(queueArn));
      expect(onQueue, id).toEqual([{ effect: "Allow", actions: ["sqs:SendMessage"], resources: [queueArn] }]);
    }
    const runnerOnQueue = statementsOf(one(preview, "aws:iam/role:Role", "RunnerRole")).filter((s) => s.resources.includes(queueArn));
    expect(runnerOnQueue.flatMap((s) => s.actions)).not.toContain("sqs:SendMessage");
  });

  it("is open to nothing else: no queue policy, no EventBridge rule or bus in between", () => {
    expect(preview.resources.filter((r) => r.type === "aws:sqs/queuePolicy:QueuePolicy").map((r) => r.name)).toEqual([]);
    expect(preview.resources.filter((r) => r.type === "aws:cloudwatch/eventBus:EventBus")).toEqual([]);
    const queueName = String(queue(preview, "RunnerQueue").inputs.name);
    const targets = preview.resources.filter(
      (r) => r.type === "aws:cloudwatch/eventTarget:EventTarget" && String(r.inputs.arn).includes(queueName),
    );
    expect(targets).toEqual([]);
    expect(preview.resources.some((r) => r.name === "RunnerRule")).toBe(false);
    // No other policy document in the stage names the queue (role policies, managed policies).
    const others = preview.resources.filter(
      (r) =>
        r.type !== "aws:iam/role:Role" && /policy/i.test(r.type) && JSON.stringify(r.inputs).includes(arnOf(queue(preview, "RunnerQueue"))),
    );
    expect(others.map((r) => r.name)).toEqual([]);
  });
});

describe("the runner's event source mapping", () => {
  it("feeds the runner one message at a time from its queue, reporting failed items", () => {
    const esm = mapping(preview);
    expect(esm.inputs.eventSourceArn).toBe(arnOf(queue(preview, "RunnerQueue")));
    expect(esm.inputs.functionName).toBe(lambda(preview, "Runner").inputs.name);
    expect(esm.inputs.batchSize).toBe(1);
    expect(esm.inputs.functionResponseTypes).toEqual(["ReportBatchItemFailures"]);
  });

  it("caps the runner's concurrency: 200 in production, 20 in a preview", () => {
    expect(mapping(production).inputs.scalingConfig).toEqual({ maximumConcurrency: 200 });
    expect(mapping(preview).inputs.scalingConfig).toEqual({ maximumConcurrency: 20 });
  });

  it("is the runner's only way in: no asynchronous invocation, so no dead-letter config of its own", () => {
    expect(lambda(preview, "Runner").inputs.deadLetterConfig).toBeUndefined();
    const permissions = preview.resources.filter(
      (r) =>
        r.type === "aws:lambda/permission:Permission" && String(r.inputs.function).includes(String(lambda(preview, "Runner").inputs.name)),
    );
    expect(permissions).toEqual([]);
  });
});

describe("the runner queue's backlog", () => {
  it("pages when the oldest queued run waited a minute, three minutes running", () => {
    const alarm = one(preview, "aws:cloudwatch/metricAlarm:MetricAlarm", "AlarmRunnerBacklog");
    expect(alarm.inputs).toMatchObject({
      namespace: "AWS/SQS",
      metricName: "ApproximateAgeOfOldestMessage",
      dimensions: { QueueName: queue(preview, "RunnerQueue").inputs.name },
      threshold: 60,
      evaluationPeriods: 3,
    });
  });
});

describe("reserved concurrency in production", () => {
  const reserved = (g: Graph, id: string) => lambda(g, id).inputs.reservedConcurrentExecutions as number | undefined;

  it("caps the stream and sandbox functions and gives each API group a floor, within the account's 1,000 less 100 unreserved", () => {
    expect(reserved(production, "ExecutionStream")).toBe(200);
    expect(reserved(production, "Sandbox")).toBe(150);
    const floors = Object.fromEntries(API_GROUPS.map((id) => [id, reserved(production, id)]));
    expect(floors).toEqual({ ApiCore: 50, ApiSecrets: 25, ApiWallets: 25, ApiWorkflows: 150, ApiExecutions: 50 });
    const total = Object.values(floors).reduce((a: number, b) => a + Number(b), 0) + 200 + 150;
    const runnerCap = (mapping(production).inputs.scalingConfig as { maximumConcurrency: number }).maximumConcurrency;
    expect(total + runnerCap).toBeLessThanOrEqual(900);
  });

  it("reserves nothing in a preview, which shares the account", () => {
    for (const id of [...API_GROUPS, "ExecutionStream", "Runner", "Sandbox"]) expect(reserved(preview, id), id).toBeUndefined();
  });
});
