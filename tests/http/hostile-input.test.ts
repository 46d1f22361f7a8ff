/**
 * Hostile input, through the real HTTP server (the node adapter `npm start` uses, on a port) and, where the
 * request must be malformed, raw bytes on a socket. Each case is something a hostile or careless client sent
 * and the answer API.md gives it. New routes get their cases here: cursors, bodies, paths, headers,
 * parser-level errors, chain ids, upstream failures, ownership.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request as httpRequest } from "node:http";
import { privateKeyToAccount, generatePrivateKey } from "viem/accounts";
import { createServiceApp } from "../../shared/service/app";
import { buildConfig } from "../../shared/config";
import { createRuntime } from "../../shared/runtime";
import { encodeCursor } from "../../shared/http/paging";
import { stackEnv, useTestRuntime } from "../support/runtime";
import { signIn, type SignedIn } from "../support/auth";
import { httpTarget, rawExchange, startTestServer, type TestServer } from "../support/server";
import { setRuntime, type Runtime } from "../../shared/current-runtime";

let runtime: Runtime;
let server: TestServer;
let alice: SignedIn;
let bob: SignedIn;
let wallet: string;

beforeAll(async () => {
  // Every sign-in comes from 127.0.0.1 here, so the per-IP bucket of the public routes must hold them all.
  runtime = await useTestRuntime({ RATE_LIMIT_BURST: "100000", RATE_LIMIT_RPS: "100000", MAX_SECRETS_PER_OWNER: "2" });
  server = await startTestServer(createServiceApp());
  [alice, bob] = await Promise.all([signIn(httpTarget(server.url)), signIn(httpTarget(server.url))]);
  const created = await send(alice, "POST", "/wallets", { body: { salt: "7" } });
  expect(created.status).toBe(201);
  wallet = created.json.address as string;
});

afterAll(async () => {
  await server?.close();
});

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: Record<string, unknown>;
}

async function send(
  who: SignedIn | undefined,
  method: string,
  path: string,
  opts: { body?: unknown; raw?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const body = opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body));
  const res = await fetch(server.url + path, {
    method,
    headers: { ...(who?.headers ?? {}), ...(body !== undefined ? { "Content-Type": "application/json" } : {}), ...opts.headers },
    body,
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = text ? JSON.parse(text) : {};
  } catch {
    // not JSON: the caller asserts on text
  }
  return { status: res.status, headers: res.headers, text, json };
}

function expectProblem(a: Answer, status: number, code: string) {
  expect({ status: a.status, code: a.json.code }).toEqual({ status, code });
  expect(a.headers.get("content-type")).toBe("application/problem+json");
  expect(a.json.instance).toBe(a.headers.get("x-request-id"));
}

const b64 = (json: string) => Buffer.from(json).toString("base64url");

describe("cursors", () => {
  const lists = () => ["/secrets", `/wallets/${wallet}/withdrawals`];

  it("answers 400 INVALID_CURSOR for a cursor that decodes to JSON null (was 500), on every paged list", async () => {
    for (const path of lists()) {
      for (const param of ["after", "before"]) {
        expectProblem(await send(alice, "GET", `${path}?${param}=bnVsbA`), 400, "INVALID_CURSOR");
      }
    }
  });

  it("answers 400 INVALID_CURSOR for any other JSON that is not a cursor, and for undecodable text", async () => {
    const values = ["[]", "1", '"x"', "true", "{}", '{"e":null,"o":null,"p":null}', "[null]"].map(b64);
    values.push("%%%", "not-base64!", "A");
    for (const path of lists()) {
      for (const cursor of values) {
        expectProblem(await send(alice, "GET", `${path}?after=${encodeURIComponent(cursor)}`), 400, "INVALID_CURSOR");
      }
    }
  });

  it("refuses a cursor of another endpoint or another caller, and one over 512 characters", async () => {
    const own = encodeCursor("GET /secrets", alice.owner, "SECRET#A#0");
    expectProblem(await send(bob, "GET", `/secrets?after=${own}`), 400, "INVALID_CURSOR");
    expectProblem(await send(alice, "GET", `/wallets/${wallet}/withdrawals?after=${own}`), 400, "INVALID_CURSOR");
    expect((await send(alice, "GET", `/secrets?after=${own}`)).status).toBe(200);
    expectProblem(await send(alice, "GET", `/secrets?after=${"A".repeat(513)}`), 400, "VALIDATION_FAILED");
  });
});

describe("bodies", () => {
  it("refuses a 50 MiB chunked body without Content-Length with 413 before it has all been sent", async () => {
    const total = 50 * 1024 * 1024;
    const chunk = Buffer.alloc(64 * 1024, "a");
    const result = await new Promise<{ status: number; sentWhenAnswered: number; body: string }>((resolve, reject) => {
      let sent = 0;
      let answeredAt = -1;
      const req = httpRequest(
        {
          host: "127.0.0.1",
          port: server.port,
          method: "POST",
          path: "/auth:exchange",
          headers: { "Content-Type": "application/json", "Transfer-Encoding": "chunked" },
        },
        (res) => {
          answeredAt = sent;
          let body = "";
          res.on("data", (d) => (body += d));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, sentWhenAnswered: answeredAt, body }));
        },
      );
      req.on("error", (err) => (answeredAt >= 0 ? undefined : reject(err)));
      const pump = () => {
        while (sent < total && answeredAt < 0) {
          sent += chunk.length;
          if (!req.write(chunk)) return void req.once("drain", pump);
        }
        if (answeredAt < 0) req.end();
      };
      pump();
    });
    expect(result.status).toBe(413);
    expect(JSON.parse(result.body).code).toBe("PAYLOAD_TOO_LARGE");
    // The answer came while the client was still sending: the server read about 1 MiB plus socket buffers.
    expect(result.sentWhenAnswered).toBeLessThan(16 * 1024 * 1024);
  });

  it("refuses a declared Content-Length over 1 MiB at once, and accepts exactly 1 MiB of JSON", async () => {
    const raw = await rawExchange(
      server.port,
      `POST /auth:exchange HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${1024 * 1024 + 1}\r\n\r\n{`,
    );
    expect(raw).toMatch(/^HTTP\/1\.1 413 /);
    expect(raw).toContain('"code":"PAYLOAD_TOO_LARGE"');
    const exact = JSON.stringify({ value: "x".repeat(1024 * 1024 - 12) });
    expect(Buffer.byteLength(exact)).toBe(1024 * 1024);
    // Exactly at the limit the body is read and validated (the value is too long for a secret, not the body).
    const answer = await send(alice, "PUT", "/secrets/BIG", { raw: exact });
    expectProblem(answer, 400, "VALIDATION_FAILED");
  });

  it("refuses a body nested deeper than 512 levels with 400 (was 500: a stack overflow, or DynamoDB's nesting limit)", async () => {
    const nested = (levels: number) => "[".repeat(levels) + "]".repeat(levels);
    for (const levels of [513, 600, 200_000]) {
      const answer = await send(alice, "PUT", "/secrets/DEEP", { raw: `{"value":"v","extra":${nested(levels - 1)}}` });
      expectProblem(answer, 400, "VALIDATION_FAILED");
      expect(answer.json.errors).toEqual([{ path: "body", message: "is nested more than 512 levels deep" }]);
    }
    // Deeper than DynamoDB's 32 levels and up to the limit, a workflow document is stored whole (as JSON text) and reads back.
    const workflow = (levels: number) =>
      `{"smartWalletAddress":"${wallet}","trigger":{"id":"t","name":"start","type":"manual","config":{}},` +
      `"nodes":[{"id":"a","name":"a","type":"customCode","config":{"source":"return 1"}}],"inputVariables":{"x":${nested(levels - 2)}}}`;
    for (const levels of [33, 512]) {
      const stored = await send(alice, "POST", "/workflows", { raw: workflow(levels) });
      expect(stored.status).toBe(201);
      const read = (await send(alice, "GET", `/workflows/${stored.json.id as string}`)).json as { inputVariables: { x: unknown } };
      expect(JSON.stringify(read.inputVariables.x)).toBe(nested(levels - 2));
    }
    expectProblem(await send(alice, "POST", "/workflows", { raw: workflow(513) }), 400, "VALIDATION_FAILED");
    // Brackets inside strings are text, not nesting.
    expect((await send(alice, "PUT", "/secrets/DEEP", { body: { value: "[".repeat(100) } })).status).toBe(201);
    expect((await send(alice, "DELETE", "/secrets/DEEP")).status).toBe(204);
  });

  it("answers authentication before reading a body: 401 for an oversized body without a token", async () => {
    expectProblem(await send(undefined, "PUT", "/secrets/X", { raw: "x".repeat(2 * 1024 * 1024) }), 401, "AUTH_REQUIRED");
  });

  it("answers 415 for a body that is not JSON, 400 INVALID_JSON for broken JSON, a top-level array, invalid UTF-8", async () => {
    expectProblem(
      await send(alice, "PUT", "/secrets/X", { raw: "value=1", headers: { "Content-Type": "text/plain" } }),
      415,
      "UNSUPPORTED_MEDIA_TYPE",
    );
    for (const raw of ["{", "[]", "null", '"text"', '{"value":"\\ud800"', "1e999999"]) {
      expectProblem(await send(alice, "PUT", "/secrets/X", { raw }), 400, "INVALID_JSON");
    }
    const invalidUtf8 = Buffer.concat([Buffer.from('{"value":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
    const res = await fetch(`${server.url}/secrets/X`, {
      method: "PUT",
      headers: { ...alice.headers, "Content-Type": "application/json" },
      body: invalidUtf8,
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { code: string }).code).toBe("INVALID_JSON");
  });
});

describe("paths", () => {
  it("decodes percent-encoded letters before routing: /%77allets is /wallets", async () => {
    const plain = await send(alice, "GET", "/wallets");
    const encoded = await send(alice, "GET", "/%77%61llets");
    expect(encoded.status).toBe(200);
    expect(encoded.json).toEqual(plain.json);
    expect((await send(alice, "GET", `/wallets/${wallet}%3agetNonce`)).status).toBe(200);
  });

  it("decodes a path parameter exactly once", async () => {
    expect((await send(alice, "PUT", "/secrets/%41PI_%4bEY", { body: { value: "v" } })).status).toBe(201);
    const names = ((await send(alice, "GET", "/secrets")).json.data as { name: string }[]).map((s) => s.name);
    expect(names).toContain("API_KEY");
    // %2541 is the text "%41", not "A": an invalid secret name, never API_KEY's sibling "A".
    const twice = await send(alice, "PUT", "/secrets/%2541", { body: { value: "v" } });
    expectProblem(twice, 400, "VALIDATION_FAILED");
    expect(twice.json.errors).toEqual([expect.objectContaining({ path: "path.name" })]);
    expect((await send(alice, "DELETE", "/secrets/API_KEY")).status).toBe(204);
  });

  it("never lets an encoded slash split a segment, and keeps trailing slashes and malformed escapes unrouted", async () => {
    expectProblem(await send(alice, "GET", "/secrets%2Fx"), 404, "NOT_FOUND");
    expectProblem(await send(alice, "PUT", "/secrets/A%2FB", { body: { value: "v" } }), 400, "VALIDATION_FAILED");
    expectProblem(await send(alice, "GET", "/%2577allets"), 404, "NOT_FOUND");
    expectProblem(await send(alice, "GET", "/wallets/"), 404, "NOT_FOUND");
    expectProblem(await send(alice, "GET", "/wall%zzets"), 404, "NOT_FOUND");
    expectProblem(await send(alice, "GET", "/wallets/%E0%A4%A/withdrawals"), 404, "WALLET_NOT_FOUND");
    expectProblem(await send(alice, "PATCH", "/wallets/0xZZ", { body: {} }), 404, "WALLET_NOT_FOUND");
  });
});

describe("headers and empty responses", () => {
  it("sends 201 and 204 without a Content-Type (API.md §1.3)", async () => {
    const created = await send(alice, "PUT", "/secrets/EMPTY_BODY", { body: { value: "v" } });
    const replaced = await send(alice, "PUT", "/secrets/EMPTY_BODY", { body: { value: "w" } });
    const deleted = await send(alice, "DELETE", "/secrets/EMPTY_BODY");
    const preflight = await send(undefined, "OPTIONS", "/secrets", {
      headers: { Origin: "https://app.example.com", "Access-Control-Request-Method": "GET" },
    });
    for (const [answer, status] of [
      [created, 201],
      [replaced, 204],
      [deleted, 204],
      [preflight, 204],
    ] as const) {
      expect(answer.status).toBe(status);
      expect(answer.headers.get("content-type")).toBeNull();
      expect(answer.text).toBe("");
      expect(answer.headers.get("x-api-version")).toBe("4");
    }
  });

  it("keeps JSON bodies labelled application/json; charset=utf-8 and HEAD bodiless", async () => {
    const list = await send(alice, "GET", "/wallets");
    expect(list.headers.get("content-type")).toBe("application/json; charset=utf-8");
    const head = await send(alice, "HEAD", "/wallets");
    expect(head.status).toBe(200);
    expect(head.text).toBe("");
  });

  it("answers HEAD with exactly the headers GET gets, success and error alike", async () => {
    // The node host's lightweight Response keeps headers set after creation only until the body is turned
    // into a stream, which is what HEAD does: each header must survive that.
    const origin = { Origin: "https://app.example.com" };
    for (const [who, path] of [
      [alice, "/wallets"],
      [alice, "/secrets?limit=2"],
      [undefined, "/health"],
      [alice, "/no-such-route"],
      [undefined, "/secrets"],
    ] as const) {
      const get = await send(who, "GET", path, { headers: origin });
      const head = await send(who, "HEAD", path, { headers: origin });
      const names = (a: Answer) =>
        [...a.headers.keys()]
          .filter((n) => !["date", "content-length", "transfer-encoding", "keep-alive", "connection"].includes(n))
          .sort();
      expect({ path, head: names(head) }).toEqual({ path, head: names(get) });
      for (const name of [
        "x-request-id",
        "x-api-version",
        "access-control-allow-origin",
        "access-control-expose-headers",
        "vary",
        "content-type",
      ]) {
        expect({ path, name, present: head.headers.has(name) }).toEqual({ path, name, present: true });
      }
      expect(head.headers.get("content-type")).toBe(get.headers.get("content-type"));
      expect(head.text).toBe("");
    }
  });

  it("replaces an invalid X-Request-Id and refuses another API version", async () => {
    const odd = await send(alice, "GET", "/wallets", { headers: { "X-Request-Id": "has spaces and ünïcode" } });
    expect(odd.headers.get("x-request-id")).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    expectProblem(await send(alice, "GET", "/wallets", { headers: { "X-Api-Version": "3" } }), 400, "UNSUPPORTED_API_VERSION");
  });

  it("refuses a bad Idempotency-Key with VALIDATION_FAILED naming the header", async () => {
    const answer = await send(alice, "POST", `/wallets/${wallet}:withdraw`, {
      body: { recipientAddress: bob.owner, amount: "1", token: "ETH" },
      headers: { "Idempotency-Key": "x".repeat(256) },
    });
    expectProblem(answer, 400, "VALIDATION_FAILED");
    expect(answer.json.errors).toEqual([expect.objectContaining({ path: "header.Idempotency-Key" })]);
  });
});

describe("requests the HTTP parser refuses", () => {
  const problemOf = (raw: string) => {
    const [head, body] = raw.split("\r\n\r\n");
    return { head: head!, body: JSON.parse(body!) as Record<string, unknown> };
  };

  it("answers a malformed request line with 400 problem+json", async () => {
    for (const line of ["GARBAGE\r\n\r\n", "GET /wallets HTTP/9.9\r\nHost: x\r\n\r\n", "GET /wallets HTTP/1.1\r\nBad Header\r\n\r\n"]) {
      const { head, body } = problemOf(await rawExchange(server.port, line));
      expect(head).toMatch(/^HTTP\/1\.1 400 /);
      expect(head).toMatch(/content-type: application\/problem\+json/i);
      expect(body).toMatchObject({ type: "about:blank", status: 400, title: "Bad Request", code: "MALFORMED_REQUEST" });
      expect(head).toContain(`X-Request-Id: ${body.instance as string}`);
    }
  });

  it("answers headers over the limit with 431 problem+json", async () => {
    const { head, body } = problemOf(
      await rawExchange(server.port, `GET /wallets HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`),
    );
    expect(head).toMatch(/^HTTP\/1\.1 431 /);
    expect(body).toMatchObject({ status: 431, code: "HEADERS_TOO_LARGE" });
  });
});

describe("field errors", () => {
  it("reports query and body faults of PATCH /wallets/{address} together", async () => {
    const answer = await send(alice, "PATCH", `/wallets/${wallet}?chainId=abc`, { body: { isHidden: "yes", extra: 1 } });
    expectProblem(answer, 400, "VALIDATION_FAILED");
    const paths = (answer.json.errors as { path: string }[]).map((e) => e.path);
    expect(paths).toEqual(expect.arrayContaining(["query.chainId", "body.isHidden", "body.extra"]));
  });

  it("reports a bad chainId and a bad limit of the withdrawal list together", async () => {
    const answer = await send(alice, "GET", `/wallets/${wallet}/withdrawals?chainId=x&limit=0&status=lost`);
    expectProblem(answer, 400, "VALIDATION_FAILED");
    const paths = (answer.json.errors as { path: string }[]).map((e) => e.path);
    expect(paths).toEqual(expect.arrayContaining(["query.chainId", "query.limit", "query.status[0]"]));
  });

  it("answers the same for the same chainId in a query and in a body", async () => {
    // 16 digits, within 2^53 - 1: a well-formed chain id that is not configured.
    const sixteen = 1234567890123456;
    expectProblem(await send(alice, "GET", `/wallets?chainId=${sixteen}`), 400, "UNSUPPORTED_CHAIN");
    expectProblem(await send(alice, "POST", "/wallets", { body: { salt: "1", chainId: sixteen } }), 400, "UNSUPPORTED_CHAIN");
    expectProblem(await send(alice, "PATCH", `/wallets/${wallet}?chainId=${sixteen}`, { body: {} }), 400, "UNSUPPORTED_CHAIN");
    // Past 2^53 - 1: not an integer this API accepts, in both places.
    expectProblem(await send(alice, "GET", "/wallets?chainId=9007199254740992"), 400, "VALIDATION_FAILED");
    expectProblem(await send(alice, "POST", "/wallets", { raw: '{"salt":"1","chainId":9007199254740992}' }), 400, "VALIDATION_FAILED");
    expectProblem(await send(alice, "GET", "/wallets?chainId=99999999999999999999"), 400, "VALIDATION_FAILED");
    expectProblem(await send(alice, "POST", "/wallets", { raw: '{"salt":"1","chainId":99999999999999999999}' }), 400, "VALIDATION_FAILED");
    // Leading zeros are digits too; 0 means absent in both.
    expect((await send(alice, "GET", "/wallets?chainId=031337")).status).toBe(200);
    expect((await send(alice, "GET", "/wallets?chainId=0")).status).toBe(200);
  });
});

describe("upstream failures", () => {
  it("answers 503 UPSTREAM_UNAVAILABLE when KMS is unreachable, also for an owner at the secrets cap", async () => {
    const owner = await signIn(httpTarget(server.url));
    expect((await send(owner, "PUT", "/secrets/ONE", { body: { value: "1" } })).status).toBe(201);
    expect((await send(owner, "PUT", "/secrets/TWO", { body: { value: "2" } })).status).toBe(201);
    const broken = createRuntime({ config: buildConfig({ ...stackEnv(), ...pick(runtime), KMS_ENDPOINT: "http://127.0.0.1:9" }) });
    setRuntime(broken);
    try {
      expectProblem(await send(owner, "PUT", "/secrets/THREE", { body: { value: "3" } }), 503, "UPSTREAM_UNAVAILABLE");
      expectProblem(await send(owner, "PUT", "/secrets/ONE", { body: { value: "1b" } }), 503, "UPSTREAM_UNAVAILABLE");
    } finally {
      setRuntime(runtime);
    }
    const names = ((await send(owner, "GET", "/secrets")).json.data as { name: string }[]).map((s) => s.name);
    expect(names).toEqual(["ONE", "TWO"]); // nothing changed
  });
});

describe("ownership", () => {
  it("answers another owner's wallet exactly like an unknown one, on every wallet route", async () => {
    const stranger = privateKeyToAccount(generatePrivateKey()).address;
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    for (const [method, path, body] of [
      ["PATCH", `/wallets/${wallet}`, {}],
      ["GET", `/wallets/${wallet}:getNonce`, undefined],
      ["GET", `/wallets/${wallet}/withdrawals`, undefined],
      ["POST", `/wallets/${wallet}:withdraw`, { recipientAddress: recipient, amount: "1", token: "ETH" }],
    ] as const) {
      const theirs = await send(bob, method, path, { body });
      const unknown = await send(bob, method, path.replace(wallet, stranger), { body });
      expectProblem(theirs, 404, "WALLET_NOT_FOUND");
      expect(theirs.json.detail).toBe(unknown.json.detail);
    }
  });
});

/** The settings of `rt` that a replacement runtime must keep (same table, same generous limits). */
function pick(rt: Runtime): Record<string, string> {
  return {
    TABLE_NAME: rt.config.tableName,
    RATE_LIMIT_BURST: "100000",
    RATE_LIMIT_RPS: "100000",
    MAX_SECRETS_PER_OWNER: "2",
    LOG_LEVEL: "silent",
  };
}
