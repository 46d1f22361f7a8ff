/**
 * Behind the router (infra/router.ts) API Gateway and the Function URL see CloudFront's address, not the client's:
 * per-IP rate limits (API.md §4.2) would put every client of an edge location in one bucket. The router's
 * viewer-request function writes the viewer's address to `x-viewer-address` and the stage's router secret to
 * `x-router-secret`; a request carrying the secret came through CloudFront, so its viewer address replaces
 * `sourceIp`, where shared/http/app.ts reads the client address. Without the secret (API Gateway or the Function
 * URL called directly) the header is ignored, so a client cannot choose its bucket.
 */
import { timingSafeEqual } from "node:crypto";
import { Resource } from "sst";
import { inInvocation } from "../shared/log";

interface LambdaEnv {
  requestContext?: { http?: { sourceIp?: string } };
  /** `handle` names the invocation's context `lambdaContext`, `streamHandle` names it `context`. */
  lambdaContext?: { awsRequestId?: string };
  context?: { awsRequestId?: string };
}

type Fetch = (request: Request, env?: unknown, ...rest: never[]) => Response | Promise<Response>;

let secret: Buffer | null | undefined;

function routerSecret(): Buffer | null {
  if (secret === undefined)
    secret =
      "RouterSecret" in Resource ? Buffer.from((Resource as unknown as { RouterSecret: { value: string } }).RouterSecret.value) : null;
  return secret;
}

function fromRouter(request: Request): boolean {
  const expected = routerSecret();
  const given = request.headers.get("x-router-secret");
  if (!expected || given === null) return false;
  const buffer = Buffer.from(given);
  return buffer.length === expected.length && timingSafeEqual(buffer, expected);
}

/** The Lambda environment hono/aws-lambda hands the app, with the viewer's address as `sourceIp` when trusted. */
export function viewerEnvironment(request: Request, env: unknown): unknown {
  const lambda = env as LambdaEnv | undefined;
  const address = request.headers.get("x-viewer-address")?.trim();
  if (!address || !lambda?.requestContext?.http || !fromRouter(request)) return env;
  return { ...lambda, requestContext: { ...lambda.requestContext, http: { ...lambda.requestContext.http, sourceIp: address } } };
}

/**
 * The request as the client sent it. The stream's origin is signed by the router (infra/router.ts), which replaces
 * `Authorization` with its SigV4 signature; the client's travels in `x-client-authorization`, trusted next to the
 * router's secret only. Without it a signature is removed, so the app sees no credentials rather than AWS's.
 */
export function clientRequest(request: Request): Request {
  if (!fromRouter(request)) return request;
  const client = request.headers.get("x-client-authorization");
  const signed = request.headers.get("authorization")?.startsWith("AWS4-HMAC-SHA256 ") ?? false;
  if (client === null && !signed) return request;
  const headers = new Headers(request.headers);
  headers.delete("x-client-authorization");
  if (client !== null) headers.set("authorization", client);
  else headers.delete("authorization");
  return new Request(request, { headers });
}

/**
 * The app as `handle`/`streamHandle` call it (`app.fetch` only), seeing the viewer's address, with every log line
 * of the request tagged with the invocation's `awsRequestId`.
 */
export function behindRouter<A extends { fetch: Fetch }>(app: A): A {
  const fetch = app.fetch;
  return Object.assign(Object.create(app) as A, {
    fetch: (request: Request, env?: unknown, ...rest: never[]) => {
      const lambda = env as LambdaEnv | undefined;
      const awsRequestId = (lambda?.lambdaContext ?? lambda?.context)?.awsRequestId;
      return inInvocation(awsRequestId, () => fetch(clientRequest(request), viewerEnvironment(request, env), ...rest));
    },
  });
}
