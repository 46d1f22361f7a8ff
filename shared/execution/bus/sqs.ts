/**
 * The runner queue's side of the event bus (./event-bus.ts) on AWS: `execution.requested` reaches the runner
 * function through an SQS queue (infra/bus.ts) whose event source mapping caps the runner's concurrency
 * (infra/runner.ts). `toSqsMessage` is the message a publisher sends (./sqs-publisher.ts): the event in the shape of
 * an EventBridge event, as the bus rule that filled the queue before wrote it, in its owner's message group
 * (docs/deploy.md, "Fairness on AWS"). `fromSqsRecord` reads it back and `handleSqsBatch` hands every record of a
 * delivery to the runner, answering the ones that failed so that only those are delivered again
 * (`ReportBatchItemFailures`).
 */
import { log } from "../../log";
import type { BusEvent, BusHandler } from "./event-bus";

/** The `source` of the app's events in a message body. */
export const EVENT_SOURCE = "workflow-automation";

/** The part of an SQS record (Lambda's `SQSRecord`) the runner reads. */
export interface SqsRecord {
  messageId: string;
  body: string;
  attributes?: { MessageGroupId?: string; ApproximateReceiveCount?: string };
}

/** Lambda's answer to an SQS delivery with `ReportBatchItemFailures`: the records to deliver again. */
export interface SqsBatchResponse {
  batchItemFailures: { itemIdentifier: string }[];
}

/** The bus event a record holds, or undefined when its body is not one of ours. */
export function fromSqsRecord(record: Pick<SqsRecord, "body">): BusEvent | undefined {
  let event: unknown;
  try {
    event = JSON.parse(record.body);
  } catch {
    return undefined;
  }
  return event && typeof event === "object" ? fromEnvelope(event) : undefined;
}

function fromEnvelope(event: { source?: string; "detail-type"?: string; detail?: unknown }): BusEvent | undefined {
  if (event.source !== EVENT_SOURCE || event["detail-type"] !== "execution.requested") return undefined;
  const detail = event.detail as
    | {
        workflowId?: unknown;
        executionId?: unknown;
        owner?: unknown;
        resume?: unknown;
        from?: { generation?: unknown; pendingMs?: unknown };
      }
    | undefined;
  if (typeof detail?.workflowId !== "string" || typeof detail.executionId !== "string") return undefined;
  return {
    type: "execution.requested",
    workflowId: detail.workflowId,
    executionId: detail.executionId,
    ...(typeof detail.owner === "string" ? { owner: detail.owner } : {}),
    ...(detail.resume === true ? { resume: true } : {}),
    ...(typeof detail.from?.generation === "number" && typeof detail.from.pendingMs === "number"
      ? { from: { generation: detail.from.generation, pendingMs: detail.from.pendingMs } }
      : {}),
  };
}

/** A message for the runner queue: the event in its envelope, in its owner's message group (lower-case). */
export function toSqsMessage(event: BusEvent): { MessageBody: string; MessageGroupId?: string } {
  const { type, ...detail } = event;
  return {
    MessageBody: JSON.stringify({ source: EVENT_SOURCE, "detail-type": type, detail }),
    ...(event.owner ? { MessageGroupId: event.owner.toLowerCase() } : {}),
  };
}

/**
 * Runs each record's event through `handle`, one after the other, and answers those that threw. A record that
 * holds no event of ours is logged and dropped: delivering it again cannot help. `handle` must be idempotent per
 * execution (SQS delivers at least once, and a failed record comes back).
 */
export async function handleSqsBatch(records: SqsRecord[], handle: BusHandler): Promise<SqsBatchResponse> {
  const batchItemFailures: SqsBatchResponse["batchItemFailures"] = [];
  for (const record of records) {
    const event = fromSqsRecord(record);
    if (!event) {
      log.warn("runner dropped a message it does not handle", { messageId: record.messageId });
      continue;
    }
    try {
      await handle(event);
    } catch (err) {
      log.error("run failed; its message is delivered again", {
        messageId: record.messageId,
        executionId: event.executionId,
        receiveCount: record.attributes?.ApproximateReceiveCount,
        error: (err as Error).message,
      });
      batchItemFailures.push({ itemIdentifier: record.messageId });
    }
  }
  return { batchItemFailures };
}
