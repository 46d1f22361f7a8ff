/**
 * The HTTP core (shared/http/app.ts, validate.ts) through a small app: routing (API.md §1.1), media types and
 * bodies (§1.3), headers (§1.4), order of checks (§1.6), problem bodies (§2), rate limiting (§4.2) and
 * `GET /health` (§6.1).
 */
import { once } from "node:events";
import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import * as v from "valibot";
import { serve } from "@hono/node-server";
import { createApp, pathParam, type Route } from "../../shared/http/app";
import { parse, readJsonBody } from "../../shared/http/validate";
import { authRoutes } from "../../shared/auth/routes";
import { healthRoutes } from "../../shared/service/health";
import { useOwner } from "../../shared/context";
import { createRuntime } from "../../shared/runtime";
import { ensureTable } from "../../shared/store/table";
import type { Config } from "../../shared/config";
import { setLogLevel } from "../../shared/log";
import { stackEnv, useTestRuntime } from "../support/runtime";
import { signIn, type SignedIn } from "../support/auth";
import { setRuntime, type Runtime } from "../../shared/current-runtime";

const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

const Thing = v.strictObject({ x: v.number(), nested: v.optional(v.strictObject({ y: v.string() })) });

const testRoutes: Route[] = [
  { method: "GET", path: "/things/{id}", handler: (c) => c.json({ id: pathParam(c, "id"), owner: useOwner() }) },
  { method: "DELETE", path: "/things/{id}", handler: (c) => c.body(null, 204) },
  { method: "POST", path: "/things/{id}:pause", handler: (c) => c.json({ paused: pathParam(c, "id") }) },
  {
    method: "POST",
    path: "/things",
    handler: async (c) => c.json(parse(Thing, await readJsonBody(c), "body"), 201),
  },
  { method: "GET", path: "/ping", public: true, handler: (c) => c.json({ pong: true }) },
  {
    method: "GET",
    path: "/boom",
    public: true,
    handler: () => {
      throw new Error("connection string postgres://admin:hunter2@db");
    },
  },
];
const makeApp = () => createApp([...authRoutes, ...healthRoutes, ...testRoutes]);
const app = makeApp();

let rt: Runtime;
let alice: SignedIn;

beforeAll(async () => {
  // Without the devnet no chain is configured; sign-in needs one (its RPC is only called by /health).
  const stackChains = JSON.parse(stackEnv().CHAINS ?? "[]") as unknown[];
  const chains = stackChains.length > 0 ? stackChains : [{ chainId: 11155111, rpcUrl: "http://127.0.0.1:9" }];
  rt = await useTestRuntime({ CHAINS: JSON.stringify(chains) });
  alice = await signIn(app);
});

afterEach(() => {
  setRuntime(rt);
});

/** Swaps in a runtime with changed settings (and optionally a fixed clock) for the rest of a test. */
function useSettings(patch: (c: Config) => Config, now?: () => number): Runtime {
  return setRuntime(createRuntime({ config: patch(rt.config), ...(now ? { now } : {}) }));
}

async function problemOf(res: Response) {
  expect(res.headers.get("content-type")).toBe("application/problem+json");
  const body = (await res.json()) as Record<string, unknown>;
  expect(body.instance).toBe(res.headers.get("x-request-id"));
  expect(body.status).toBe(res.status);
  expect(body.type).toBe("about:blank");
  return body;
}

const json = (body: unknown, headers: Record<string, string> = {}): RequestInit => ({
  method: "POST",
  headers: { "Content-Type": "application/json", ...alice.headers, ...headers },
  body: typeof body === "string" ? body : JSON.stringify(body),
});

describe("routing", () => {
  it("answers 404 NOT_FOUND as problem+json for an unknown path, without a token", async () => {
    const res = await app.request("/nowhere");
    expect(res.status).toBe(404);
    const body = await problemOf(res);
    expect(body).toEqual({
      type: "about:blank",
      title: "Not Found",
      status: 404,
      detail: expect.any(String),
      instance: expect.stringMatching(ULID),
      code: "NOT_FOUND",
    });
    expect(res.headers.get("www-authenticate")).toBeNull();
  });

  it("answers 405 METHOD_NOT_ALLOWED with Allow for a known path and another method, before authentication", async () => {
    const res = await app.request("/things/abc", { method: "PUT" });
    expect(res.status).toBe(405);
    expect((await problemOf(res)).code).toBe("METHOD_NOT_ALLOWED");
    expect(res.headers.get("allow")!.split(", ").sort()).toEqual(["DELETE", "GET", "HEAD", "OPTIONS"]);

    const post = await app.request("/ping", { method: "POST" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")!.split(", ").sort()).toEqual(["GET", "HEAD", "OPTIONS"]);
  });

  it("does not strip a trailing slash: /ping/ and /things/abc/ answer 404", async () => {
    expect((await app.request("/ping/")).status).toBe(404);
    const res = await app.request("/things/abc/", { headers: alice.headers });
    expect(res.status).toBe(404);
    expect((await problemOf(res)).code).toBe("NOT_FOUND");
  });

  it("matches %3A (either case) as ':' in the path", async () => {
    for (const path of ["/things/abc%3Apause", "/things/abc%3apause", "/things/abc:pause"]) {
      const res = await app.request(path, { method: "POST", headers: alice.headers });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ paused: "abc" });
    }
    const exchange = await app.request("/auth%3Aexchange", { method: "POST" });
    expect((await problemOf(exchange)).code).toBe("AUTH_MISSING_FIELDS");
  });

  it("passes percent-decoded path parameters to the handler", async () => {
    const res = await app.request("/things/a%20b", { headers: alice.headers });
    expect(await res.json()).toEqual({ id: "a b", owner: alice.owner });
  });

  it("answers HEAD on a GET route like GET, without a body", async () => {
    const get = await app.request("/things/abc", { headers: alice.headers });
    const head = await app.request("/things/abc", { method: "HEAD", headers: alice.headers });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe("");
    expect(head.headers.get("content-type")).toBe(get.headers.get("content-type"));
    expect(head.headers.get("cache-control")).toBe("no-store");
    expect(head.headers.get("x-api-version")).toBe("4");

    expect((await app.request("/ping", { method: "HEAD" })).status).toBe(200);
    expect((await app.request("/things/abc", { method: "HEAD" })).status).toBe(401);
  });

  it("answers a 204 with no body and no Content-Type", async () => {
    const res = await app.request("/things/abc", { method: "DELETE", headers: alice.headers });
    expect(res.status).toBe(204);
    expect(res.headers.get("content-type")).toBeNull();
    expect(await res.text()).toBe("");
  });

  it("sends success bodies as application/json; charset=utf-8", async () => {
    const res = await app.request("/ping");
    expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
  });
});

describe("OPTIONS (CORS preflight)", () => {
  it("answers 204 with the CORS headers and no authentication, even on a bearer route", async () => {
    const res = await app.request("/things/abc", {
      method: "OPTIONS",
      headers: {
        Origin: "https://app.example.com",
        "Access-Control-Request-Method": "DELETE",
        "Access-Control-Request-Headers": "authorization",
      },
    });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(res.headers.get("access-control-allow-credentials")).toBeNull();
    expect(res.headers.get("access-control-allow-methods")!.split(",")).toEqual(
      expect.arrayContaining(["GET", "POST", "PUT", "PATCH", "DELETE"]),
    );
    expect(res.headers.get("access-control-allow-headers")!.split(",")).toEqual(
      expect.arrayContaining(["Authorization", "Content-Type", "Idempotency-Key", "X-Request-Id", "X-Api-Version", "Last-Event-ID"]),
    );
    expect(res.headers.get("x-request-id")).toMatch(ULID);
    expect(res.headers.get("x-api-version")).toBe("4");
  });

  it("exposes the service headers to browsers on ordinary responses", async () => {
    const res = await app.request("/ping", { headers: { Origin: "https://app.example.com" } });
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(res.headers.get("access-control-expose-headers")!.split(",")).toEqual(
      expect.arrayContaining([
        "X-Request-Id",
        "X-Api-Version",
        "X-RateLimit-Limit",
        "X-RateLimit-Remaining",
        "X-RateLimit-Reset",
        "Retry-After",
        "Location",
        "Idempotency-Replayed",
      ]),
    );
  });
});

describe("X-Api-Version", () => {
  it("answers 400 UNSUPPORTED_API_VERSION for any value other than 4", async () => {
    for (const value of ["5", "3", "4.0", "v4"]) {
      const res = await app.request("/ping", { headers: { "X-Api-Version": value } });
      expect(res.status).toBe(400);
      expect((await problemOf(res)).code).toBe("UNSUPPORTED_API_VERSION");
    }
    expect((await app.request("/ping", { headers: { "X-Api-Version": "4" } })).status).toBe(200);
  });

  it("checks the version after the route and before authentication", async () => {
    const unknown = await app.request("/nowhere", { headers: { "X-Api-Version": "5" } });
    expect(unknown.status).toBe(404);
    const bearer = await app.request("/things/abc", { headers: { "X-Api-Version": "5" } });
    expect(bearer.status).toBe(400);
    expect((await problemOf(bearer)).code).toBe("UNSUPPORTED_API_VERSION");
  });

  it("is 4 on every response: success, 204, 4xx, 401, 405, 500 and preflight", async () => {
    setLogLevel("silent");
    const responses = await Promise.all([
      app.request("/ping"),
      app.request("/things/abc", { method: "DELETE", headers: alice.headers }),
      app.request("/nowhere"),
      app.request("/things/abc"),
      app.request("/ping", { method: "PUT" }),
      app.request("/boom"),
      app.request("/ping", { method: "OPTIONS" }),
      app.request("/things", json("[")),
    ]);
    setLogLevel("error");
    expect(responses.map((r) => r.status)).toEqual([200, 204, 404, 401, 405, 500, 204, 400]);
    for (const res of responses) expect(res.headers.get("x-api-version")).toBe("4");
  });
});

describe("X-Request-Id", () => {
  it("echoes a valid request id on success and in the problem instance", async () => {
    const id = "req-42.retry:A-b";
    const ok = await app.request("/ping", { headers: { "X-Request-Id": id } });
    expect(ok.headers.get("x-request-id")).toBe(id);
    const max = "a".repeat(128);
    expect((await app.request("/ping", { headers: { "X-Request-Id": max } })).headers.get("x-request-id")).toBe(max);
    const err = await app.request("/nowhere", { headers: { "X-Request-Id": id } });
    expect((await problemOf(err)).instance).toBe(id);
  });

  it("generates a ULID for a missing or invalid request id, which is also the problem instance", async () => {
    for (const bad of [undefined, "", "has space", "semi;colon", "a".repeat(129), "ünïcode"]) {
      const res = await app.request("/nowhere", bad === undefined ? {} : { headers: { "X-Request-Id": bad } });
      const generated = res.headers.get("x-request-id");
      expect(generated).toMatch(ULID);
      expect((await problemOf(res)).instance).toBe(generated);
    }
  });
});

describe("request bodies", () => {
  it("accepts application/json with parameters", async () => {
    const res = await app.request("/things", json({ x: 1 }, { "Content-Type": "application/json; charset=utf-8" }));
    expect(res.status).toBe(201);
    expect(await res.json()).toEqual({ x: 1 });
  });

  it("answers 415 UNSUPPORTED_MEDIA_TYPE for a non-empty body of another type", async () => {
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "application/jsonp"]) {
      const res = await app.request("/things", json({ x: 1 }, { "Content-Type": type }));
      expect(res.status).toBe(415);
      expect((await problemOf(res)).code).toBe("UNSUPPORTED_MEDIA_TYPE");
    }
    const none = await app.request("/things", { method: "POST", headers: alice.headers, body: new Uint8Array([123, 125]) });
    expect(none.status).toBe(415);
  });

  it("reads an empty body as {} and then validates it", async () => {
    const res = await app.request("/things", { method: "POST", headers: alice.headers });
    expect(res.status).toBe(400);
    const body = await problemOf(res);
    expect(body.code).toBe("VALIDATION_FAILED");
    expect(body.errors).toEqual([{ path: "body.x", message: expect.any(String) }]);
  });

  it("answers 413 PAYLOAD_TOO_LARGE above max_body_bytes, whether declared or streamed", async () => {
    useSettings((c) => ({ ...c, limits: { ...c.limits, maxBodyBytes: 100 } }));
    const exactly100 = JSON.stringify({ x: 1, pad: "" }).replace('""', `"${"p".repeat(100 - 16)}"`);
    expect(Buffer.byteLength(exactly100)).toBe(100);
    const atLimit = await app.request("/things", json(exactly100));
    expect(atLimit.status).toBe(400); // read and validated (pad is unknown), not refused
    expect((await problemOf(atLimit)).code).toBe("VALIDATION_FAILED");

    const over = await app.request("/things", json(exactly100.replace("pp", "ppp")));
    expect(over.status).toBe(413);
    expect((await problemOf(over)).code).toBe("PAYLOAD_TOO_LARGE");

    const declared = await app.request("/things", json({ x: 1 }, { "Content-Length": "5000" }));
    expect(declared.status).toBe(413);

    // Body transport comes before the media type: an oversized text/plain body is 413, not 415.
    const textOver = await app.request("/things", json("p".repeat(200), { "Content-Type": "text/plain" }));
    expect(textOver.status).toBe(413);
  });

  it("authenticates before reading the body: no token and an oversized body answers 401", async () => {
    useSettings((c) => ({ ...c, limits: { ...c.limits, maxBodyBytes: 100 } }));
    const res = await app.request("/things", { method: "POST", headers: { "Content-Type": "application/json" }, body: "x".repeat(500) });
    expect(res.status).toBe(401);
  });

  it.each([
    ["malformed JSON", "{"],
    ["a top-level array", "[1, 2]"],
    ["a top-level string", '"x"'],
    ["a top-level null", "null"],
    ["a top-level number", "42"],
    ["trailing garbage", '{"x": 1} {}'],
  ])("answers 400 INVALID_JSON for %s", async (_name, raw) => {
    const res = await app.request("/things", json(raw));
    expect(res.status).toBe(400);
    expect((await problemOf(res)).code).toBe("INVALID_JSON");
  });

  it("answers 400 INVALID_JSON for a body that is not UTF-8", async () => {
    const res = await app.request("/things", { ...json(""), body: new Uint8Array([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]) });
    expect(res.status).toBe(400);
    expect((await problemOf(res)).code).toBe("INVALID_JSON");
  });
});

describe("validation errors", () => {
  it("names the failing field path under body.", async () => {
    const res = await app.request("/things", json({ x: "one" }));
    const body = await problemOf(res);
    expect(res.status).toBe(400);
    expect(body).toMatchObject({
      title: "Bad Request",
      code: "VALIDATION_FAILED",
      errors: [{ path: "body.x", message: expect.any(String) }],
    });
  });

  it("names nested paths and unknown members, reporting every problem together", async () => {
    const res = await app.request("/things", json({ x: "one", nested: { y: 2 }, extra: true }));
    const body = await problemOf(res);
    const paths = (body.errors as { path: string }[]).map((e) => e.path).sort();
    expect(paths).toEqual(["body.extra", "body.nested.y", "body.x"]);
  });

  it("treats a top-level null as absent", async () => {
    const res = await app.request("/things", json({ x: 2, nested: null }));
    expect(res.status).toBe(201);
    expect(await res.json()).toEqual({ x: 2 });
  });
});

describe("authentication and caching", () => {
  it("needs a token on bearer routes and answers 401 AUTH_REQUIRED with WWW-Authenticate", async () => {
    const res = await app.request("/things/abc");
    expect(res.status).toBe(401);
    expect((await problemOf(res)).code).toBe("AUTH_REQUIRED");
    expect(res.headers.get("www-authenticate")).toBe("Bearer");
  });

  it("marks authenticated responses Cache-Control: no-store, errors included", async () => {
    const get = await app.request("/things/abc", { headers: alice.headers });
    expect(get.status).toBe(200);
    expect(get.headers.get("cache-control")).toBe("no-store");
    const created = await app.request("/things", json({ x: 1 }));
    expect(created.status).toBe(201);
    expect(created.headers.get("cache-control")).toBe("no-store");
    const invalid = await app.request("/things", json({}));
    expect(invalid.status).toBe(400);
    expect(invalid.headers.get("cache-control")).toBe("no-store");
  });

  it("leaves public responses' caching to the route", async () => {
    expect((await app.request("/ping")).headers.get("cache-control")).toBeNull();
    expect((await app.request("/.well-known/jwks.json")).headers.get("cache-control")).toBe("public, max-age=300");
  });

  it("runs the handler as the token's owner", async () => {
    const bob = await signIn(app);
    const res = await app.request("/things/abc", { headers: bob.headers });
    expect(((await res.json()) as { owner: string }).owner).toBe(bob.owner);
  });
});

describe("unexpected errors", () => {
  it("answers 500 INTERNAL with the generic detail and nothing from the error", async () => {
    setLogLevel("silent");
    const res = await app.request("/boom", { headers: { "X-Request-Id": "boom-1" } });
    setLogLevel("error");
    expect(res.status).toBe(500);
    const text = await res.clone().text();
    expect(text).not.toMatch(/hunter2|postgres|stack|at .*\.ts/);
    expect(await problemOf(res)).toEqual({
      type: "about:blank",
      title: "Internal Server Error",
      status: 500,
      detail: "An internal error occurred.",
      instance: "boom-1",
      code: "INTERNAL",
    });
  });
});

describe("rate limiting", () => {
  /** An app with fresh buckets (they live in the table: a fresh table) under a runtime with a burst of 3. */
  async function limitedApp() {
    const runtime = useSettings((c) => ({
      ...c,
      tableName: `rate-${randomUUID()}`,
      limits: { ...c.limits, rateLimitBurst: 3, rateLimitRps: 1 },
    }));
    await ensureTable(runtime.db, runtime.config.tableName);
    return makeApp();
  }

  it("answers the 4th request of a burst of 3 with 429 RATE_LIMITED, Retry-After and X-RateLimit-* headers", async () => {
    const limited = await limitedApp();
    const from = { "X-Forwarded-For": "203.0.113.7" };
    const remaining: (string | null)[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await limited.request("/ping", { headers: from });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-ratelimit-limit")).toBe("3");
      expect(res.headers.get("retry-after")).toBeNull();
      remaining.push(res.headers.get("x-ratelimit-remaining"));
    }
    expect(remaining).toEqual(["2", "1", "0"]);

    const res = await limited.request("/ping", { headers: from });
    expect(res.status).toBe(429);
    expect((await problemOf(res)).code).toBe("RATE_LIMITED");
    expect(res.headers.get("retry-after")).toBe("1");
    expect(res.headers.get("x-ratelimit-limit")).toBe("3");
    expect(res.headers.get("x-ratelimit-remaining")).toBe("0");
    const reset = Number(res.headers.get("x-ratelimit-reset"));
    expect(Number.isInteger(reset)).toBe(true);
    expect(reset).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000));
    expect(reset).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 4);

    // Another client address has its own bucket.
    expect((await limited.request("/ping", { headers: { "X-Forwarded-For": "203.0.113.8" } })).status).toBe(200);
  });

  it("on a real server, keys public routes by the socket address and ignores a client-written X-Forwarded-For", async () => {
    const limited = await limitedApp();
    const server = serve({ fetch: limited.fetch, port: 0, hostname: "127.0.0.1" });
    try {
      if (!server.listening) await once(server, "listening");
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/ping`;
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await fetch(url, { headers: { "X-Forwarded-For": `198.51.100.${i}` } })).status);
      expect(statuses).toEqual([200, 200, 200, 429]);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it("limits bearer routes per subject, after authentication", async () => {
    const limited = await limitedApp();
    for (let i = 0; i < 3; i++) expect((await limited.request("/things/abc", { headers: alice.headers })).status).toBe(200);
    const res = await limited.request("/things/abc", { headers: alice.headers });
    expect(res.status).toBe(429);
    expect(res.headers.get("cache-control")).toBe("no-store");
    // Failed authentication never reaches the limiter: 401, without rate-limit headers.
    const anonymous = await limited.request("/things/abc");
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("x-ratelimit-limit")).toBeNull();
    // Another subject has its own bucket.
    const bob = await signIn(limited);
    expect((await limited.request("/things/abc", { headers: bob.headers })).status).toBe(200);
  });

  it("puts the rate-limit headers on error responses of requests that reached the limiter", async () => {
    const limited = await limitedApp();
    const res = await limited.request("/things", json({}));
    expect(res.status).toBe(400);
    expect(res.headers.get("x-ratelimit-remaining")).toBe("2");
  });
});

describe("GET /health", () => {
  let rpc: Server;
  let rpcUrl: string;
  let rpcCalls = 0;
  let answerChainId = "0x309"; // 777

  beforeAll(async () => {
    rpc = createServer((req, res) => {
      rpcCalls++;
      req.resume().on("end", () => {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ jsonrpc: "2.0", id: 1, result: answerChainId }));
      });
    });
    await new Promise<void>((resolve) => rpc.listen(0, "127.0.0.1", resolve));
    rpcUrl = `http://127.0.0.1:${(rpc.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => rpc.close(() => resolve()));
  });

  const withChain =
    (rpcUrlFor: string) =>
    (c: Config): Config => ({ ...c, chains: [{ ...c.chains[0]!, chainId: 777, rpcUrl: rpcUrlFor }], defaultChainId: 777 });

  it("is public and answers {status, version, chainId}", async () => {
    const res = await app.request("/health");
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toEqual({
      status: expect.stringMatching(/^(ok|degraded)$/),
      version: rt.config.serviceVersion,
      chainId: rt.config.defaultChainId,
    });
    expect(res.headers.get("x-ratelimit-limit")).not.toBeNull();
  });

  it("says ok when the datastore, key service and default-chain RPC answer", async () => {
    useSettings(withChain(rpcUrl));
    const res = await app.request("/health");
    expect(await res.json()).toEqual({ status: "ok", version: rt.config.serviceVersion, chainId: 777 });
  });

  it("says degraded, still with 200, when the RPC is unreachable", async () => {
    useSettings(withChain("http://127.0.0.1:9"));
    const res = await app.request("/health");
    expect(res.status).toBe(200);
    expect(((await res.json()) as { status: string }).status).toBe("degraded");
  });

  it("says degraded when the datastore table is missing", async () => {
    useSettings((c) => ({ ...withChain(rpcUrl)(c), tableName: "no-such-table" }));
    expect(((await (await app.request("/health")).json()) as { status: string }).status).toBe("degraded");
  });

  it("says degraded when the RPC serves another chain", async () => {
    answerChainId = "0x1";
    try {
      useSettings(withChain(rpcUrl));
      expect(((await (await app.request("/health")).json()) as { status: string }).status).toBe("degraded");
    } finally {
      answerChainId = "0x309";
    }
  });

  it("caches the checks for 10 s (fake clock)", async () => {
    let now = Date.parse("2026-11-22T10:00:00.000Z");
    useSettings(withChain(rpcUrl), () => now);
    const status = async () => ((await (await app.request("/health")).json()) as { status: string }).status;
    const before = rpcCalls;
    expect(await status()).toBe("ok");
    expect(rpcCalls).toBe(before + 1);

    answerChainId = "0x1"; // the RPC goes wrong, but the cached verdict stands for 10 s
    try {
      now += 9_999;
      expect(await status()).toBe("ok");
      expect(rpcCalls).toBe(before + 1);
      now += 1;
      expect(await status()).toBe("degraded");
      expect(rpcCalls).toBe(before + 2);
    } finally {
      answerChainId = "0x309";
    }
  });
});
