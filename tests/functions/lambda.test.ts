/**
 * The Lambda shape: entry points in functions/ answer real-shaped API Gateway HTTP API (payload v2) events,
 * reading their linked resources the way SST provides them (SST_RESOURCE_* variables).
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from "aws-lambda";
import { randomUUID } from "node:crypto";
import { privateKeyToAccount, generatePrivateKey } from "viem/accounts";
import { stackEnv } from "../support/runtime";
import { buildAuthMessage, messageDefaults } from "../support/auth";
import { ensureTable } from "../../shared/store/table";
import { setLogLevel } from "../../shared/log";
import { useRuntime } from "../../shared/current-runtime";

type Handler = (event: APIGatewayProxyEventV2, context: Context) => Promise<APIGatewayProxyStructuredResultV2>;
let core: Handler;
let secrets: Handler;
let wallets: Handler;

beforeAll(async () => {
  const env = stackEnv();
  const tableName = `lambda-${randomUUID()}`;
  Object.assign(process.env, {
    ...env,
    LOG_LEVEL: "error",
    SST_RESOURCE_Table: JSON.stringify({ name: tableName }),
  });
  core = (await import("../../functions/core")).handler as unknown as Handler;
  secrets = (await import("../../functions/secrets")).handler as unknown as Handler;
  wallets = (await import("../../functions/wallets")).handler as unknown as Handler;
  await ensureTable(useRuntime().db, tableName);
  expect(useRuntime().config.tableName).toBe(tableName);
});

function event(
  method: string,
  rawPath: string,
  init: { body?: string; headers?: Record<string, string>; rawQueryString?: string } = {},
): APIGatewayProxyEventV2 {
  const now = Date.now();
  return {
    version: "2.0",
    routeKey: "$default",
    rawPath,
    rawQueryString: init.rawQueryString ?? "",
    headers: {
      host: "abc123.execute-api.us-east-1.amazonaws.com",
      "user-agent": "vitest",
      "x-forwarded-for": "203.0.113.7",
      ...init.headers,
    },
    requestContext: {
      accountId: "123456789012",
      apiId: "abc123",
      domainName: "abc123.execute-api.us-east-1.amazonaws.com",
      domainPrefix: "abc123",
      http: { method, path: rawPath, protocol: "HTTP/1.1", sourceIp: "203.0.113.7", userAgent: "vitest" },
      requestId: "req-1",
      routeKey: "$default",
      stage: "$default",
      time: new Date(now).toUTCString(),
      timeEpoch: now,
    },
    body: init.body,
    isBase64Encoded: false,
  };
}

const context = { awsRequestId: "lambda-req", functionName: "test", callbackWaitsForEmptyEventLoop: false } as Context;

describe("Lambda entry points", () => {
  it("core answers GET /health and 404 problem+json for unknown paths", async () => {
    const health = await core(event("GET", "/health"), context);
    expect(health.statusCode).toBe(200);
    expect(JSON.parse(health.body!)).toMatchObject({ version: expect.any(String), chainId: expect.any(Number) });
    expect(health.headers?.["x-api-version"] ?? health.headers?.["X-Api-Version"]).toBe("4");
    const missing = await core(event("GET", "/nope"), context);
    expect(missing.statusCode).toBe(404);
    expect(JSON.parse(missing.body!).code).toBe("NOT_FOUND");
  });

  it("signs in through core and stores a secret through the secrets function", async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    const message = buildAuthMessage(messageDefaults(account.address));
    const signature = await account.signMessage({ message });
    const exchange = await core(
      event("POST", "/auth:exchange", {
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ownerAddress: account.address, signature, message }),
      }),
      context,
    );
    expect(exchange.statusCode).toBe(200);
    const { token } = JSON.parse(exchange.body!);
    const auth = { authorization: `Bearer ${token}`, "content-type": "application/json" };

    const put = await secrets(
      event("PUT", "/secrets/API_KEY", { headers: auth, body: JSON.stringify({ value: "s3cret-value" }) }),
      context,
    );
    expect(put.statusCode).toBe(201);
    expect(Object.keys(put.headers ?? {}).map((h) => h.toLowerCase())).not.toContain("content-type"); // 201 without a body
    const encoded = await secrets(event("PUT", "/secrets/%41PI_KEY", { headers: auth, body: JSON.stringify({ value: "again" }) }), context);
    expect(encoded.statusCode).toBe(204); // the same secret: the path is decoded before routing
    const tooLarge = await secrets(
      event("PUT", "/secrets/BIG", { headers: auth, body: JSON.stringify({ value: "x".repeat(1_100_000) }) }),
      context,
    );
    expect(tooLarge.statusCode).toBe(413);
    expect(JSON.parse(tooLarge.body!).code).toBe("PAYLOAD_TOO_LARGE");
    const list = await secrets(event("GET", "/secrets", { headers: auth, rawQueryString: "limit=5" }), context);
    expect(list.statusCode).toBe(200);
    const body = JSON.parse(list.body!);
    expect(body.data.map((s: { name: string }) => s.name)).toEqual(["API_KEY"]);
    expect(list.body).not.toContain("s3cret-value");
    const unauthorized = await secrets(event("GET", "/secrets"), context);
    expect(unauthorized.statusCode).toBe(401);
  });
});

/** API Gateway sends `/secrets` GET and `/secrets/*`, `/wallets` and `/wallets/*` to their functions, everything else to core. */
describe("the catch-all (core) and the group functions", () => {
  const header = (res: APIGatewayProxyStructuredResultV2, name: string) =>
    Object.entries(res.headers ?? {}).find(([key]) => key.toLowerCase() === name.toLowerCase())?.[1];

  it("core answers 405 with the exact Allow for another group's path, before authentication", async () => {
    const post = await core(event("POST", "/secrets"), context);
    expect(post.statusCode).toBe(405);
    expect(JSON.parse(post.body!).code).toBe("METHOD_NOT_ALLOWED");
    expect(String(header(post, "allow")).split(", ").sort()).toEqual(["GET", "HEAD", "OPTIONS"]);
    const put = await core(event("PUT", "/health"), context);
    expect(put.statusCode).toBe(405);
    expect(String(header(put, "allow")).split(", ").sort()).toEqual(["GET", "HEAD", "OPTIONS"]);
  });

  it("core redirects (307) a percent-encoded prefix of another group's route to its canonical path, query kept", async () => {
    const res = await core(event("POST", "/%77allets/0xabc%3Awithdraw", { rawQueryString: "a=1" }), context);
    expect(res.statusCode).toBe(307);
    expect(header(res, "location")).toBe("/wallets/0xabc:withdraw?a=1");
    expect(res.body ?? "").toBe("");
    const spaced = await core(event("GET", "/%77allets/a%20b/withdrawals"), context);
    expect(header(spaced, "location")).toBe("/wallets/a%20b/withdrawals");
    const slash = await core(event("PATCH", "/%77allets/a%2Fb"), context);
    expect(header(slash, "location")).toBe("/wallets/a%2Fb");
  });

  it("core never redirects a canonical path to itself: a route its function is not sent is a deployment fault (500)", async () => {
    setLogLevel("silent");
    const res = await core(event("HEAD", "/secrets"), context).finally(() => setLogLevel("error"));
    expect(res.statusCode).toBe(500);
    expect(header(res, "location")).toBeUndefined();
  });

  it("core answers 404 for paths no group serves, and each group function answers 404/405 within its prefix", async () => {
    expect((await core(event("GET", "/wallets-and-more"), context)).statusCode).toBe(404);
    const patch = await secrets(event("PATCH", "/secrets/NAME"), context);
    expect(patch.statusCode).toBe(405);
    expect(String(header(patch, "allow")).split(", ").sort()).toEqual(["DELETE", "OPTIONS", "PUT"]);
    expect((await secrets(event("GET", "/secrets/a/b"), context)).statusCode).toBe(404);
    const withdraw = await wallets(event("GET", "/wallets/0xabc:withdraw"), context);
    expect(withdraw.statusCode).toBe(405);
    expect(String(header(withdraw, "allow")).split(", ").sort()).toEqual(["OPTIONS", "POST"]);
  });
});
