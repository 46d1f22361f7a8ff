/**
 * The runner queue's messages (shared/execution/bus/sqs.ts): the event read back from a message body as the bus
 * rule wrote it before the publishers sent to the queue themselves (messages still queued at that deploy), the
 * message a publisher sends (grouped by owner), and a delivery's failed records answered so that only they come back.
 */
import { describe, expect, it } from "vitest";
import { fromSqsRecord, handleSqsBatch, toSqsMessage } from "../../shared/execution/bus/sqs";
import type { BusEvent } from "../../shared/execution/bus/event-bus";

const event: BusEvent = { type: "execution.requested", workflowId: "wf-1", executionId: "ex-1", owner: "0xAbC" };
/** What the EventBridge rule wrote into the queue: the whole event. */
const ruleBody = (detail: Record<string, unknown>, source = "workflow-automation") =>
  JSON.stringify({ version: "0", id: "e", "detail-type": "execution.requested", source, detail });

describe("a runner queue message", () => {
  it("holds the event as the bus rule wrote it", () => {
    expect(fromSqsRecord({ body: ruleBody({ workflowId: "wf-1", executionId: "ex-1", owner: "0xAbC" }) })).toEqual(event);
    const resume = { workflowId: "wf-1", executionId: "ex-1", resume: true, from: { generation: 2, pendingMs: 40 } };
    expect(fromSqsRecord({ body: ruleBody(resume) })).toEqual({ type: "execution.requested", ...resume });
  });

  it("is not ours when its body is not JSON, not an object, from another source or without ids", () => {
    for (const body of ["not json", "42", "null", ruleBody({ workflowId: "wf-1", executionId: "ex-1" }, "someone.else"), ruleBody({})])
      expect(fromSqsRecord({ body }), body).toBeUndefined();
  });

  it("as a publisher would send it: the same body, in its owner's message group (lowercase: owners compare so)", () => {
    const message = toSqsMessage(event);
    expect(message.MessageGroupId).toBe("0xabc");
    expect(fromSqsRecord({ body: message.MessageBody })).toEqual(event);
    const { owner: _none, ...ownerless } = event;
    expect(toSqsMessage(ownerless).MessageGroupId).toBeUndefined();
  });
});

describe("a delivery of several records", () => {
  it("hands each event to the runner in order and answers only the records whose run threw", async () => {
    const seen: string[] = [];
    const records = ["ok-1", "boom", "ok-2"].map((id) => ({
      messageId: `m-${id}`,
      body: ruleBody({ workflowId: "wf", executionId: id }),
    }));
    const answer = await handleSqsBatch(records, async (e) => {
      seen.push(e.executionId);
      if (e.executionId === "boom") throw new Error("DynamoDB refused");
    });
    expect(seen).toEqual(["ok-1", "boom", "ok-2"]);
    expect(answer).toEqual({ batchItemFailures: [{ itemIdentifier: "m-boom" }] });
  });

  it("drops a record that holds no event of ours: delivering it again cannot help", async () => {
    let calls = 0;
    const answer = await handleSqsBatch([{ messageId: "m-x", body: "garbage" }], async () => void calls++);
    expect([calls, answer]).toEqual([0, { batchItemFailures: [] }]);
  });
});
