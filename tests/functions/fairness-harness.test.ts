/**
 * Fair shares on AWS (docs/deploy.md, "Fairness on AWS"), run as Lambda runs the runner: its bundle hosted as
 * Lambda hosts it (tests/support/lambda-host.ts), fed by a model of the runner queue and of its event source
 * mapping, since SQS cannot run here.
 * - Real: the runner function and its SQS contract (one record or several, failed records answered, a message
 *   delivered again), the runs and their records in DynamoDB, the triggers that claim them, and the publisher
 *   (shared/execution/bus/sqs-publisher.ts): every message the queue holds is one of its SendMessage or
 *   SendMessageBatch requests as an SQS endpoint received it (tests/support/sqs-stub.ts), MessageGroupId = owner.
 * - Modelled (`FairQueue`, `startPollers`): SQS's fair-queue delivery (a message of a group with fewer messages in
 *   flight goes first, oldest first within a group: the effect AWS documents, that a quiet tenant's dwell time
 *   stays low while another floods; AWS's own algorithm cannot run here), the visibility timeout (a failed
 *   message is visible again at once instead of after 90 minutes), the redrive after 3 receives, and the mapping's
 *   concurrency cap (one poller per instance, one message per invocation).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import type { SQSBatchResponse } from "aws-lambda";
import { stackEnv, useTestRuntime } from "../support/runtime";
import { signIn, type SignedIn } from "../support/auth";
import { startUpstream, type Upstream } from "../support/upstream";
import { LambdaHost, sqsEvent } from "../support/lambda-host";
import { createServiceApp } from "../../shared/service/app";
import { SQSClient } from "@aws-sdk/client-sqs";
import { setBus } from "../../shared/execution/bus/install";
import { createSqsBus } from "../../shared/execution/bus/sqs-publisher";
import type { EventBus } from "../../shared/execution/bus/event-bus";
import { startSqsStub, type SqsStub } from "../support/sqs-stub";

/** How long one run takes: its one step waits this long for the upstream's answer. */
const RUN_MS = 400;
const CAP = 2;
const MAX_RECEIVES = 3;

interface Message {
  messageId: string;
  body: string;
  groupId: string;
  receiveCount: number;
  sentAt: number;
  receivedAt?: number;
}

/** The runner queue as far as fairness goes: see the file's comment for what it models. */
class FairQueue {
  readonly sent: Message[] = [];
  readonly deadLetters: Message[] = [];
  private visible: Message[] = [];
  private readonly inFlight = new Map<string, number>();

  send(message: { MessageBody: string; MessageGroupId?: string }): void {
    const m = {
      messageId: randomUUID(),
      body: message.MessageBody,
      groupId: message.MessageGroupId ?? "",
      receiveCount: 0,
      sentAt: Date.now(),
    };
    this.sent.push(m);
    this.visible.push(m);
  }

  get backlog(): Message[] {
    return [...this.visible];
  }

  /** The oldest message of the group with the fewest messages in flight. */
  receive(): Message | undefined {
    let best = -1;
    for (let i = 0; i < this.visible.length; i++) {
      if (best < 0 || this.flying(this.visible[i]!.groupId) < this.flying(this.visible[best]!.groupId)) best = i;
    }
    if (best < 0) return undefined;
    const [m] = this.visible.splice(best, 1) as [Message];
    m.receiveCount += 1;
    m.receivedAt ??= Date.now();
    this.inFlight.set(m.groupId, this.flying(m.groupId) + 1);
    return m;
  }

  /** Deleted after its invocation succeeded for it. */
  ack(m: Message): void {
    this.inFlight.set(m.groupId, this.flying(m.groupId) - 1);
  }

  /** Visible again, in its place by age, or dead-lettered after its last receive. */
  fail(m: Message): void {
    this.ack(m);
    if (m.receiveCount >= MAX_RECEIVES) this.deadLetters.push(m);
    else this.visible = [...this.visible, m].sort((a, b) => a.sentAt - b.sentAt);
  }

  private flying(group: string): number {
    return this.inFlight.get(group) ?? 0;
  }
}

/** The event source mapping: one poller per runner instance, each handing one message to its instance at a time. */
function startPollers(queue: FairQueue, instances: LambdaHost[]) {
  let stopped = false;
  const durations: number[] = [];
  const loops = instances.map(async (instance) => {
    while (!stopped) {
      const m = queue.receive();
      if (!m) {
        await new Promise((resolve) => setTimeout(resolve, 10));
        continue;
      }
      const at = Date.now();
      const failed = await instance
        .invoke<SQSBatchResponse>(sqsEvent([{ body: m.body, messageId: m.messageId, groupId: m.groupId, receiveCount: m.receiveCount }]), {
          timeoutMs: 60_000,
        })
        .then(({ result }) => result.batchItemFailures.some((f) => f.itemIdentifier === m.messageId))
        .catch(() => true);
      durations.push(Date.now() - at);
      if (failed) queue.fail(m);
      else queue.ack(m);
    }
  });
  return {
    durations,
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

let upstream: Upstream;
let sqs: SqsStub;
let bus: EventBus;
let runners: LambdaHost[] = [];
const queue = new FairQueue();
const app = createServiceApp();
let alice: SignedIn & { wallet: string };
let bob: SignedIn & { wallet: string };

beforeAll(async () => {
  const tableName = `fairness-${randomUUID()}`;
  await useTestRuntime({ TABLE_NAME: tableName, RATE_LIMIT_BURST: "100000", RATE_LIMIT_RPS: "10000" });
  // This process publishes as the API groups do, through the SQS publisher; what SQS accepts goes into the queue.
  sqs = await startSqsStub({ deliver: (m) => queue.send(m) });
  const client = new SQSClient({
    endpoint: sqs.url,
    region: "us-east-1",
    credentials: { accessKeyId: "AKIDHARNESS", secretAccessKey: "harness-secret" },
  });
  bus = setBus(createSqsBus({ queueUrl: `${sqs.url}/123456789012/app-RunnerQueue`, client }));
  upstream = await startUpstream(
    (_req, res) => void setTimeout(() => res.writeHead(200, { "content-type": "application/json" }).end("{}"), RUN_MS),
  );
  const env = stackEnv();
  const hostEnv = {
    ...env,
    LOG_LEVEL: "error",
    SST_RESOURCE_Table: JSON.stringify({ name: tableName }),
    SST_RESOURCE_JwtSigningKey: JSON.stringify({ value: env.JWT_SIGNING_KEY }),
    // The runner names the sandbox function at start; these runs call no script, so nothing invokes it.
    SANDBOX_FUNCTION: "sandbox",
  };
  runners = await Promise.all(Array.from({ length: CAP }, () => LambdaHost.start("runner", hostEnv)));
  [alice, bob] = await Promise.all([withWallet(await signIn(app)), withWallet(await signIn(app))]);
}, 120_000);

afterAll(async () => {
  await Promise.all(runners.map((r) => r.close()));
  await upstream?.close();
  await sqs?.close();
});

async function withWallet(who: SignedIn): Promise<SignedIn & { wallet: string }> {
  const res = await request(who, "POST", "/wallets", { salt: "1" });
  expect(res.status).toBe(201);
  return { ...who, wallet: String(res.json.address) };
}

async function request(who: SignedIn, method: string, path: string, body?: unknown) {
  const res = await app.request(path, {
    method,
    headers: { ...who.headers, "content-type": "application/json" },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

/** A manual workflow whose one step calls the upstream, which answers after RUN_MS. */
async function slowWorkflow(who: SignedIn & { wallet: string }): Promise<string> {
  const created = await request(who, "POST", "/workflows", {
    smartWalletAddress: who.wallet,
    trigger: { name: "go", type: "manual", config: {} },
    nodes: [{ id: "call", name: "call", type: "restApi", config: { url: `${upstream.url}/slow`, method: "GET" } }],
    maxExecution: 1000,
  });
  expect(created.status, JSON.stringify(created.json)).toBe(201);
  return String(created.json.id);
}

async function trigger(who: SignedIn, workflowId: string): Promise<string> {
  const res = await request(who, "POST", `/workflows/${workflowId}:trigger`, { triggerType: "manual" });
  expect(res.status, JSON.stringify(res.json)).toBe(202);
  return String(res.json.executionId);
}

async function statusOf(who: SignedIn, workflowId: string, executionId: string): Promise<string> {
  return String((await request(who, "GET", `/executions/${executionId}?workflowId=${workflowId}`)).json.status);
}

async function until(done: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await done()) && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 50));
}

describe("the runner queue on Lambda, under a concurrency cap of 2", () => {
  it("runs another owner's run within one run's time while one owner has 500 runs queued", async () => {
    const [flood, single] = await Promise.all([slowWorkflow(alice), slowWorkflow(bob)]);
    for (let i = 0; i < 500; i += 25) await Promise.all(Array.from({ length: 25 }, () => trigger(alice, flood)));
    const pollers = startPollers(queue, runners);
    // Both instances warm (their first, cold, runs done) and busy with alice's runs before bob's is requested.
    await until(async () => queue.sent.filter((m) => m.receivedAt).length >= 3 * CAP, 30_000);
    await new Promise((resolve) => setTimeout(resolve, RUN_MS / 2));
    const bobs = await trigger(bob, single);
    await until(async () => (await statusOf(bob, single, bobs)) === "success", 30_000);
    await pollers.stop();

    expect(await statusOf(bob, single, bobs)).toBe("success");
    // Every message is one the publisher sent, and carries its owner as its group.
    expect(queue.sent.map((m) => [m.body, m.groupId])).toEqual(sqs.messages.map((m) => [m.MessageBody, m.MessageGroupId]));
    const groups = new Set(queue.sent.map((m) => m.groupId));
    expect(groups).toEqual(new Set([alice.owner.toLowerCase(), bob.owner.toLowerCase()]));
    const bobsMessage = queue.sent.find((m) => m.groupId === bob.owner.toLowerCase())!;
    const waited = bobsMessage.receivedAt! - bobsMessage.sentAt;
    const longestRun = Math.max(...pollers.durations.slice(CAP)); // the warm ones
    // Alice's backlog is still there: bob's run did not wait for it. In one queue without groups it would have.
    const ahead = queue.backlog.filter((m) => m.sentAt < bobsMessage.sentAt).length;
    const batches = sqs.requests.filter((r) => r.action === "SendMessageBatch").length;
    console.info(
      `${sqs.messages.length} messages in ${sqs.requests.length} requests (${batches} batches); bob's run waited ${waited} ms in the queue (longest run ${longestRun} ms); ${ahead} of alice's runs still queued, ` +
        `which one queue without groups would have run first: about ${Math.round((ahead * longestRun) / CAP / 1000)} s`,
    );
    expect(waited).toBeLessThanOrEqual(longestRun);
    expect(ahead).toBeGreaterThan(450);
  }, 180_000);

  it("answers a failed record alone, runs a message delivered again once, and dead-letters one that keeps failing", async () => {
    const workflowId = await slowWorkflow(bob);
    const executionId = await trigger(bob, workflowId);
    const good = queue.sent.at(-1)!;
    // A message the runner cannot run: DynamoDB refuses its key (a sort key is at most 1,024 bytes), so it throws.
    await bus.publish({ type: "execution.requested", workflowId, executionId: "x".repeat(2_000), owner: bob.owner });
    const poison = queue.sent.at(-1)!;
    const calls = () => upstream.requests.filter((r) => r.path === "/slow").length;
    const before = calls();

    // One invocation with both records: only the poison comes back.
    const { result } = await runners[0]!.invoke<SQSBatchResponse>(
      sqsEvent([
        { body: good.body, messageId: good.messageId, groupId: good.groupId },
        { body: poison.body, messageId: poison.messageId, groupId: poison.groupId },
      ]),
      { timeoutMs: 60_000 },
    );
    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: poison.messageId }] });
    expect(await statusOf(bob, workflowId, executionId)).toBe("success");
    expect(calls()).toBe(before + 1);

    // Through the queue (what is left of the first test's backlog is dropped): the good message again, the
    // poison until it is dead-lettered.
    const fresh = new FairQueue();
    fresh.send({ MessageBody: good.body, MessageGroupId: good.groupId });
    fresh.send({ MessageBody: poison.body, MessageGroupId: poison.groupId });
    const pollers = startPollers(fresh, runners);
    await until(async () => fresh.deadLetters.length === 1 && fresh.backlog.length === 0, 30_000);
    await pollers.stop();
    expect(fresh.deadLetters.map((m) => [m.body, m.receiveCount])).toEqual([[poison.body, MAX_RECEIVES]]);
    expect(calls()).toBe(before + 1);
    expect(await statusOf(bob, workflowId, executionId)).toBe("success");
  }, 120_000);
});
