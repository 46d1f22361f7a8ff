/**
 * The SQS adapter of the event bus (./event-bus.ts), for AWS: each `execution.requested` goes straight to the runner
 * queue (infra/bus.ts) in its owner's message group (`toSqsMessage`), which makes the standard queue a fair queue
 * (docs/deploy.md, "Fairness on AWS"). A lone event is one SendMessage; events published while a request is on its
 * way (a watcher pass firing many workflows, a sweeper pass) wait for it and go out together as SendMessageBatch
 * requests of at most 10 entries and 256 KB. A batch entry SQS refuses on its side is sent again; each publisher's
 * promise settles with its own entry's outcome.
 */
import {
  SendMessageBatchCommand,
  SendMessageCommand,
  SQSClient,
  type BatchResultErrorEntry,
  type SendMessageBatchRequestEntry,
} from "@aws-sdk/client-sqs";
import type { BusEvent, EventBus } from "./event-bus";
import { toSqsMessage } from "./sqs";

/** SQS's limits on one SendMessageBatch: entries, and the sum of their bodies and attributes. */
export const MAX_BATCH_ENTRIES = 10;
export const MAX_BATCH_BYTES = 256 * 1024;
/** How often an entry SQS failed on its side (throttled, an internal error) is sent before its publisher is told. */
const ATTEMPTS = 3;

interface Waiting {
  message: ReturnType<typeof toSqsMessage>;
  bytes: number;
  resolve: () => void;
  reject: (err: Error) => void;
}

export function createSqsBus(options: { queueUrl: string; client?: SQSClient }): EventBus {
  const client = options.client ?? new SQSClient({});
  const queueUrl = options.queueUrl;
  const waiting: Waiting[] = [];
  let sending = false;

  const sendOne = async (w: Waiting) => {
    try {
      await client.send(new SendMessageCommand({ QueueUrl: queueUrl, ...w.message }));
      w.resolve();
    } catch (err) {
      w.reject(err as Error);
    }
  };

  /** Sends one batch, again for the entries SQS failed on its side; rejects the rest of the failed ones. */
  const sendBatch = async (batch: Waiting[]) => {
    let left = batch.map((w, i) => ({ w, id: String(i) }));
    for (let attempt = 1; left.length > 0; attempt++) {
      let failed: BatchResultErrorEntry[];
      try {
        const entries: SendMessageBatchRequestEntry[] = left.map(({ w, id }) => ({ Id: id, ...w.message }));
        failed = (await client.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries }))).Failed ?? [];
      } catch (err) {
        for (const { w } of left) w.reject(err as Error);
        return;
      }
      const byId = new Map(failed.map((f) => [f.Id, f]));
      const retry: typeof left = [];
      for (const entry of left) {
        const f = byId.get(entry.id);
        if (!f) entry.w.resolve();
        else if (!f.SenderFault && attempt < ATTEMPTS) retry.push(entry);
        else entry.w.reject(new Error(`SQS refused the message: ${f.Code ?? "unknown"} ${f.Message ?? ""}`.trim()));
      }
      left = retry;
      if (left.length > 0) await new Promise((resolve) => setTimeout(resolve, 50 * 2 ** attempt));
    }
  };

  // One request at a time: what is published meanwhile waits, and goes out in batches once it is back.
  const drain = async () => {
    while (waiting.length > 0) {
      const batch = nextBatch(waiting);
      await (batch.length === 1 ? sendOne(batch[0]!) : sendBatch(batch));
    }
    sending = false;
  };

  return {
    remote: true,
    publish(event: BusEvent) {
      const message = toSqsMessage(event);
      const bytes = Buffer.byteLength(message.MessageBody) + Buffer.byteLength(message.MessageGroupId ?? "");
      return new Promise<void>((resolve, reject) => {
        waiting.push({ message, bytes, resolve, reject });
        if (sending) return;
        sending = true;
        // After this turn: what else this turn publishes joins the first request.
        queueMicrotask(() => void drain());
      });
    },
    subscribe() {
      throw new Error("The runner queue's consumer is the runner function (infra/runner.ts), not a subscriber");
    },
  };
}

/** Takes the oldest waiting messages that fit one SendMessageBatch. */
function nextBatch(waiting: Waiting[]): Waiting[] {
  let bytes = 0;
  let n = 0;
  while (n < waiting.length && n < MAX_BATCH_ENTRIES && (n === 0 || bytes + waiting[n]!.bytes <= MAX_BATCH_BYTES)) {
    bytes += waiting[n]!.bytes;
    n++;
  }
  return waiting.splice(0, n);
}
