/**
 * One public base URL (infra/router.ts): the CloudFront distribution in front of API Gateway and the stream's
 * Function URL, read from the stage's resource graph, and its viewer-request function run on sample requests.
 * Then the functions' side (functions/viewer.ts): the viewer's address replaces CloudFront's only when the
 * request carries the router's secret.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { buildGraph, ensurePlatform, type Graph, type GraphResource } from "./graph";

let graph: Graph;
let distribution: GraphResource;
let viewerRequestCode: string;

beforeAll(async () => {
  ensurePlatform();
  graph = await buildGraph();
  distribution = graph.resources.find((r) => r.type === "aws:cloudfront/distribution:Distribution")!;
  viewerRequestCode = String(graph.resources.find((r) => r.type === "aws:cloudfront/function:Function")?.inputs.code);
}, 300_000);

interface Origin {
  originId: string;
  domainName: string;
  originAccessControlId?: string;
  customOriginConfig: { originReadTimeout: number; originProtocolPolicy: string };
}
interface Behaviour {
  pathPattern?: string;
  targetOriginId: string;
  cachePolicyId: string;
  originRequestPolicyId: string;
  allowedMethods: string[];
  functionAssociations: { eventType: string; functionArn: string }[];
}

const origins = () => distribution.inputs.origins as Origin[];
const originOf = (id: string) => origins().find((o) => o.originId === id)!;
const behaviours = () => [
  distribution.inputs.defaultCacheBehavior as Behaviour,
  ...(distribution.inputs.orderedCacheBehaviors as Behaviour[]),
];
const streamHost = () => new URL(String(graph.outputs.stream)).host;
const apiHost = () => new URL(String(graph.outputs.api)).host;

/** CloudFront's path pattern semantics: `*` any characters (slashes included), `?` one, case-sensitive. */
const patternMatches = (pattern: string, path: string) =>
  new RegExp(
    `^${pattern
      .replace(/[.+^${}()|[\]\\]/g, "\\$&")
      .replace(/\*/g, ".*")
      .replace(/\?/g, ".")}$`,
  ).test(path);

/** Where the distribution sends a path: the first matching behaviour's origin, then the function's override. */
async function destination(uri: string, headers: Record<string, { value: string }> = {}) {
  const behaviour =
    behaviours()
      .slice(1)
      .find((b) => patternMatches(b.pathPattern!, uri)) ?? behaviours()[0]!;
  const { request, origin } = await viewerRequest(uri, headers);
  return { host: origin?.domainName ?? originOf(behaviour.targetOriginId).domainName, request };
}

/** Runs the viewer-request function (cloudfront-js-2.0) with a stand-in for its `cloudfront` module. */
async function viewerRequest(uri: string, headers: Record<string, { value: string }> = {}) {
  let origin: { domainName: string; timeouts?: { readTimeout?: number }; originAccessControlConfig?: unknown } | undefined;
  const cf = { updateRequestOrigin: (o: typeof origin) => (origin = o) };
  const body = viewerRequestCode.replace(/^import cf from "cloudfront";\n/, "");
  const handler = new Function("cf", `${body}\nreturn handler;`)(cf) as (
    event: unknown,
  ) => Promise<{ headers: Record<string, { value: string }> }>;
  const request = await handler({
    viewer: { ip: "203.0.113.7" },
    request: { method: "GET", uri, headers: { ...headers }, querystring: {}, cookies: {} },
  });
  return { request, origin };
}

describe("the router: one base URL for every route, the stream included", () => {
  it("is the stage's `url`, with API Gateway and the stream's Function URL as its two origins", () => {
    expect(String(graph.outputs.url)).toMatch(/^https:\/\/.+\.cloudfront\.net$/);
    expect(origins().map((o) => [o.originId, o.domainName])).toEqual([
      ["api", apiHost()],
      ["stream", streamHost()],
    ]);
    for (const o of origins()) expect(o.customOriginConfig.originProtocolPolicy).toBe("https-only");
  });

  it("reads from API Gateway for longer than a blocking trigger (25 s) or a simulation (27 s) takes", () => {
    expect(originOf("api").customOriginConfig.originReadTimeout).toBeGreaterThanOrEqual(30);
    // The stream's keepalive frames come every 15 s.
    expect(originOf("stream").customOriginConfig.originReadTimeout).toBeGreaterThan(15);
  });

  it("sends only `…:stream` paths to the Function URL, the colon as is or percent-encoded", async () => {
    const stream = ["/executions/01J9ZK:stream", "/executions/01J9ZK%3Astream", "/executions/01J9ZK%3astream"];
    const api = [
      "/executions/01J9ZK",
      "/executions/01J9ZK:getStatus",
      "/executions:stats",
      "/executions",
      "/workflows/01J9ZK:trigger",
      "/workflows/01J9ZK:stream",
      "/executions/01J9ZK:streams",
      "/executions/01J9ZK/x%3Astream",
      "/health",
      "/",
    ];
    for (const path of stream) expect((await destination(path)).host, path).toBe(streamHost());
    for (const path of api) expect((await destination(path)).host, path).toBe(apiHost());
    for (const b of behaviours().filter((b) => b.targetOriginId === "stream")) expect(b.pathPattern).toMatch(/^\/executions\/\*:stream$/);
    expect(behaviours()[0]!.targetOriginId).toBe("api");
    expect((await viewerRequest("/executions/01J9ZK%3Astream")).origin?.timeouts?.readTimeout).toBe(
      originOf("stream").customOriginConfig.originReadTimeout,
    );
  });

  it("caches nothing, forwards every viewer header but Host, takes every method, runs the viewer-request function", () => {
    for (const b of behaviours()) {
      expect(b.cachePolicyId).toBe("4135ea2d-6df8-44a3-9df3-4b5a84be39ad"); // Managed-CachingDisabled
      expect(b.originRequestPolicyId).toBe("b689b0a8-53d0-40ab-baf2-68738e2966ac"); // Managed-AllViewerExceptHostHeader
      expect(b.allowedMethods.sort()).toEqual(["DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"]);
      expect(b.functionAssociations.map((f) => f.eventType)).toEqual(["viewer-request"]);
    }
  });

  it("tells the functions the viewer's address, replacing what the client sent, next to the router's secret", async () => {
    const { request } = await viewerRequest("/auth/signin", {
      "x-viewer-address": { value: "198.51.100.1" },
      "x-router-secret": { value: "guess" },
    });
    expect(request.headers["x-viewer-address"]).toEqual({ value: "203.0.113.7" });
    const secret = graph.builds.find((b) => b.functionID === "ApiCore")!.links.RouterSecret as { value: string };
    expect(request.headers["x-router-secret"]).toEqual({ value: secret.value });
    expect(secret.value.length).toBeGreaterThanOrEqual(32);
  });
});

describe("the stream: invocable through the router only", () => {
  it("signs the stream's origin with an origin access control for Lambda, and only that origin", async () => {
    const [control] = graph.resources.filter((r) => r.type === "aws:cloudfront/originAccessControl:OriginAccessControl");
    expect(control?.inputs).toMatchObject({ originAccessControlOriginType: "lambda", signingBehavior: "always", signingProtocol: "sigv4" });
    expect(originOf("stream").originAccessControlId).toBeTruthy();
    expect(originOf("api").originAccessControlId).toBeUndefined();
    // The encoded `:stream` paths reach the same origin through the viewer function, signed as well.
    expect((await viewerRequest("/executions/01J9ZK%3Astream")).origin?.originAccessControlConfig).toEqual({
      enabled: true,
      signingBehavior: "always",
      signingProtocol: "sigv4",
      originType: "lambda",
    });
  });

  it("grants both invoke permissions to this distribution alone", () => {
    const stream = graph.resources.find((r) => r.type === "aws:lambda/function:Function" && r.name === "ExecutionStreamFunction")!;
    const grants = graph.resources.filter((r) => r.type === "aws:lambda/permission:Permission" && r.inputs.function === stream.inputs.name);
    expect(grants.map((g) => [g.inputs.action, g.inputs.principal]).sort()).toEqual([
      ["lambda:InvokeFunction", "cloudfront.amazonaws.com"],
      ["lambda:InvokeFunctionUrl", "cloudfront.amazonaws.com"],
    ]);
    // The harness's stand-in for AWS names an ARN after its resource: the router's distribution.
    for (const grant of grants)
      expect(String(grant.inputs.sourceArn)).toBe("arn:aws:cloudfront:us-east-1:123456789012:RouterDistribution-physical");
  });

  it("carries the client's Authorization to the stream beside the signature, and drops one a client set itself", async () => {
    const token = { value: "Bearer eyJ.client.token" };
    const toStream = await viewerRequest("/executions/01J9ZK:stream", {
      authorization: token,
      "x-client-authorization": { value: "forged" },
    });
    expect(toStream.request.headers["x-client-authorization"]).toEqual(token);
    const toApi = await viewerRequest("/workflows", { authorization: token, "x-client-authorization": { value: "forged" } });
    expect(toApi.request.headers["x-client-authorization"]).toBeUndefined();
    expect(toApi.request.headers.authorization).toEqual(token);
    expect((await viewerRequest("/executions/01J9ZK:stream")).request.headers["x-client-authorization"]).toBeUndefined();
  });
});

describe("functions/viewer.ts: the client's Authorization behind the signed stream origin", () => {
  const SECRET = "router-secret-for-tests-0123456789";
  const SIGNATURE = "AWS4-HMAC-SHA256 Credential=AKID/20261129/us-east-1/lambda/aws4_request, Signature=abc";

  async function seenAuthorization(headers: Record<string, string>) {
    process.env.SST_RESOURCE_RouterSecret = JSON.stringify({ value: SECRET });
    const { behindRouter } = await import("../../functions/viewer");
    let seen: string | null | undefined;
    const app = { fetch: (request: Request, _env?: unknown) => ((seen = request.headers.get("authorization")), new Response("ok")) };
    await behindRouter(app).fetch(new Request("https://x.example/executions/1:stream", { headers }), {});
    return seen;
  }

  it("is the client's token, next to the router's secret, in place of the router's signature", async () => {
    const headers = { authorization: SIGNATURE, "x-client-authorization": "Bearer t", "x-router-secret": SECRET };
    expect(await seenAuthorization(headers)).toBe("Bearer t");
  });

  it("is none when the client sent none: the signature never reaches the app", async () => {
    expect(await seenAuthorization({ authorization: SIGNATURE, "x-router-secret": SECRET })).toBeNull();
  });

  it("is left as sent without the router's secret (the header is not trusted)", async () => {
    expect(await seenAuthorization({ authorization: "Bearer own", "x-client-authorization": "Bearer other" })).toBe("Bearer own");
    expect(
      await seenAuthorization({ authorization: "Bearer own", "x-client-authorization": "Bearer other", "x-router-secret": "guess" }),
    ).toBe("Bearer own");
  });
});

describe("functions/viewer.ts: the client address per-IP rate limits key on", () => {
  const SECRET = "router-secret-for-tests-0123456789";
  const seen: unknown[] = [];
  const app = { fetch: (_request: Request, env?: unknown) => (seen.push(env), new Response("ok")) };
  const lambdaEnv = () => ({ event: {}, requestContext: { http: { sourceIp: "130.176.0.1" } } });
  const sourceIp = (env: unknown) => (env as { requestContext: { http: { sourceIp: string } } }).requestContext.http.sourceIp;

  async function call(headers: Record<string, string>) {
    process.env.SST_RESOURCE_RouterSecret = JSON.stringify({ value: SECRET });
    const { behindRouter } = await import("../../functions/viewer");
    await behindRouter(app).fetch(new Request("https://x.example/health", { headers }), lambdaEnv());
    return sourceIp(seen.at(-1));
  }

  it("is the viewer's address when the request came through the router", async () => {
    expect(await call({ "x-viewer-address": "203.0.113.7", "x-router-secret": SECRET })).toBe("203.0.113.7");
  });

  it("stays API Gateway's sourceIp without the secret, or with a wrong one (a direct call cannot choose it)", async () => {
    expect(await call({ "x-viewer-address": "203.0.113.7" })).toBe("130.176.0.1");
    expect(await call({ "x-viewer-address": "203.0.113.7", "x-router-secret": "guess" })).toBe("130.176.0.1");
    expect(await call({ "x-viewer-address": "203.0.113.7", "x-router-secret": `${SECRET}x` })).toBe("130.176.0.1");
    expect(await call({ "x-router-secret": SECRET })).toBe("130.176.0.1");
  });
});
