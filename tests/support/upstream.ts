/**
 * A local upstream HTTP server for tests: what a restApi node, a bundler or an RPC client calls, on a free loopback
 * port. `handler` answers; every request is recorded (path, headers, arrival time) before it is handed over.
 * `close()` drops the connections still open (a held answer, a keep-alive socket) and stops listening.
 */
import { createServer, type IncomingHttpHeaders, type RequestListener } from "node:http";
import type { AddressInfo } from "node:net";

interface UpstreamRequest {
  path: string;
  headers: IncomingHttpHeaders;
  /** The header lines as received, name and value alternating: node's parsed `headers` drops one named `__proto__`. */
  rawHeaders: string[];
  at: number;
}

export interface Upstream {
  /** `http://127.0.0.1:<port>`, no trailing slash. */
  url: string;
  /** Every request received, in arrival order. */
  requests: UpstreamRequest[];
  close(): Promise<void>;
}

export async function startUpstream(handler: RequestListener): Promise<Upstream> {
  const requests: UpstreamRequest[] = [];
  const server = createServer((req, res) => {
    requests.push({ path: req.url ?? "", headers: req.headers, rawHeaders: req.rawHeaders, at: Date.now() });
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
