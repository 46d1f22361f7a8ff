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

/** A `request(path, init)` target (like `app.request`) that goes over the wire to `url`: for signIn() and friends. */
export const httpTarget = (url: string) => ({ request: (path: string, init?: RequestInit) => fetch(url + path, init) });

/**
 * Sends `bytes` as they are on a fresh connection, keeping it open (a half-sent body stays pending), and
 * resolves with everything the server answers until it closes the connection (or `waitMs` passes).
 */
export async function rawExchange(port: number, bytes: string | Buffer, waitMs = 5_000): Promise<string> {
  const { connect } = await import("node:net");
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(Buffer.concat(chunks).toString("utf8"));
    };
    const timer = setTimeout(done, waitMs);
    socket.on("data", (chunk) => chunks.push(chunk));
    socket.on("error", (err) => (chunks.length ? done() : reject(err)));
    socket.on("close", done);
    socket.write(bytes);
  });
}
