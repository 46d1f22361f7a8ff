/**
 * SQS's SendMessage and SendMessageBatch as the AWS SDK v3 calls them (JSON 1.0, `X-Amz-Target: AmazonSQS.*`),
 * for the publisher's tests and the Lambda harness: it checks each request as SQS would (signed, the queue named,
 * a batch of 1 to 10 entries with distinct ids and at most 256 KB), records it exactly as sent, answers with the
 * body's MD5 (the SDK checks it), and hands every accepted message to `deliver` (the runner queue's consumer, or a
 * model of the queue). `refuse` makes SQS fail a batch entry on its side. SQS itself cannot run here; this is the
 * boundary the tests stub.
 */
import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface SentMessage {
  QueueUrl: string;
  MessageBody: string;
  MessageGroupId?: string;
}

interface SqsRequest {
  action: "SendMessage" | "SendMessageBatch";
  body: Record<string, unknown>;
}

/** A batch entry's failure: `SenderFault` false is SQS's side (throttled, internal), worth sending again. */
export interface Refusal {
  SenderFault: boolean;
  Code: string;
}

export interface SqsStub {
  url: string;
  /** Every request, as the SDK sent it (the parsed JSON), accepted or not. */
  requests: SqsRequest[];
  /** The messages SQS accepted, in order. */
  messages: SentMessage[];
  /** Every delivery started so far has finished. */
  idle(): Promise<void>;
  close(): Promise<void>;
}

const MAX_ENTRIES = 10;
const MAX_BYTES = 256 * 1024;
const md5 = (s: string) => createHash("md5").update(s).digest("hex");

export async function startSqsStub(
  options: {
    deliver?: (message: SentMessage) => void | Promise<void>;
    refuse?: (message: SentMessage) => Refusal | undefined;
    /** How long SQS takes to answer. */
    delayMs?: number;
  } = {},
): Promise<SqsStub> {
  const requests: SqsRequest[] = [];
  const messages: SentMessage[] = [];
  let chain: Promise<void> = Promise.resolve();
  const accept = (m: SentMessage) => {
    messages.push(m);
    if (options.deliver) chain = chain.then(() => options.deliver!(m)).catch(() => undefined);
  };
  const answer = (handle: (target: string, body: Record<string, unknown>, signed: boolean) => [number, unknown]) =>
    createServer((req, res) => {
      let raw = "";
      req.on("data", (d: Buffer) => (raw += d.toString()));
      req.on("end", () => {
        const signed = req.method === "POST" && /^AWS4-HMAC-SHA256 /.test(String(req.headers.authorization));
        const [status, out] = handle(String(req.headers["x-amz-target"]), JSON.parse(raw || "{}") as Record<string, unknown>, signed);
        const send = () => res.writeHead(status, { "content-type": "application/x-amz-json-1.0" }).end(JSON.stringify(out));
        if (options.delayMs) setTimeout(send, options.delayMs);
        else send();
      });
    });
  const invalid = (type: string, message: string): [number, unknown] => [400, { __type: `com.amazonaws.sqs#${type}`, message }];

  const server: Server = answer((target, body, signed) => {
    if (!signed) return invalid("InvalidSecurity", "unsigned request");
    const action = target.replace(/^AmazonSQS\./, "");
    if (action !== "SendMessage" && action !== "SendMessageBatch") return invalid("UnsupportedOperation", target);
    requests.push({ action, body });
    const queueUrl = body.QueueUrl;
    if (typeof queueUrl !== "string") return invalid("InvalidAddress", "no QueueUrl");
    const message = (e: Record<string, unknown>): SentMessage => ({
      QueueUrl: queueUrl,
      MessageBody: String(e.MessageBody),
      ...(typeof e.MessageGroupId === "string" ? { MessageGroupId: e.MessageGroupId } : {}),
    });
    if (action === "SendMessage") {
      if (typeof body.MessageBody !== "string") return invalid("MissingParameter", "MessageBody");
      accept(message(body));
      return [200, { MessageId: `m-${messages.length}`, MD5OfMessageBody: md5(body.MessageBody) }];
    }
    const entries = (body.Entries ?? []) as Record<string, unknown>[];
    if (entries.length === 0) return invalid("EmptyBatchRequest", "no entries");
    if (entries.length > MAX_ENTRIES) return invalid("TooManyEntriesInBatchRequest", `${entries.length} entries`);
    if (new Set(entries.map((e) => e.Id)).size !== entries.length) return invalid("BatchEntryIdsNotDistinct", "ids");
    const bytes = entries.reduce((n, e) => n + Buffer.byteLength(String(e.MessageBody)), 0);
    if (bytes > MAX_BYTES) return invalid("BatchRequestTooLong", `${bytes} bytes`);
    const Successful: unknown[] = [];
    const Failed: unknown[] = [];
    for (const e of entries) {
      const refusal = options.refuse?.(message(e));
      if (refusal) Failed.push({ Id: e.Id, ...refusal, Message: "refused by the stub" });
      else {
        accept(message(e));
        Successful.push({ Id: e.Id, MessageId: `m-${messages.length}`, MD5OfMessageBody: md5(String(e.MessageBody)) });
      }
    }
    return [200, { Successful, Failed }];
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    messages,
    idle: async () => {
      let seen: Promise<void>;
      do {
        seen = chain;
        await seen;
      } while (seen !== chain);
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
