/**
 * The SQS publisher (shared/execution/bus/sqs-publisher.ts) against a loopback endpoint that speaks SQS's JSON
 * protocol (tests/support/sqs-stub.ts): the exact requests it sends (the queue, the owner's message group, the body
 * the runner reads), batches within SQS's limits, and entries SQS refuses sent again or reported to their publisher.
 */
import { afterEach, describe, expect, it } from "vitest";
import { SQSClient } from "@aws-sdk/client-sqs";
import { createSqsBus, MAX_BATCH_BYTES, MAX_BATCH_ENTRIES } from "../../shared/execution/bus/sqs-publisher";
import { fromSqsRecord } from "../../shared/execution/bus/sqs";
import type { BusEvent } from "../../shared/execution/bus/event-bus";
import { startSqsStub, type Refusal, type SentMessage, type SqsStub } from "../support/sqs-stub";

const QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/app-test-RunnerQueue";
let stub: SqsStub | undefined;

afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

async function publisher(options: Parameters<typeof startSqsStub>[0] = {}) {
  stub = await startSqsStub(options);
  const client = new SQSClient({
    endpoint: stub.url,
    region: "us-east-1",
    credentials: { accessKeyId: "AKIDTEST", secretAccessKey: "test-secret" },
    maxAttempts: 1,
  });
  return { bus: createSqsBus({ queueUrl: QUEUE_URL, client }), stub };
}

const requested = (i: number, owner = `0xOwNeR${i % 3}`, workflowId = `wf-${i}`): BusEvent => ({
  type: "execution.requested",
  workflowId,
  executionId: `ex-${i}`,
  owner,
});
/** The envelope the runner reads (shared/execution/bus/sqs.ts), written out here so a change to it shows. */
const envelope = (e: BusEvent) => {
  const { type, ...detail } = e;
  return JSON.stringify({ source: "workflow-automation", "detail-type": type, detail });
};

describe("the SQS publisher", () => {
  it("sends a lone event as one SendMessage to the runner queue, in its owner's message group", async () => {
    const { bus, stub } = await publisher();
    const event: BusEvent = { ...requested(1, "0xAbCdEf"), resume: true, from: { generation: 3, pendingMs: 12 } };
    await bus.publish(event);
    expect(stub.requests).toEqual([
      { action: "SendMessage", body: { QueueUrl: QUEUE_URL, MessageBody: envelope(event), MessageGroupId: "0xabcdef" } },
    ]);
    expect(fromSqsRecord({ body: stub.messages[0]!.MessageBody })).toEqual(event);
    expect(bus.remote).toBe(true);
  });

  it("sends an event without an owner outside any group", async () => {
    const { bus, stub } = await publisher();
    const event: BusEvent = { type: "execution.requested", workflowId: "wf", executionId: "ex" };
    await bus.publish(event);
    expect(stub.requests[0]?.body).toEqual({ QueueUrl: QUEUE_URL, MessageBody: envelope(event) });
  });

  it("batches what is published at once: 10 entries a request, each in its owner's group, in order", async () => {
    const { bus, stub } = await publisher();
    const events = Array.from({ length: 25 }, (_, i) => requested(i));
    await Promise.all(events.map((e) => bus.publish(e)));
    expect(stub.requests.map((r) => [r.action, (r.body.Entries as unknown[]).length])).toEqual([
      ["SendMessageBatch", 10],
      ["SendMessageBatch", 10],
      ["SendMessageBatch", 5],
    ]);
    const entries = stub.requests.flatMap((r) => {
      expect(r.body.QueueUrl).toBe(QUEUE_URL);
      return r.body.Entries as Record<string, unknown>[];
    });
    expect(entries.map(({ Id: _, ...rest }) => rest)).toEqual(
      events.map((e) => ({ MessageBody: envelope(e), MessageGroupId: e.owner!.toLowerCase() })),
    );
    for (const r of stub.requests) {
      const ids = (r.body.Entries as { Id: string }[]).map((e) => e.Id);
      expect(new Set(ids).size).toBe(ids.length);
    }
    expect(stub.messages.map((m) => fromSqsRecord({ body: m.MessageBody }))).toEqual(events);
  });

  it("keeps a batch within 256 KB", async () => {
    const { bus, stub } = await publisher();
    // Five messages of about 60 KB: four fit one request, the fifth goes in the next.
    const events = Array.from({ length: 5 }, (_, i) => requested(i, "0xabc", `${i}-${"w".repeat(60_000)}`));
    await Promise.all(events.map((e) => bus.publish(e)));
    const sizes = stub.requests.map((r) =>
      r.action === "SendMessage"
        ? Buffer.byteLength(String(r.body.MessageBody))
        : (r.body.Entries as { MessageBody: string }[]).reduce((n, e) => n + Buffer.byteLength(e.MessageBody), 0),
    );
    expect(stub.requests.map((r) => r.action)).toEqual(["SendMessageBatch", "SendMessage"]);
    for (const size of sizes) expect(size).toBeLessThanOrEqual(MAX_BATCH_BYTES);
    expect(stub.messages).toHaveLength(5);
    expect(MAX_BATCH_ENTRIES).toBe(10);
  });

  it("sends one SendMessage at once, and what is published meanwhile together once it is back", async () => {
    const { bus, stub } = await publisher({ delayMs: 50 });
    const first = bus.publish(requested(0));
    await new Promise((resolve) => setTimeout(resolve, 10));
    await Promise.all([first, ...[1, 2, 3].map((i) => bus.publish(requested(i)))]);
    expect(stub.requests.map((r) => r.action)).toEqual(["SendMessage", "SendMessageBatch"]);
    expect((stub.requests[1]!.body.Entries as unknown[]).length).toBe(3);
  });

  it("sends an entry SQS failed on its side again, alone", async () => {
    const refused = new Set<string>();
    const refuse = (m: SentMessage): Refusal | undefined => {
      // The 3rd and 7th entries are throttled once.
      const id = JSON.parse(m.MessageBody).detail.executionId as string;
      if ((id === "ex-2" || id === "ex-6") && !refused.has(id)) {
        refused.add(id);
        return { SenderFault: false, Code: "ThrottlingException" };
      }
      return undefined;
    };
    const { bus, stub } = await publisher({ refuse });
    const events = Array.from({ length: 8 }, (_, i) => requested(i));
    await Promise.all(events.map((e) => bus.publish(e)));
    expect(
      stub.requests.map((r) => (r.body.Entries as { MessageBody: string }[]).map((e) => fromSqsRecord({ body: e.MessageBody }))),
    ).toEqual([events, [events[2], events[6]]]);
    expect(stub.messages).toHaveLength(8);
  });

  it("reports an entry SQS refuses as the sender's fault to its publisher alone, and one that keeps failing", async () => {
    const refuse = (m: SentMessage): Refusal | undefined => {
      const id = JSON.parse(m.MessageBody).detail.executionId as string;
      if (id === "ex-1") return { SenderFault: true, Code: "InvalidMessageContents" };
      if (id === "ex-2") return { SenderFault: false, Code: "InternalError" };
      return undefined;
    };
    const { bus, stub } = await publisher({ refuse });
    const outcomes = await Promise.allSettled([0, 1, 2, 3].map((i) => bus.publish(requested(i))));
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "rejected", "rejected", "fulfilled"]);
    expect(String((outcomes[1] as PromiseRejectedResult).reason)).toContain("InvalidMessageContents");
    expect(String((outcomes[2] as PromiseRejectedResult).reason)).toContain("InternalError");
    // The throttled entry was sent three times in all; the sender's fault once.
    const sent = stub.requests.flatMap((r) =>
      (r.body.Entries as { MessageBody: string }[]).map((e) => fromSqsRecord({ body: e.MessageBody })!.executionId),
    );
    expect(sent.filter((id) => id === "ex-2")).toHaveLength(3);
    expect(sent.filter((id) => id === "ex-1")).toHaveLength(1);
  });

  it("rejects every publisher of a request SQS did not take", async () => {
    const { bus, stub } = await publisher();
    await stub.close();
    const outcomes = await Promise.allSettled([0, 1].map((i) => bus.publish(requested(i))));
    expect(outcomes.map((o) => o.status)).toEqual(["rejected", "rejected"]);
  });
});
