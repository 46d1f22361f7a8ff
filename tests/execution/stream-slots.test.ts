/**
 * Open streams per owner (API.md §17.5) over the real server: at most max_open_streams_per_owner (20) streams of
 * one owner open at once, the next answered 429 TOO_MANY_STREAMS (problem+json, `limit`, no Retry-After) before
 * any byte and after the execution's checks, other owners unaffected; a slot freed at once when either side
 * closes; the count shared by two service processes on one table and never passed under concurrent opens; the
 * slots of a process killed with SIGKILL freed when their leases run out; and the lease's own rules (an unread
 * body, a body no longer read, a slot taken over, the production defaults within API.md's 60 s).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChildProcess } from "node:child_process";
import { ulid } from "ulid";
import { useTestRuntime } from "../support/runtime";
import { startTestServer, type TestServer } from "../support/server";
import { startServiceChild, type ServiceChild } from "../support/service-child";
import { bearer, insertPending, randomOwner as newOwner } from "../support/fixtures";
import { createServiceApp } from "../../shared/service/app";
import { ApiError } from "../../shared/errors";
import {
  acquireStreamSlot,
  claimSlot,
  configureStreamLeases,
  liveSlots,
  openStreamCount,
  STREAM_LEASE_DEFAULTS,
} from "../../shared/execution/stream-slots";
import { finish } from "../../shared/execution/execution-write";
import type { Runtime } from "../../shared/current-runtime";

type Owner = `0x${string}`;

const MAX = 20;
const ENV = { STREAM_MAX_MS: "120000", STREAM_KEEPALIVE_MS: "1000", RATE_LIMIT_BURST: "1000", RATE_LIMIT_RPS: "1000" };
let runtime: Runtime;
let server: TestServer;
const children: ChildProcess[] = [];

beforeAll(async () => {
  runtime = await useTestRuntime(ENV);
  server = await startTestServer(createServiceApp());
});
afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await server?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function pending(owner: Owner) {
  const workflowId = ulid();
  const id = await insertPending(owner, workflowId, Date.now());
  return { workflowId, id, path: `/executions/${id}:stream?workflowId=${workflowId}` };
}

/** A stream request: open (200, read as it arrives, `close()` aborts it) or refused (the problem answer). */
interface Opened {
  status: number;
  headers: Headers;
  /** The body of a refusal. */
  problem?: Record<string, unknown>;
  /** Resolves when the first frame has arrived. */
  firstFrame: Promise<void>;
  /** Resolves when the connection has ended, either way. */
  ended: Promise<void>;
  close(): void;
}

async function open(base: string, owner: Owner, path: string, method = "GET"): Promise<Opened> {
  const controller = new AbortController();
  const res = await fetch(base + path, { method, headers: await bearer(owner), signal: controller.signal });
  if (res.status !== 200 || method !== "GET") {
    const text = await res.text();
    return {
      status: res.status,
      headers: res.headers,
      problem: text ? (JSON.parse(text) as Record<string, unknown>) : undefined,
      firstFrame: Promise.resolve(),
      ended: Promise.resolve(),
      close: () => {},
    };
  }
  let text = "";
  let sawFrame: () => void = () => {};
  const firstFrame = new Promise<void>((resolve) => (sawFrame = resolve));
  const decoder = new TextDecoder();
  const ended = (async () => {
    const reader = res.body!.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
        if (text.includes("\n\n")) sawFrame();
      }
    } catch {
      // aborted
    }
  })();
  return { status: 200, headers: res.headers, firstFrame, ended, close: () => controller.abort() };
}

const closeAll = async (streams: Opened[]) => {
  for (const s of streams) s.close();
  await Promise.all(streams.map((s) => s.ended));
};

/** Waits until the owner's live leases are `n` (releases after a client's abort take a round trip). */
async function untilCount(owner: Owner, n: number, timeoutMs = 3_000) {
  const deadline = Date.now() + timeoutMs;
  while ((await openStreamCount(owner)) !== n) {
    if (Date.now() > deadline) throw new Error(`open streams of ${owner}: ${await openStreamCount(owner)}, expected ${n}`);
    await sleep(25);
  }
}

function expectTooMany(s: Opened) {
  expect(s.status).toBe(429);
  expect(s.headers.get("content-type")).toBe("application/problem+json");
  expect(s.headers.get("retry-after")).toBeNull();
  expect(s.problem).toEqual({
    type: "about:blank",
    title: "Too Many Requests",
    status: 429,
    detail: expect.any(String) as string,
    instance: s.headers.get("x-request-id"),
    code: "TOO_MANY_STREAMS",
    limit: MAX,
  });
}

/** A second service process on this file's table (tests/support/service-process.ts). */
async function startProcess(env: Record<string, string> = {}): Promise<ServiceChild> {
  const started = await startServiceChild(runtime.config.tableName, { ...ENV, ...env });
  children.push(started.child);
  return started;
}

describe("open streams per owner", () => {
  it("allows 20 open streams of one owner; the 21st is 429 TOO_MANY_STREAMS without Retry-After; another owner is unaffected", async () => {
    const owner = newOwner();
    const e = await pending(owner);
    const streams: Opened[] = [];
    for (let i = 0; i < MAX; i++) streams.push(await open(server.url, owner, e.path));
    expect(streams.map((s) => s.status)).toEqual(Array(MAX).fill(200));
    await Promise.all(streams.map((s) => s.firstFrame));
    expect(await openStreamCount(owner)).toBe(MAX);

    const refused = await open(server.url, owner, e.path);
    expectTooMany(refused);
    // Another execution of the same owner: the cap is the owner's, not the execution's.
    const other = await pending(owner);
    expectTooMany(await open(server.url, owner, other.path));
    // HEAD opens no stream but answers as GET would.
    const head = await fetch(server.url + e.path, { method: "HEAD", headers: await bearer(owner) });
    expect(head.status).toBe(429);
    expect(head.headers.get("retry-after")).toBeNull();
    expect(await openStreamCount(owner)).toBe(MAX);

    // API.md §1.6: authentication, validation and the execution's lookup come before the quota.
    const unknown = await open(server.url, owner, `/executions/${ulid()}:stream?workflowId=${e.workflowId}`);
    expect(unknown.status).toBe(404);
    expect(unknown.problem?.code).toBe("EXECUTION_NOT_FOUND");
    const foreign = await pending(newOwner());
    expect((await open(server.url, owner, foreign.path)).problem?.code).toBe("EXECUTION_NOT_FOUND");
    const invalid = await open(server.url, owner, `${e.path}&interval=5`);
    expect(invalid.status).toBe(400);
    expect(invalid.problem?.code).toBe("VALIDATION_FAILED");
    const anonymous = await fetch(server.url + e.path);
    expect(anonymous.status).toBe(401);
    await anonymous.body?.cancel();

    // Another owner opens streams as if alone.
    const neighbour = newOwner();
    const n = await pending(neighbour);
    const theirs: Opened[] = [];
    for (let i = 0; i < 3; i++) theirs.push(await open(server.url, neighbour, n.path));
    expect(theirs.map((s) => s.status)).toEqual([200, 200, 200]);
    await Promise.all(theirs.map((s) => s.firstFrame));
    expect(await openStreamCount(neighbour)).toBe(3);

    await closeAll([...streams, ...theirs]);
    await untilCount(owner, 0);
    await untilCount(neighbour, 0);
  });

  it("frees a slot at once when the client closes a stream, and when the server closes one", async () => {
    const owner = newOwner();
    const e = await pending(owner);
    const streams: Opened[] = [];
    for (let i = 0; i < MAX; i++) streams.push(await open(server.url, owner, e.path));
    await Promise.all(streams.map((s) => s.firstFrame));
    expectTooMany(await open(server.url, owner, e.path));

    // The client goes away: the very next open succeeds, five times over.
    for (let round = 0; round < 5; round++) {
      const gone = streams.shift()!;
      gone.close();
      await gone.ended;
      const next = await open(server.url, owner, e.path);
      expect(next.status, `round ${round}`).toBe(200);
      await next.firstFrame;
      streams.push(next);
      expectTooMany(await open(server.url, owner, e.path));
    }

    // The server ends a stream (its execution reaches a terminal status): the slot is free when the client sees the end.
    const ending = await pending(owner);
    streams.shift()!.close();
    await untilCount(owner, MAX - 1);
    const last = await open(server.url, owner, ending.path);
    expect(last.status).toBe(200);
    await last.firstFrame;
    expectTooMany(await open(server.url, owner, e.path));
    await finish(ending.workflowId, ending.id, { status: "success", endAt: Date.now() });
    await last.ended;
    const after = await open(server.url, owner, e.path);
    expect(after.status).toBe(200);
    streams.push(after);

    await closeAll(streams);
    await untilCount(owner, 0);
  });

  it("shares the 20 across two service processes on one table, never more under concurrent opens", async () => {
    const second = await startProcess();
    const owner = newOwner();
    const e = await pending(owner);
    const bases = [server.url, second.url];
    // Warm both processes' connections and modules, then free the slot again.
    for (const base of bases) {
      const s = await open(base, owner, e.path);
      expect(s.status).toBe(200);
      await s.firstFrame;
      await closeAll([s]);
    }
    await untilCount(owner, 0);

    for (let round = 0; round < 3; round++) {
      const attempts = await Promise.all(Array.from({ length: 30 }, (_, i) => open(bases[i % 2]!, owner, e.path)));
      const opened = attempts.filter((s) => s.status === 200);
      const refused = attempts.filter((s) => s.status !== 200);
      expect(opened, `round ${round}`).toHaveLength(MAX);
      for (const s of refused) expectTooMany(s);
      // Both processes served some of the 20 (15 attempts each, so at least 5 each).
      expect(attempts.filter((s, i) => s.status === 200 && i % 2 === 0).length).toBeGreaterThanOrEqual(5);
      expect(attempts.filter((s, i) => s.status === 200 && i % 2 === 1).length).toBeGreaterThanOrEqual(5);
      await Promise.all(opened.map((s) => s.firstFrame));
      expect((await liveSlots(owner)).size).toBe(MAX);
      // Either process refuses the 21st while the other holds slots.
      for (const base of bases) expectTooMany(await open(base, owner, e.path));

      // A stream closed on one process frees a slot for the other at once.
      const onSecond = attempts.findIndex((s, i) => s.status === 200 && i % 2 === 1);
      attempts[onSecond]!.close();
      await attempts[onSecond]!.ended;
      await untilCount(owner, MAX - 1);
      const moved = await open(server.url, owner, e.path);
      expect(moved.status).toBe(200);
      await moved.firstFrame;
      await closeAll([...opened, moved]);
      await untilCount(owner, 0);
    }
    second.child.kill("SIGTERM");
    await second.exited;
  });

  it("frees the slots of a process that vanished (SIGKILL) once their leases run out, and not before", async () => {
    const LEASE_MS = 3_000;
    const HEARTBEAT_MS = 1_000;
    const crashing = await startProcess({
      STREAM_LEASE_MS: String(LEASE_MS),
      STREAM_HEARTBEAT_MS: String(HEARTBEAT_MS),
      STREAM_IDLE_MS: "2000",
    });
    const owner = newOwner();
    const e = await pending(owner);
    const theirs: Opened[] = [];
    for (let i = 0; i < MAX; i++) theirs.push(await open(crashing.url, owner, e.path));
    expect(theirs.map((s) => s.status)).toEqual(Array(MAX).fill(200));
    await Promise.all(theirs.map((s) => s.firstFrame));

    // The heartbeat keeps them: two lease lengths later they still hold every slot.
    await sleep(2 * LEASE_MS);
    expect(await openStreamCount(owner)).toBe(MAX);
    expectTooMany(await open(server.url, owner, e.path));

    crashing.child.kill("SIGKILL");
    await crashing.exited;
    const killedAt = Date.now();
    await Promise.all(theirs.map((s) => s.ended));
    // Nothing deleted them: refused until the leases run out, then served.
    expectTooMany(await open(server.url, owner, e.path));
    let freedAt = 0;
    let s: Opened | undefined;
    while (Date.now() - killedAt < LEASE_MS + 5_000) {
      s = await open(server.url, owner, e.path);
      if (s.status === 200) {
        freedAt = Date.now();
        break;
      }
      expectTooMany(s);
      await sleep(100);
    }
    expect(freedAt, "a slot was freed").toBeGreaterThan(0);
    // The last renewal was at most one heartbeat before the kill; the lease lasts LEASE_MS from it.
    expect(freedAt - killedAt).toBeLessThanOrEqual(LEASE_MS + 500);
    expect(freedAt - killedAt).toBeGreaterThanOrEqual(LEASE_MS - HEARTBEAT_MS - 200);
    // Every lease was renewed at most one heartbeat before the kill: all 20 have run out LEASE_MS after it.
    await sleep(Math.max(0, killedAt + LEASE_MS + 200 - Date.now()));
    expect(await openStreamCount(owner)).toBe(1);
    const more: Opened[] = [];
    for (let i = 0; i < MAX - 1; i++) more.push(await open(server.url, owner, e.path));
    expect(more.map((m) => m.status)).toEqual(Array(MAX - 1).fill(200));
    expectTooMany(await open(server.url, owner, e.path));
    await closeAll([s!, ...more]);
    await untilCount(owner, 0);
  });
});

describe("stream leases", () => {
  it("keeps production defaults within API.md's 60 s: leases of a vanished holder count until 45 s after their last renewal, then not", async () => {
    const { leaseMs, heartbeatMs, startWithinMs, idleMs } = STREAM_LEASE_DEFAULTS;
    expect(leaseMs).toBeLessThanOrEqual(45_000);
    expect(heartbeatMs * 2).toBeLessThan(leaseMs); // one failed renewal is survived
    expect(idleMs + heartbeatMs).toBeLessThanOrEqual(45_000);
    expect(startWithinMs).toBeLessThan(heartbeatMs);

    // Leases written by a process that then vanished (never renewed, never deleted), on a test clock.
    const owner = newOwner();
    const t0 = Date.now();
    for (let slot = 0; slot < MAX; slot++) expect(await claimSlot(owner, slot, `gone-${slot}`, t0)).toBe(true);
    const realNow = runtime.now;
    try {
      runtime.now = () => t0 + leaseMs - 1;
      expect(await openStreamCount(owner)).toBe(MAX);
      const refusal = await acquireStreamSlot(owner).catch((err: unknown) => err);
      expect(refusal).toBeInstanceOf(ApiError);
      expect(refusal).toMatchObject({ status: 429, code: "TOO_MANY_STREAMS", extra: { limit: MAX } });
      runtime.now = () => t0 + leaseMs;
      expect(await openStreamCount(owner)).toBe(0);
      const lease = await acquireStreamSlot(owner);
      expect(await openStreamCount(owner)).toBe(1);
      await lease.release();
      expect(await openStreamCount(owner)).toBe(0);
    } finally {
      runtime.now = realNow;
    }
  });

  it("releases a lease whose body is never read, or no longer read; ends a stream whose slot was taken over", async () => {
    configureStreamLeases({ leaseMs: 2_000, heartbeatMs: 300, startWithinMs: 200, idleMs: 600 });
    try {
      const owner = newOwner();
      // Never read (a response dropped after its handler ran): released after startWithinMs.
      const unread = await acquireStreamSlot(owner);
      expect(await openStreamCount(owner)).toBe(1);
      await sleep(400);
      expect(unread.isReleased).toBe(true);
      await untilCount(owner, 0);

      // Read once, then never again (a host that stopped reading): released at the first heartbeat after idleMs.
      const idle = await acquireStreamSlot(owner);
      let lost = 0;
      const readAt = Date.now();
      idle.watch({ lastReadAt: () => readAt, lost: () => (lost += 1) });
      await sleep(450);
      expect(idle.isReleased).toBe(false);
      expect(await openStreamCount(owner)).toBe(1);
      await sleep(600);
      expect(idle.isReleased).toBe(true);
      expect(lost).toBe(1);
      await untilCount(owner, 0);

      // Read all along, but its lease ran out (a stalled process) and another stream took the slot: the
      // renewal fails, the stream is told to end, and the other stream's lease stays.
      const stalled = await acquireStreamSlot(owner);
      let ended = 0;
      stalled.watch({ lastReadAt: () => Date.now(), lost: () => (ended += 1) });
      expect(await claimSlot(owner, stalled.slot, "newcomer", Date.now() + 2_000)).toBe(true);
      await sleep(500);
      expect(ended).toBe(1);
      expect(stalled.isReleased).toBe(true);
      expect(await liveSlots(owner, Date.now() + 2_000)).toEqual(new Map([[stalled.slot, "newcomer"]]));
    } finally {
      configureStreamLeases();
    }
  });
});
