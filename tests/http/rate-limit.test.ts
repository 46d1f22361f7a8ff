/**
 * The shared rate limiter (API.md §4.2, shared/http/rate-limit.ts): one GCRA bucket per subject in the table.
 * Each app made by createApp() has its own limiter (its own hint cache), like one Lambda instance; the tests
 * put two of them, in process and behind two real HTTP servers, on one table and one fixed clock.
 */
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { GetCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { createApp, type Route } from "../../shared/http/app";
import { RateLimiter, RateSubject } from "../../shared/http/rate-limit";
import { authRoutes } from "../../shared/auth/routes";
import { useOwner } from "../../shared/context";
import { createRuntime } from "../../shared/runtime";
import { Keys } from "../../shared/store/item-keys";
import { log } from "../../shared/log";
import { stackEnv, useTestRuntime } from "../support/runtime";
import { signIn, type RequestTarget } from "../support/auth";
import { startTestServer } from "../support/server";
import { setRuntime, useRuntime, type Runtime } from "../../shared/current-runtime";

const BURST = 4;
const RPS = 2;
const T = 1000 / RPS; // emission interval, ms

const testRoutes: Route[] = [
  { method: "GET", path: "/things", handler: (c) => c.json({ owner: useOwner() }) },
  { method: "GET", path: "/ping", public: true, handler: (c) => c.json({ pong: true }) },
];
/** A `request(path, init)` target that goes over the wire to a real server. */
const overHttp = (url: string): RequestTarget => ({ request: (path, init) => fetch(url + path, init) });

/** One "instance": an app with its own limiter (hint cache). */
const instance = () => createApp([...authRoutes, ...testRoutes]);

let rt: Runtime;
/** The fixed clock (ms): a whole second + 250 ms, so Reset values round in both directions. */
let clock: number;

beforeAll(async () => {
  const stackChains = JSON.parse(stackEnv().CHAINS ?? "[]") as unknown[];
  const chains = stackChains.length > 0 ? stackChains : [{ chainId: 11155111, rpcUrl: "http://127.0.0.1:9" }];
  rt = await useTestRuntime({ CHAINS: JSON.stringify(chains) });
});

/** A runtime on the file's table with burst 4, 2 per second and the fixed clock. */
function useFixedClock(): Runtime {
  clock = Math.floor(Date.now() / 1000) * 1000 + 250;
  return setRuntime(
    createRuntime({
      config: { ...rt.config, limits: { ...rt.config.limits, rateLimitBurst: BURST, rateLimitRps: RPS } },
      now: () => clock,
    }),
  );
}

afterEach(() => {
  vi.restoreAllMocks();
  setRuntime(rt);
});

const seconds = (ms: number) => Math.ceil(ms / 1000);

interface Seen {
  status: number;
  limit: string | null;
  remaining: string | null;
  reset: string | null;
  retryAfter: string | null;
}

async function get(target: RequestTarget, path: string, headers: Record<string, string>): Promise<Seen> {
  const res = await target.request(path, { headers });
  await res.arrayBuffer();
  const h = (name: string) => res.headers.get(name);
  return {
    status: res.status,
    limit: h("x-ratelimit-limit"),
    remaining: h("x-ratelimit-remaining"),
    reset: h("x-ratelimit-reset"),
    retryAfter: h("retry-after"),
  };
}

const allowed = (remaining: number, resetMs: number): Seen => ({
  status: 200,
  limit: String(BURST),
  remaining: String(remaining),
  reset: String(seconds(resetMs)),
  retryAfter: null,
});
const denied = (resetMs: number, retryAfter: number): Seen => ({
  status: 429,
  limit: String(BURST),
  remaining: "0",
  reset: String(seconds(resetMs)),
  retryAfter: String(retryAfter),
});

/** Counts the UpdateItem requests the runtime's table client sends from now on. */
function countWrites(runtime: Runtime) {
  const counter = { updates: 0 };
  const send = runtime.db.send.bind(runtime.db);
  vi.spyOn(runtime.db, "send").mockImplementation(((command: unknown) => {
    if (command instanceof UpdateCommand) counter.updates++;
    return send(command as never);
  }) as never);
  return counter;
}

async function storedBucket(subject: string) {
  const { db, config } = useRuntime();
  return (await db.send(new GetCommand({ TableName: config.tableName, Key: Keys.rateLimit(subject), ConsistentRead: true }))).Item;
}

describe("one bucket per subject shared by every instance", () => {
  it("two instances on one table together allow exactly the burst, then one more after T, with exact headers", async () => {
    useFixedClock();
    const [a, b] = [instance(), instance()];
    const alice = await signIn(a);
    const t0 = clock;

    const seen: Seen[] = [];
    for (let i = 0; i < BURST; i++) seen.push(await get(i % 2 === 0 ? a : b, "/things", alice.headers));
    expect(seen).toEqual([allowed(3, t0 + T), allowed(2, t0 + 2 * T), allowed(1, t0 + 3 * T), allowed(0, t0 + 4 * T)]);
    // Both instances now deny: the bucket is full until t0 + 4T; a token comes back at t0 + T.
    expect(await get(a, "/things", alice.headers)).toEqual(denied(t0 + 4 * T, 1));
    expect(await get(b, "/things", alice.headers)).toEqual(denied(t0 + 4 * T, 1));

    clock += T - 1; // 1 ms short of a token: still denied
    expect(await get(b, "/things", alice.headers)).toEqual(denied(t0 + 4 * T, 1));
    clock += 1; // exactly one token back: one request, on either instance, then none
    expect(await get(b, "/things", alice.headers)).toEqual(allowed(0, t0 + 5 * T));
    expect(await get(a, "/things", alice.headers)).toEqual(denied(t0 + 5 * T, 1));
  });

  it("two real HTTP servers on one table, requests alternating between them, allow exactly the burst", async () => {
    useFixedClock();
    const servers = await Promise.all([startTestServer(instance()), startTestServer(instance())]);
    try {
      const targets = servers.map((s) => overHttp(s.url));
      const bob = await signIn(instance());
      const t0 = clock;
      const statuses: number[] = [];
      const remaining: (string | null)[] = [];
      for (let i = 0; i < BURST + 2; i++) {
        const seen = await get(targets[i % 2]!, "/things", bob.headers);
        statuses.push(seen.status);
        remaining.push(seen.remaining);
      }
      expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
      expect(remaining).toEqual(["3", "2", "1", "0", "0", "0"]);

      clock += T;
      expect(await get(targets[1]!, "/things", bob.headers)).toEqual(allowed(0, t0 + 5 * T));
      expect(await get(targets[0]!, "/things", bob.headers)).toEqual(denied(t0 + 5 * T, 1));

      // Public routes: one bucket per socket address across both servers.
      const pings: number[] = [];
      for (let i = 0; i < BURST + 1; i++) pings.push((await get(targets[i % 2]!, "/ping", {})).status);
      expect(pings).toEqual([200, 200, 200, 200, 429]);
    } finally {
      await Promise.all(servers.map((s) => s.close()));
    }
  });

  it("concurrent requests through two instances never allow more than the burst", async () => {
    useFixedClock();
    const [a, b] = [instance(), instance()];
    const carol = await signIn(a);
    const results = await Promise.all(Array.from({ length: 3 * BURST }, (_, i) => get(i % 2 === 0 ? a : b, "/things", carol.headers)));
    expect(results.filter((r) => r.status === 200)).toHaveLength(BURST);
    expect(results.filter((r) => r.status === 429)).toHaveLength(2 * BURST);
    expect(
      results
        .map((r) => r.remaining)
        .filter((r) => r !== "0")
        .sort(),
    ).toEqual(["1", "2", "3"]);
  });
});

describe("bucket semantics", () => {
  it("a denied request consumes nothing and writes nothing", async () => {
    useFixedClock();
    const app = instance();
    const dave = await signIn(app);
    const t0 = clock;
    for (let i = 0; i < BURST; i++) expect((await get(app, "/things", dave.headers)).status).toBe(200);
    const before = await storedBucket(RateSubject.owner(dave.owner));
    for (let i = 0; i < 5; i++) expect(await get(app, "/things", dave.headers)).toEqual(denied(t0 + BURST * T, 1));
    expect(await storedBucket(RateSubject.owner(dave.owner))).toEqual(before);

    clock += T; // had the denials taken tokens, this would still be denied
    expect(await get(app, "/things", dave.headers)).toEqual(allowed(0, t0 + (BURST + 1) * T));
  });

  it("a bucket left idle is full again: the next burst is allowed in full", async () => {
    useFixedClock();
    const [a, b] = [instance(), instance()];
    const erin = await signIn(a);
    for (let i = 0; i < BURST; i++) expect((await get(a, "/things", erin.headers)).status).toBe(200);
    expect((await get(a, "/things", erin.headers)).status).toBe(429);

    clock += 600_000; // ten minutes later the stored tat is long stale
    const t1 = clock;
    const seen: Seen[] = [];
    for (let i = 0; i < BURST; i++) seen.push(await get(i % 2 === 0 ? b : a, "/things", erin.headers));
    expect(seen).toEqual([allowed(3, t1 + T), allowed(2, t1 + 2 * T), allowed(1, t1 + 3 * T), allowed(0, t1 + 4 * T)]);
    expect((await get(b, "/things", erin.headers)).status).toBe(429);
  });

  it("a partly refilled bucket gives back whole tokens only", async () => {
    useFixedClock();
    const app = instance();
    const frank = await signIn(app);
    const t0 = clock;
    for (let i = 0; i < BURST; i++) await get(app, "/things", frank.headers);
    clock += 2 * T + T / 2; // 2.5 tokens back
    expect(await get(app, "/things", frank.headers)).toEqual(allowed(1, t0 + 5 * T));
    expect(await get(app, "/things", frank.headers)).toEqual(allowed(0, t0 + 6 * T));
    expect(await get(app, "/things", frank.headers)).toEqual(denied(t0 + 6 * T, 1));
  });

  it("subjects are independent: another owner and a client address each have their own bucket", async () => {
    useFixedClock();
    const app = instance();
    const [gina, hal] = [await signIn(app), await signIn(app)];
    const t0 = clock;
    for (let i = 0; i < BURST; i++) await get(app, "/things", gina.headers);
    expect((await get(app, "/things", gina.headers)).status).toBe(429);
    expect(await get(app, "/things", hal.headers)).toEqual(allowed(3, t0 + T));
    expect(await get(app, "/ping", { "X-Forwarded-For": "203.0.113.50" })).toEqual(allowed(3, t0 + T));
    expect(await get(app, "/ping", { "X-Forwarded-For": "203.0.113.51" })).toEqual(allowed(3, t0 + T));
    // The JWT subject's case never splits a bucket.
    expect(RateSubject.owner(gina.owner)).toBe(`sub:${gina.owner.toLowerCase()}`);
  });

  it("stores one small item per subject with its schema version and a TTL after the bucket is full again", async () => {
    const runtime = useFixedClock();
    const limiter = new RateLimiter();
    await limiter.take("ip:203.0.113.60");
    const item = await storedBucket("ip:203.0.113.60");
    expect(item).toEqual({
      ...Keys.rateLimit("ip:203.0.113.60"),
      type: "rateLimit",
      v: 1,
      tat: (clock + T) * 1000, // µs
      expiresAt: expect.any(Number),
    });
    expect(item!.expiresAt).toBeGreaterThanOrEqual(seconds(clock + BURST * T));
    expect(item!.expiresAt).toBeLessThanOrEqual(seconds(clock + BURST * T) + 2);
    expect(runtime.config.limits.rateLimitBurst).toBe(BURST);
  });

  it("a clock far behind the stored bucket (a skewed instance, a test clock) resets it instead of locking the subject out", async () => {
    useFixedClock();
    const limiter = new RateLimiter();
    for (let i = 0; i < BURST; i++) await limiter.take("ip:203.0.113.61");
    clock -= 86_400_000;
    expect((await limiter.take("ip:203.0.113.61"))?.allowed).toBe(true);
  });
});

describe("reads run while the limiter decides", () => {
  it("a GET overlaps its handler with the limiter's write, yet a denial still wins over the handler's answer", async () => {
    useFixedClock();
    let handled = 0;
    const routes: Route[] = [
      { method: "GET", path: "/missing", handler: () => (handled++, Promise.reject(new Error("unexpected"))) },
      { method: "POST", path: "/write", handler: (c) => (handled++, c.json({ wrote: true })) },
    ];
    const [a, b] = [createApp([...authRoutes, ...routes]), createApp([...authRoutes, ...routes])];
    const carol = await signIn(a);
    for (let i = 0; i < BURST; i++) expect((await a.request("/write", { method: "POST", headers: carol.headers })).status).toBe(200);
    expect(handled).toBe(BURST);
    // b has no hint: its GET handler runs concurrently and fails, but the limiter's 429 is the answer.
    const read = await b.request("/missing", { headers: carol.headers });
    expect(read.status).toBe(429);
    expect(((await read.json()) as { code: string }).code).toBe("RATE_LIMITED");
    expect(handled).toBe(BURST + 1);
    // A write never runs before the limiter allowed it.
    expect((await b.request("/write", { method: "POST", headers: carol.headers })).status).toBe(429);
    expect(handled).toBe(BURST + 1);
  });
});

describe("cost", () => {
  it("a busy subject costs one UpdateItem per allowed request, none for a denial its instance already knows, one after idle", async () => {
    const runtime = useFixedClock();
    const limiter = new RateLimiter();
    const writes = countWrites(runtime);
    const subject = "ip:203.0.113.70";
    for (let i = 0; i < BURST + 2; i++) await limiter.take(subject);
    expect(writes.updates).toBe(BURST); // the two denials were answered from the remembered tat
    const stranger = new RateLimiter(); // another instance learns the denial with one failed conditional write
    expect((await stranger.take(subject))?.allowed).toBe(false);
    expect(writes.updates).toBe(BURST + 1);
    clock += 3_600_000;
    expect((await limiter.take(subject))?.remaining).toBe(BURST - 1);
    expect(writes.updates).toBe(BURST + 2);
  });

  it("keeps denying a flooding subject while the table is unreachable (no fail open for a known denial)", async () => {
    const runtime = useFixedClock();
    const limiter = new RateLimiter();
    const subject = "ip:203.0.113.72";
    for (let i = 0; i < BURST; i++) expect((await limiter.take(subject))?.allowed).toBe(true);
    setRuntime(createRuntime({ config: { ...runtime.config, dynamoEndpoint: "http://127.0.0.1:9" }, now: () => clock }));
    try {
      for (let i = 0; i < 20; i++) expect((await limiter.take(subject))?.allowed).toBe(false);
    } finally {
      setRuntime(runtime);
    }
  });

  it("an instance without a hint for a busy subject pays one extra write once", async () => {
    const runtime = useFixedClock();
    const subject = "ip:203.0.113.71";
    await new RateLimiter().take(subject);
    const writes = countWrites(runtime);
    const other = new RateLimiter();
    expect((await other.take(subject))?.remaining).toBe(BURST - 2);
    expect(writes.updates).toBe(2);
    expect((await other.take(subject))?.remaining).toBe(BURST - 3);
    expect(writes.updates).toBe(3);
  });
});

describe("failing open", () => {
  it("serves the request without rate-limit headers, with a warning, when DynamoDB is unreachable", async () => {
    const runtime = setRuntime(createRuntime({ config: { ...rt.config, dynamoEndpoint: "http://127.0.0.1:9" } }));
    const warn = vi.spyOn(log, "warn").mockImplementation(() => undefined);
    const seen = await get(instance(), "/ping", { "X-Forwarded-For": "203.0.113.80" });
    expect(seen).toEqual({ status: 200, limit: null, remaining: null, reset: null, retryAfter: null });
    expect(warn).toHaveBeenCalledWith(expect.stringContaining("fail open"), expect.objectContaining({ subject: "ip:203.0.113.80" }));
    expect(runtime.config.dynamoEndpoint).toBe("http://127.0.0.1:9");
  });

  it("serves the request when DynamoDB throttles, and on a missing table", async () => {
    const runtime = useFixedClock();
    const warn = vi.spyOn(log, "warn").mockImplementation(() => undefined);
    const throttled = Object.assign(new Error("Rate of requests exceeds the allowed throughput."), {
      name: "ProvisionedThroughputExceededException",
    });
    const send = vi.spyOn(runtime.db, "send").mockRejectedValue(throttled);
    const seenThrottled = await get(instance(), "/ping", { "X-Forwarded-For": "203.0.113.81" });
    expect(seenThrottled).toEqual({ status: 200, limit: null, remaining: null, reset: null, retryAfter: null });
    expect(warn).toHaveBeenCalledTimes(1);
    send.mockRestore();

    setRuntime(createRuntime({ config: { ...rt.config, tableName: "no-such-table" } }));
    const seen = await get(instance(), "/ping", { "X-Forwarded-For": "203.0.113.82" });
    expect(seen.status).toBe(200);
    expect(seen.limit).toBeNull();
    expect(warn).toHaveBeenCalledTimes(2);
  });
});
