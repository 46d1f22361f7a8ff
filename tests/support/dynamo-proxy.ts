/**
 * A proxy in front of DynamoDB Local for a service process: every request is forwarded as it came, except those
 * `hold` matches, which are neither forwarded nor answered (the request hangs until the proxy closes), so a test
 * can stop a process at a chosen write and kill it there, as a crash would. `held` counts the requests held.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** A request as the proxy sees it: the operation (`PutItem`, `UpdateItem`, …) and its JSON body. */
interface DynamoRequest {
  operation: string;
  body: Record<string, unknown>;
}

export interface DynamoProxy {
  url: string;
  hold?: (request: DynamoRequest) => boolean;
  held: number;
  close(): Promise<void>;
}

export async function startDynamoProxy(target: string): Promise<DynamoProxy> {
  const proxy: DynamoProxy = { url: "", held: 0, close: async () => undefined };
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const operation = String(req.headers["x-amz-target"] ?? "").split(".")[1] ?? "";
    const parsed = body.length ? (JSON.parse(body.toString("utf8")) as Record<string, unknown>) : {};
    if (proxy.hold?.({ operation, body: parsed })) {
      proxy.held += 1;
      return; // never forwarded, never answered
    }
    const headers = Object.fromEntries(
      Object.entries(req.headers).filter(([name]) => !["host", "connection", "content-length"].includes(name)),
    ) as Record<string, string>;
    const answer = await fetch(target + (req.url ?? "/"), { method: req.method, headers, body });
    const text = Buffer.from(await answer.arrayBuffer());
    const passed = [...answer.headers.entries()].filter(
      ([name]) => !["content-encoding", "content-length", "transfer-encoding"].includes(name),
    );
    res.writeHead(answer.status, Object.fromEntries(passed));
    res.end(text);
  };
  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
      res.writeHead(502);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return proxy;
}
