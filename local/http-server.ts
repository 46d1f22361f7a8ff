/**
 * The node HTTP host of the app (npm start, tests, benchmarks): @hono/node-server on a port.
 */
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";

export interface ServedApp {
  fetch: (request: Request, env?: unknown) => Response | Promise<Response>;
}

export interface RunningServer {
  port: number;
  close(): Promise<void>;
}

export async function serveApp(app: ServedApp, options: { port: number; hostname?: string }): Promise<RunningServer> {
  const server = serve({ fetch: app.fetch, port: options.port, hostname: options.hostname });
  if (!server.listening) await once(server, "listening");
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
      }),
  };
}
