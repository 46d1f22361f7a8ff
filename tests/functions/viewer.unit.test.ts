/**
 * functions/viewer.ts: what every HTTP function's app sees behind the router, and the invocation id its log lines
 * carry (`handle` hands the Lambda context as `lambdaContext`, `streamHandle` as `context`).
 */
import { describe, expect, it, vi } from "vitest";
import { behindRouter } from "../../functions/viewer";
import { log, setLogLevel } from "../../shared/log";

describe("behindRouter", () => {
  it("tags the log lines of a request with its invocation's awsRequestId, buffered and streamed alike", async () => {
    setLogLevel("info");
    const lines: string[] = [];
    const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => (lines.push(String(chunk)), true));
    const app = behindRouter({
      fetch: async (request: Request, _env?: unknown) => {
        await Promise.resolve();
        log.info("served", { path: new URL(request.url).pathname });
        return new Response("ok");
      },
    });
    try {
      await app.fetch(new Request("http://x/buffered"), { lambdaContext: { awsRequestId: "id-handle" } } as never);
      await app.fetch(new Request("http://x/streamed"), { context: { awsRequestId: "id-stream" } } as never);
      await app.fetch(new Request("http://x/local"));
    } finally {
      spy.mockRestore();
    }
    expect(lines.map((l) => JSON.parse(l) as { path: string; awsRequestId?: string }).map((l) => [l.path, l.awsRequestId])).toEqual([
      ["/buffered", "id-handle"],
      ["/streamed", "id-stream"],
      ["/local", undefined],
    ]);
  });
});
