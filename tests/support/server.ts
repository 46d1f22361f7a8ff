/**
 * A real HTTP server for tests: the app behind the same node adapter `npm start` uses (local/http-server.ts),
 * on a free loopback port. Tests that must see what the wire carries (headers the adapter adds, bodies it
 * streams, requests its parser refuses) go through this instead of `app.request()`.
 */
import { serveApp, type ServedApp } from "../../local/http-server";

export interface TestServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

export async function startTestServer(app: ServedApp): Promise<TestServer> {
  const server = await serveApp(app, { port: 0, hostname: "127.0.0.1" });
  return { url: `http://127.0.0.1:${server.port}`, port: server.port, close: server.close };
}
