/**
 * GET /executions/{id}:stream (API.md §10.9) over the real HTTP server, reading the bytes as they arrive:
 * headers, exact framing, the first frame, a status change delivered within 300 ms (by the in-process
 * notification and by polling alone), keep-alive comments, closing after a terminal frame, after stream_max_ms
 * and when the execution becomes unreadable, and every failure answered as a problem before any byte.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ulid } from "ulid";
import { DeleteCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { stackEnv, useTestRuntime } from "../support/runtime";
import { startTestServer, type TestServer } from "../support/server";
import { bearer, insertPending, randomOwner as newOwner } from "../support/fixtures";
import { createApp } from "../../shared/http/app";
import { Keys } from "../../shared/store/item-keys";
import { executionRoutes } from "../../shared/execution/routes";
import { finish, recordStep } from "../../shared/execution/execution-write";
import { listenerCount } from "../../shared/execution/execution-stored";
import type { Runtime } from "../../shared/current-runtime";

type Owner = `0x${string}`;

const KEEPALIVE_MS = 400;
const MAX_MS = 3_000;
let runtime: Runtime;
let server: TestServer;

beforeAll(async () => {
  runtime = await useTestRuntime({ STREAM_KEEPALIVE_MS: String(KEEPALIVE_MS), STREAM_MAX_MS: String(MAX_MS) });
  server = await startTestServer(createApp(executionRoutes));
});
afterAll(async () => server?.close());

async function pending(owner: Owner, startAt = Date.now()) {
  const workflowId = ulid();
  const id = await insertPending(owner, workflowId, startAt);
  return { workflowId, id, startAt };
}

/** An open stream: every chunk with the time it arrived; `text()` is everything so far. */
interface Open {
  status: number;
  headers: Headers;
  chunks: { at: number; text: string }[];
  text(): string;
  /** Resolves when the server closes the stream, with the time it did. */
  closed: Promise<number>;
  /** Resolves once the received text matches. */
  until(pattern: RegExp, timeoutMs?: number): Promise<number>;
  abort(): void;
}

async function open(owner: Owner, path: string): Promise<Open> {
  const controller = new AbortController();
  const res = await fetch(server.url + path, { headers: await bearer(owner), signal: controller.signal });
  const chunks: { at: number; text: string }[] = [];
  const decoder = new TextDecoder();
  const waiters: (() => void)[] = [];
  const closed = (async () => {
    const reader = res.body!.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        chunks.push({ at: performance.now(), text: decoder.decode(value, { stream: true }) });
        for (const w of waiters.splice(0)) w();
      }
    } catch {
      // aborted by the test
    }
    for (const w of waiters.splice(0)) w();
    return performance.now();
  })();
  const text = () => chunks.map((c) => c.text).join("");
  let ended = false;
  void closed.then(() => (ended = true));
  return {
    status: res.status,
    headers: res.headers,
    chunks,
    text,
    closed,
    abort: () => controller.abort(),
    until: (pattern, timeoutMs = 3_000) =>
      new Promise<number>((resolve, reject) => {
        const deadline = setTimeout(
          () => reject(new Error(`no ${pattern} within ${timeoutMs} ms; got ${JSON.stringify(text())}`)),
          timeoutMs,
        );
        const check = () => {
          if (pattern.test(text())) {
            clearTimeout(deadline);
            resolve(performance.now());
          } else if (ended) {
            clearTimeout(deadline);
            reject(new Error(`stream closed without ${pattern}; got ${JSON.stringify(text())}`));
          } else waiters.push(check);
        };
        check();
      }),
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const frame = (n: number, summary: Record<string, unknown>) => `id: ${n}\nevent: status\ndata: ${JSON.stringify(summary)}\n\n`;

describe("the stream", () => {
  it("sends the current status first, then the terminal status as soon as it is recorded, then closes", async () => {
    const owner = newOwner();
    const e = await pending(owner);
    const s = await open(owner, `/executions/${e.id}:stream?workflowId=${e.workflowId}`);
    expect(s.status).toBe(200);
    expect(s.headers.get("content-type")).toBe("text/event-stream");
    expect(s.headers.get("cache-control")).toBe("no-cache");
    expect(s.headers.get("connection")).toBe("keep-alive");
    expect(s.headers.get("x-accel-buffering")).toBe("no");
    expect(s.headers.get("x-request-id")).toBeTruthy();
    expect(s.headers.get("x-api-version")).toBe("4");

    const summary = { id: e.id, workflowId: e.workflowId, status: "pending", startAt: e.startAt };
    await s.until(/\n\n/);
    expect(s.text()).toBe(frame(1, summary));

    expect(await finish(e.workflowId, e.id, { status: "success", endAt: e.startAt + 840 })).toBe(true);
    await s.until(/id: 2\n/);
    await s.closed;
    expect(s.text()).toBe(frame(1, summary) + frame(2, { ...summary, status: "success", endAt: e.startAt + 840 }));
  });

  it("delivers a status change to an open stream within 300 ms, every time (write start → frame, 20 runs)", async () => {
    const owner = newOwner();
    const latencies: number[] = [];
    for (let run = 0; run < 21; run++) {
      const e = await pending(owner);
      const s = await open(owner, `/executions/${e.id}:stream?workflowId=${e.workflowId}`);
      await s.until(/id: 1\n/);
      const before = performance.now();
      await finish(e.workflowId, e.id, { status: "success", endAt: Date.now() });
      const arrived = await s.until(/id: 2\n/);
      if (run > 0) latencies.push(arrived - before); // run 0 warms this file's connections
      await s.closed;
    }
    expect(Math.max(...latencies)).toBeLessThan(300);
  });

  it("delivers a change written by another process (no notification here) by polling, within 300 ms", async () => {
    const owner = newOwner();
    const e = await pending(owner);
    const s = await open(owner, `/executions/${e.id}:stream?workflowId=${e.workflowId}&interval=100ms`);
    await s.until(/id: 1\n/);
    const latencies: number[] = [];
    const before = performance.now();
    // Another writer ends it directly in the table: this process's notification never fires.
    await runtime.db.send(
      new UpdateCommand({
        TableName: runtime.config.tableName,
        Key: Keys.execution(e.workflowId, e.id),
        UpdateExpression: "SET #s = :s, endAt = :e, #err = :err REMOVE gsi2pk, gsi2sk, gsi3pk, gsi3sk",
        ExpressionAttributeNames: { "#s": "status", "#err": "error" },
        ExpressionAttributeValues: { ":s": "error", ":e": e.startAt + 5, ":err": "workflow was deleted" },
      }),
    );
    latencies.push((await s.until(/id: 2\n/)) - before);
    expect(latencies[0]).toBeLessThan(300);
    await s.closed;
    expect(s.text()).toMatch(/id: 2\nevent: status\ndata: \{[^\n]*"status":"error"[^\n]*"error":"workflow was deleted"\}\n\n$/);
  });

  it("sends exactly one frame for an execution that is already terminal", async () => {
    const owner = newOwner();
    const e = await pending(owner);
    await finish(e.workflowId, e.id, { status: "failed", error: "1 of 1 steps failed: a", endAt: e.startAt + 3 });
    const s = await open(owner, `/executions/${e.id}:stream?workflowId=${e.workflowId}`);
    await s.closed;
    expect(s.text()).toBe(
      frame(1, {
        id: e.id,
        workflowId: e.workflowId,
        status: "failed",
        startAt: e.startAt,
        endAt: e.startAt + 3,
        error: "1 of 1 steps failed: a",
      }),
    );
  });

  it("sends a keep-alive comment after stream_keepalive_ms without a frame, and a step recorded is no frame", async () => {
    const owner = newOwner();
    const e = await pending(owner);
    const s = await open(owner, `/executions/${e.id}:stream?workflowId=${e.workflowId}&interval=1s`);
    await s.until(/id: 1\n/);
    const first = performance.now();
    await recordStep(e.workflowId, e.id, {
      id: "n",
      type: "customCode",
      name: "n",
      success: true,
      output: { data: 1 },
      startAt: e.startAt,
      endAt: e.startAt,
    });
    const at = await s.until(/: keep-alive\n\n/, 2_000);
    expect(at - first).toBeGreaterThanOrEqual(KEEPALIVE_MS - 50);
    expect(at - first).toBeLessThan(KEEPALIVE_MS + 300);
    await s.until(/(: keep-alive\n\n){2}/, 2_000);
    expect(s.text().match(/^id: /gm)).toHaveLength(1);
    await finish(e.workflowId, e.id, { status: "success", endAt: Date.now() });
    await s.closed;
    expect(s.text().match(/^id: /gm)).toHaveLength(2);
  });

  it("sends one frame per status change: a wait that ends while the status stays waiting is no frame (§10.9, §17.1.3)", async () => {
    const owner = newOwner();
    const e = await pending(owner);
    const s = await open(owner, `/executions/${e.id}:stream?workflowId=${e.workflowId}&interval=100`);
    await s.until(/id: 1\n/);
    const write = (update: string, values: Record<string, unknown>) =>
      runtime.db.send(
        new UpdateCommand({
          TableName: runtime.config.tableName,
          Key: Keys.execution(e.workflowId, e.id),
          UpdateExpression: update,
          ExpressionAttributeNames: { "#s": "status", "#w": "wait:gate" },
          ExpressionAttributeValues: values,
        }),
      );
    const wait = {
      kind: "signal",
      name: "gate",
      position: 0,
      since: e.startAt,
      deadline: e.startAt + 60_000,
      approvers: [],
      config: "{}",
      inputs: [],
    };
    // As a run suspends on an await node, a signal ends the wait (status still waiting), and the run resumes.
    await write("SET #s = :s, #w = :w", { ":s": "waiting", ":w": wait });
    await s.until(/id: 2\n/);
    await write("SET #s = :s REMOVE #w", { ":s": "waiting" });
    await sleep(400); // several polls see the ended wait
    await write("SET #s = :s REMOVE #w", { ":s": "pending" });
    await s.until(/id: 3\n/);
    await sleep(400);
    await finish(e.workflowId, e.id, { status: "success", endAt: Date.now() });
    await s.closed;
    const frames = [...s.text().matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]!) as { status: string; waitingFor?: unknown[] });
    expect(frames.map((f) => f.status)).toEqual(["pending", "waiting", "pending", "success"]);
    expect(frames[1]!.waitingFor).toEqual([
      { nodeId: "gate", name: "gate", kind: "signal", since: e.startAt, deadline: e.startAt + 60_000, approvers: [] },
    ]);
    expect(s.text().match(/^id: \d+$/gm)).toEqual(["id: 1", "id: 2", "id: 3", "id: 4"]);
  });

  it("closes after stream_max_ms, and when the execution becomes unreadable", async () => {
    const owner = newOwner();
    const e = await pending(owner);
    const opened = performance.now();
    const s = await open(owner, `/executions/${e.id}:stream?workflowId=${e.workflowId}&interval=5000`);
    const closedAt = await s.closed;
    expect(closedAt - opened).toBeGreaterThanOrEqual(MAX_MS - 100);
    expect(closedAt - opened).toBeLessThan(MAX_MS + 1_000);
    expect(s.text().startsWith(frame(1, { id: e.id, workflowId: e.workflowId, status: "pending", startAt: e.startAt }))).toBe(true);
    expect(s.text().match(/^id: /gm)).toHaveLength(1);

    const gone = await pending(owner);
    const g = await open(owner, `/executions/${gone.id}:stream?workflowId=${gone.workflowId}&interval=100`);
    await g.until(/id: 1\n/);
    await runtime.db.send(new DeleteCommand({ TableName: runtime.config.tableName, Key: Keys.execution(gone.workflowId, gone.id) }));
    const before = performance.now();
    expect((await g.closed) - before).toBeLessThan(1_000);
    expect(g.text().match(/^id: /gm)).toHaveLength(1);
  });

  it("answers every failure as an ordinary problem before any byte: 404 for another owner's execution, 400, 401", async () => {
    const owner = newOwner();
    const e = await pending(owner);
    const headers = await bearer(newOwner());
    const foreign = await fetch(`${server.url}/executions/${e.id}:stream?workflowId=${e.workflowId}`, { headers });
    expect(foreign.status).toBe(404);
    expect(foreign.headers.get("content-type")).toBe("application/problem+json");
    expect(((await foreign.json()) as { code: string }).code).toBe("EXECUTION_NOT_FOUND");
    const unknown = await fetch(`${server.url}/executions/${ulid()}:stream?workflowId=${e.workflowId}`, { headers: await bearer(owner) });
    expect(unknown.status).toBe(404);
    await unknown.body?.cancel();

    for (const interval of ["50", "99", "5001", "6s", "abc", "1.5", "1.5ms", "-100", "0.05s"]) {
      const res = await fetch(`${server.url}/executions/${e.id}:stream?workflowId=${e.workflowId}&interval=${interval}`, {
        headers: await bearer(owner),
      });
      expect(res.status, interval).toBe(400);
      const body = (await res.json()) as { code: string; errors: { path: string }[] };
      expect(body.code).toBe("VALIDATION_FAILED");
      expect(body.errors[0]!.path).toBe("query.interval");
    }
    const missing = await fetch(`${server.url}/executions/${e.id}:stream`, { headers: await bearer(owner) });
    expect(missing.status).toBe(400);
    await missing.body?.cancel();
    const anonymous = await fetch(`${server.url}/executions/${e.id}:stream?workflowId=${e.workflowId}`);
    expect(anonymous.status).toBe(401);
    await anonymous.body?.cancel();

    // The accepted forms of interval: ms as digits or with `ms`, seconds with a fraction.
    await finish(e.workflowId, e.id, { status: "success", endAt: Date.now() });
    for (const interval of ["100", "250ms", "1s", "1.5s", "5000"]) {
      const s = await open(owner, `/executions/${e.id}:stream?workflowId=${e.workflowId}&interval=${interval}`);
      expect(s.status, interval).toBe(200);
      await s.closed;
      expect(s.text().match(/^id: /gm)).toHaveLength(1);
    }
  });

  it("stops reading when the client goes away", async () => {
    const owner = newOwner();
    const e = await pending(owner);
    const s = await open(owner, `/executions/${e.id}:stream?workflowId=${e.workflowId}&interval=100`);
    await s.until(/id: 1\n/);
    expect(listenerCount(e.workflowId, e.id)).toBe(1);
    s.abort();
    await s.closed;
    const deadline = Date.now() + 1_000;
    while (listenerCount(e.workflowId, e.id) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(listenerCount(e.workflowId, e.id)).toBe(0);

    // A body nobody reads (HEAD) starts nothing: no listener, no polling.
    const other = await pending(owner);
    const head = await fetch(`${server.url}/executions/${other.id}:stream?workflowId=${other.workflowId}`, {
      method: "HEAD",
      headers: await bearer(owner),
    });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe("");
    expect(listenerCount(other.workflowId, other.id)).toBe(0);
  });
});

describe("the Lambda entry point (Function URL with response streaming)", () => {
  it("streams the frames as they happen through streamHandle, and answers a problem before any byte", async () => {
    // The Lambda runtime's globals, as streamHandle uses them: the response metadata, then the body written.
    const metadata: { statusCode?: number; headers?: Record<string, string> }[] = [];
    (globalThis as Record<string, unknown>).awslambda = {
      streamifyResponse: (fn: unknown) => fn,
      HttpResponseStream: { from: (stream: unknown, meta: (typeof metadata)[number]) => (metadata.push(meta), stream) },
    };
    Object.assign(process.env, {
      ...stackEnv(),
      LOG_LEVEL: "error",
      STREAM_KEEPALIVE_MS: String(KEEPALIVE_MS),
      STREAM_MAX_MS: String(MAX_MS),
      SST_RESOURCE_Table: JSON.stringify({ name: runtime.config.tableName }),
    });
    const { Writable } = await import("node:stream");
    const { handler } = (await import("../../functions/stream")) as unknown as {
      handler: (event: unknown, stream: NodeJS.WritableStream, context: unknown) => Promise<void>;
    };
    const invoke = async (owner: Owner, rawPath: string, rawQueryString: string) => {
      const chunks: { at: number; text: string }[] = [];
      const sink = new Writable({
        write(chunk: Buffer, _enc, done) {
          chunks.push({ at: performance.now(), text: chunk.toString("utf8") });
          done();
        },
      });
      const now = Date.now();
      const done = handler(
        {
          version: "2.0",
          routeKey: "$default",
          rawPath,
          rawQueryString,
          headers: { host: "abc.lambda-url.us-east-1.on.aws", ...(await bearer(owner)) },
          requestContext: {
            accountId: "anonymous",
            apiId: "abc",
            domainName: "abc.lambda-url.us-east-1.on.aws",
            domainPrefix: "abc",
            http: { method: "GET", path: rawPath, protocol: "HTTP/1.1", sourceIp: "203.0.113.9", userAgent: "vitest" },
            requestId: "r",
            routeKey: "$default",
            stage: "$default",
            time: new Date(now).toUTCString(),
            timeEpoch: now,
          },
          isBase64Encoded: false,
        },
        sink,
        { awsRequestId: "lambda-req" },
      );
      return { chunks, done, text: () => chunks.map((c) => c.text).join("") };
    };

    const owner = newOwner();
    const e = await pending(owner);
    const live = await invoke(owner, `/executions/${e.id}:stream`, `workflowId=${e.workflowId}`);
    const deadline = Date.now() + 3_000;
    while (!live.text().includes("id: 1\n") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(metadata[0]).toMatchObject({ statusCode: 200, headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
    const before = performance.now();
    await finish(e.workflowId, e.id, { status: "success", endAt: e.startAt + 1 });
    await live.done;
    const second = live.chunks.find((c) => c.text.includes("id: 2\n"))!;
    expect(second.at - before).toBeLessThan(300);
    expect(live.text()).toBe(
      frame(1, { id: e.id, workflowId: e.workflowId, status: "pending", startAt: e.startAt }) +
        frame(2, { id: e.id, workflowId: e.workflowId, status: "success", startAt: e.startAt, endAt: e.startAt + 1 }),
    );

    const foreign = await invoke(newOwner(), `/executions/${e.id}:stream`, `workflowId=${e.workflowId}`);
    await foreign.done;
    expect(metadata[1]).toMatchObject({ statusCode: 404, headers: { "content-type": "application/problem+json" } });
    expect(JSON.parse(foreign.text()).code).toBe("EXECUTION_NOT_FOUND");
  });
});
