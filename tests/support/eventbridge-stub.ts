/**
 * EventBridge's PutEvents as the AWS SDK calls it (JSON 1.1, `AWSEvents.PutEvents`), for the Lambda harness:
 * it checks and records each request exactly as sent and hands every entry to `deliver` (the rule's target,
 * e.g. the runner function), one at a time, as an asynchronous invocation would. EventBridge itself cannot run
 * here; this is the boundary the harness stubs.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface PutEventsEntry {
  Source: string;
  DetailType: string;
  Detail: string;
  EventBusName: string;
}

export interface EventBridgeStub {
  url: string;
  entries: PutEventsEntry[];
  /** Every delivery started so far has finished. */
  idle(): Promise<void>;
  close(): Promise<void>;
}

export async function startEventBridgeStub(deliver: (entry: PutEventsEntry) => Promise<void>): Promise<EventBridgeStub> {
  const entries: PutEventsEntry[] = [];
  let chain: Promise<void> = Promise.resolve();
  const server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      const target = req.headers["x-amz-target"];
      if (req.method !== "POST" || target !== "AWSEvents.PutEvents" || !/^AWS4-HMAC-SHA256 /.test(String(req.headers.authorization))) {
        res.writeHead(400, { "content-type": "application/x-amz-json-1.1" }).end(JSON.stringify({ __type: "ValidationException" }));
        return;
      }
      const { Entries } = JSON.parse(body) as { Entries: PutEventsEntry[] };
      entries.push(...Entries);
      for (const entry of Entries) chain = chain.then(() => deliver(entry)).catch(() => undefined);
      res
        .writeHead(200, { "content-type": "application/x-amz-json-1.1" })
        .end(JSON.stringify({ FailedEntryCount: 0, Entries: Entries.map((_, i) => ({ EventId: `evt-${entries.length}-${i}` })) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    entries,
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
