/**
 * The node HTTP host of the app (npm start, tests, benchmarks): @hono/node-server on a port, plus what the
 * wire needs beyond the app itself:
 * - requests the HTTP parser refuses (malformed request line, headers over the limit, a request that took too
 *   long) are answered with problem+json like every other error (API.md §2), not Node's bare status line;
 * - a response that the app sent without a Content-Type (204, 201 with no body) goes out without one: the
 *   adapter would otherwise label it text/plain (API.md §1.3).
 */
import { once } from "node:events";
import { createServer, ServerResponse, STATUS_CODES, type IncomingMessage, type OutgoingHttpHeaders } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { getRequestListener } from "@hono/node-server";
import { ulid } from "ulid";
import { problemBody } from "../shared/http/problem";

export interface ServedApp {
  fetch: (request: Request, env?: unknown) => Response | Promise<Response>;
}

export interface RunningServer {
  port: number;
  close(): Promise<void>;
}

/** Set on a response by `fetch` below when the app gave it no Content-Type; removed again in writeHead. */
const NO_CONTENT_TYPE = "x-internal-no-content-type";

class ExactResponse extends ServerResponse<IncomingMessage> {
  override writeHead(status: number, ...rest: unknown[]): this {
    const headers = rest.find((arg) => typeof arg === "object" && arg !== null && !Array.isArray(arg)) as OutgoingHttpHeaders | undefined;
    if (headers && NO_CONTENT_TYPE in headers) {
      delete headers[NO_CONTENT_TYPE];
      delete headers["content-type"];
    }
    return (super.writeHead as (...args: unknown[]) => this)(status, ...rest);
  }
}

export async function serveApp(app: ServedApp, options: { port: number; hostname?: string }): Promise<RunningServer> {
  const listener = getRequestListener(async (request, env) => {
    const response = await app.fetch(request, env);
    if (!response.headers.has("content-type")) response.headers.set(NO_CONTENT_TYPE, "1");
    return response;
  });
  const server = createServer({ ServerResponse: ExactResponse }, listener);
  server.on("clientError", answerParserError);
  server.listen(options.port, options.hostname);
  await Promise.race([once(server, "listening"), once(server, "error").then(([err]) => Promise.reject(err as Error))]);
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Node's parser refused the request before the app saw it: answer problem+json and close the connection. */
function answerParserError(err: NodeJS.ErrnoException & { code?: string }, socket: Socket) {
  if (!socket.writable || err.code === "ECONNRESET") {
    socket.destroy();
    return;
  }
  const [status, code, detail] =
    err.code === "HPE_HEADER_OVERFLOW"
      ? [431, "HEADERS_TOO_LARGE", "The request headers are larger than the server accepts."]
      : err.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? [408, "REQUEST_TIMEOUT", "The request was not received in time."]
        : [400, "MALFORMED_REQUEST", "The request is not a well-formed HTTP/1.1 request."];
  const requestId = ulid();
  const body = JSON.stringify(problemBody({ status, code, detail, requestId }));
  socket.end(
    [
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}`,
      "Content-Type: application/problem+json",
      `Content-Length: ${Buffer.byteLength(body)}`,
      `X-Request-Id: ${requestId}`,
      "X-Api-Version: 4",
      "Cache-Control: no-store",
      "Connection: close",
      "",
      body,
    ].join("\r\n"),
  );
}
