/**
 * Clients that go away before their answer, over the real server: an upload dropped mid-body is the client's
 * doing, logged as one quiet line (no error level, no stack); stream opens aborted before their answer free their
 * slots at once, so the same owner's next opens are all admitted.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { connect } from "node:net";
import { ulid } from "ulid";
import { useTestRuntime } from "../support/runtime";
import { startServiceChild } from "../support/service-child";
import { startTestServer, type TestServer } from "../support/server";
import { bearer, insertPending, randomOwner as newOwner } from "../support/fixtures";
import { createServiceApp } from "../../shared/service/app";
import { openStreamCount } from "../../shared/execution/stream-slots";
import { setLogLevel } from "../../shared/log";

const MAX = 20;
let server: TestServer;
let tableName: string;

beforeAll(async () => {
  ({
    config: { tableName },
  } = await useTestRuntime({ STREAM_MAX_MS: "120000", RATE_LIMIT_BURST: "100000", RATE_LIMIT_RPS: "10000" }));
  server = await startTestServer(createServiceApp());
});
afterAll(async () => server?.close());
afterEach(() => {
  vi.restoreAllMocks();
  setLogLevel("error");
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type LogLine = Record<string, unknown>;

/** Every log line written while `work` runs (debug level and up), parsed; `enough` waits up to 5 s for late lines. */
async function logsOf(work: () => Promise<void>, enough: (lines: LogLine[]) => boolean): Promise<LogLine[]> {
  const lines: string[] = [];
  const parsed = () =>
    lines
      .flatMap((chunk) => chunk.split("\n"))
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as LogLine);
  const capture = (chunk: unknown) => {
    lines.push(String(chunk));
    return true;
  };
  vi.spyOn(process.stdout, "write").mockImplementation(capture);
  vi.spyOn(process.stderr, "write").mockImplementation(capture);
  setLogLevel("debug");
  try {
    await work();
    const deadline = Date.now() + 5_000;
    while (!enough(parsed()) && Date.now() < deadline) await sleep(25);
  } finally {
    setLogLevel("error");
    vi.restoreAllMocks();
  }
  return parsed();
}

/** Sends a request whose body is cut off after `sent` of `declared` bytes, then drops the connection. */
async function dropMidBody(path: string, headers: Record<string, string>, declared: number, sent: number) {
  const socket = connect(server.port, "127.0.0.1");
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  const head = [
    `POST ${path} HTTP/1.1`,
    "Host: 127.0.0.1",
    "Content-Type: application/json",
    `Content-Length: ${declared}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    "",
    "",
  ].join("\r\n");
  socket.write(head + `{"name":"${"x".repeat(sent)}`);
  await sleep(200);
  socket.destroy();
}

describe("a client that goes away", () => {
  it("dropping an upload mid-body logs one quiet line: no error level, no stack", async () => {
    const owner = newOwner();
    const headers = await bearer(owner);
    const fromClient = (lines: LogLine[]) => lines.filter((l) => /client/i.test(String(l.message)));
    const lines = await logsOf(
      async () => {
        for (let i = 0; i < 3; i++) await dropMidBody("/workflows", headers, 100_000, 1_000);
      },
      (lines) => fromClient(lines).length >= 3 || lines.some((l) => l.level === "error"),
    );
    const loud = lines.filter((l) => l.level === "error" || l.level === "warn" || JSON.stringify(l).includes('"stack"'));
    expect(loud, JSON.stringify(loud)).toEqual([]);
    const quiet = fromClient(lines);
    expect(quiet.length, JSON.stringify(lines)).toBe(3);
    for (const l of quiet) expect(["debug", "info"]).toContain(l.level);
    // The server still answers.
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  });

  it(`stream opens aborted before their answer free their slots at once: ${MAX} more of the same owner are all admitted`, async () => {
    const owner = newOwner();
    const workflowId = ulid();
    const id = await insertPending(owner, workflowId, Date.now());
    const path = `${server.url}/executions/${id}:stream?workflowId=${workflowId}`;
    const headers = await bearer(owner);

    // Aborted while the server is still opening them (before any header came back).
    const aborted = Array.from({ length: MAX }, () => new AbortController());
    const attempts = aborted.map((c) => fetch(path, { headers, signal: c.signal }).catch(() => undefined));
    await sleep(5);
    for (const c of aborted) c.abort();
    await Promise.all(attempts);
    await sleep(200);

    const again = await Promise.all(
      Array.from({ length: MAX }, async () => {
        const controller = new AbortController();
        const res = await fetch(path, { headers, signal: controller.signal });
        if (res.status === 200) await res.body!.getReader().read();
        else await res.arrayBuffer();
        return { status: res.status, close: () => controller.abort() };
      }),
    );
    expect(again.map((r) => r.status)).toEqual(Array(MAX).fill(200));
    for (const r of again) r.close();
    const deadline = Date.now() + 3_000;
    while ((await openStreamCount(owner)) > 0 && Date.now() < deadline) await sleep(25);
    expect(await openStreamCount(owner)).toBe(0);
  });

  it("stream opens the rate limiter refused free the slots their handlers took at once, not after 5 s", async () => {
    const limited = await startServiceChild(tableName, { RATE_LIMIT_BURST: "3", RATE_LIMIT_RPS: "1", STREAM_MAX_MS: "120000" });
    try {
      const owner = newOwner();
      const workflowId = ulid();
      const id = await insertPending(owner, workflowId, Date.now());
      const headers = await bearer(owner);
      const controllers: AbortController[] = [];
      const statuses = await Promise.all(
        Array.from({ length: 10 }, async () => {
          const controller = new AbortController();
          controllers.push(controller);
          const res = await fetch(`${limited.url}/executions/${id}:stream?workflowId=${workflowId}`, {
            headers,
            signal: controller.signal,
          });
          if (res.status === 200) await res.body!.getReader().read();
          else await res.arrayBuffer();
          return res.status;
        }),
      );
      const opened = statuses.filter((s) => s === 200).length;
      expect(opened).toBeGreaterThan(0);
      expect(statuses.filter((s) => s === 429)).toHaveLength(10 - opened);
      const deadline = Date.now() + 1_500;
      while ((await openStreamCount(owner)) !== opened && Date.now() < deadline) await sleep(25);
      expect(await openStreamCount(owner)).toBe(opened);
      for (const c of controllers) c.abort();
    } finally {
      await limited.kill();
    }
  });
});
