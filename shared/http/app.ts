/**
 * The Hono app factory every endpoint group shares. A route is a declaration (endpoints.ts: method, API.md path
 * template such as `/wallets/{address}:withdraw`, the schemas of its parts) bound to a handler; the factory adds
 * what every route needs, in the order of API.md §1.6: route match (404/405) → X-Api-Version → authentication →
 * rate limit → body transport (413, 415, INVALID_JSON) → the declared parts validated together → the handler,
 * with request ids, CORS and problem+json errors around all of it.
 */
import * as v from "valibot";
import { Hono, type Context } from "hono";
import { ulid } from "ulid";
import { ApiError, ClientGone, validationFailed, type FieldError } from "../errors";
import { log } from "../log";
import { withCaller, type Caller } from "../context";
import { problemResponse } from "./problem";
import { RateLimiter, RateSubject, type RateDecision } from "./rate-limit";
import { authenticate } from "./token";
import type { PartnerCredential } from "./partner-assertion";
import { fieldErrors, readJsonBody, type Location } from "./validate";
import {
  PARTS,
  baseOf,
  entriesOf,
  type AnyInput,
  type Endpoint,
  type Group,
  type Input,
  type Method,
  type Part,
  type RequestSchema,
} from "./endpoint";
import { useConfig, useRuntime } from "../current-runtime";

export type AppEnv = {
  Variables: {
    requestId: string;
    /** Path parameters of the matched route template, percent-decoded. */
    params: Record<string, string>;
    /** The rate limiter's answer, repeated on error responses too. */
    rate?: RateDecision;
  };
};
export type AppContext = Context<AppEnv>;

/**
 * A mounted route: a declaration's method, path and request schemas with its handler. Routes without schemas
 * (tests' small apps) get the raw path parameters and read anything else themselves.
 */
export interface Route extends Partial<Pick<Endpoint, "public" | "partner" | Part | "checkedByDomain">> {
  method: Method;
  /** API.md path template, e.g. `/wallets/{address}:withdraw`. */
  path: string;
  handler(c: AppContext, input: AnyInput): Response | Promise<Response>;
}

/** Binds a handler to a declaration; the handler receives the declared parts validated and typed. */
export function route<const E extends Endpoint>(
  declaration: E,
  handler: (c: AppContext, input: Input<E>) => Response | Promise<Response>,
): Route {
  return { ...declaration, handler: handler as Route["handler"] };
}

export interface AppOptions {
  /**
   * Every group of the API, mounted here or not. A path that matches only routes mounted elsewhere still answers
   * 405 with its exact `Allow`, and a request for such a route (an API Gateway prefix it did not recognise,
   * e.g. `/%77allets`) is redirected (307) to its canonical path, which API Gateway routes to its function.
   */
  api?: readonly Group[];
  /**
   * Checks a partner assertion (API.md §21.1; shared/http/partner-assertion.ts): required when a route accepts
   * one. Handed in by the hosts that mount such routes, so jose reaches only their bundles.
   */
  partners?: (assertion: string, scope: string) => Promise<PartnerCredential>;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
// CORS (API.md §1.4): configurable origins, no credentials.
const EXPOSED_HEADERS = [
  "X-Request-Id",
  "X-Api-Version",
  "X-RateLimit-Limit",
  "X-RateLimit-Remaining",
  "X-RateLimit-Reset",
  "Retry-After",
  "Location",
  "Idempotency-Replayed",
].join(",");
const ALLOWED_HEADERS = [
  "Authorization",
  "X-Partner-Assertion",
  "Content-Type",
  "Idempotency-Key",
  "X-Request-Id",
  "X-Api-Version",
  "Last-Event-ID",
].join(",");
const ALLOWED_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"].join(",");

/** The Access-Control-Allow-Origin for a request's Origin: `*`, the origin itself when listed, else none. */
function allowedOrigin(origin: string | undefined): string | undefined {
  const allowed = useRuntime().config.corsAllowedOrigins;
  if (allowed.includes("*")) return "*";
  return origin && allowed.includes(origin) ? origin : undefined;
}

/** A CORS preflight (any path, no authentication): 204 with what the API allows. */
function preflight(origin: string | undefined): Response {
  const headers = new Headers({
    "Access-Control-Expose-Headers": EXPOSED_HEADERS,
    "Access-Control-Max-Age": "600",
    "Access-Control-Allow-Methods": ALLOWED_METHODS,
    "Access-Control-Allow-Headers": ALLOWED_HEADERS,
    Vary: "Origin, Access-Control-Request-Headers",
  });
  if (origin) headers.set("Access-Control-Allow-Origin", origin);
  return new Response(null, { status: 204, headers });
}

interface Compiled<R> {
  route: R;
  pattern: RegExp;
}

/** `/wallets/{address}:withdraw` → a regex capturing `address`; parameters never span `/` or `:`. */
function compileTemplate(path: string): RegExp {
  const source = path
    .split(/(\{[a-zA-Z_]+\})/)
    .map((part) => {
      const param = /^\{([a-zA-Z_]+)\}$/.exec(part);
      return param ? `(?<${param[1]}>[^/:]+)` : part.replace(/[.*+?^$()|[\]\\]/g, "\\$&");
    })
    .join("");
  return new RegExp(`^${source}$`);
}

/** The same template as a Hono pattern: `{name}` becomes a regex parameter that swallows the `:verb`. */
function honoPattern(path: string): string {
  return path.replace(/\{([a-zA-Z_]+)\}(:[a-zA-Z]+)?/g, (_m, name: string, verb?: string) => `:${name}{[^/:]+${verb ?? ""}}`);
}

/**
 * Paths are matched after percent-decoding (API.md §1.1): `/%77allets%3Awithdraw` is `/wallets:withdraw`.
 * `%2F` and `%25` stay encoded, so a decoded `/` can never split a segment and nothing is decoded twice;
 * path parameters undo those two when they are read (decodeParam).
 */
function routingPath(rawPath: string): string {
  return rawPath
    .split(/(%2[fF]|%25)/)
    .map((part, i) => (i % 2 === 1 ? part.toUpperCase() : decodeSegment(part)))
    .join("");
}

function decodeSegment(part: string): string {
  if (!part.includes("%")) return part;
  try {
    return decodeURIComponent(part);
  } catch {
    // A malformed escape (`%zz`, broken UTF-8) stays as sent: it then matches no route or is an unknown id.
    return part;
  }
}

const decodeParam = (value: string) => value.replace(/%2F|%25/g, (escape) => (escape === "%2F" ? "/" : "%"));

const decodedPath = (request: Request): string => routingPath(rawPath(request.url));

export function createApp(routes: Route[], options: AppOptions = {}) {
  const compiled: Compiled<Route>[] = routes.map((route) => ({ route, pattern: compileTemplate(route.path) }));
  const { partners } = options;
  const partnerRoute = routes.find((r) => r.partner);
  if (partnerRoute && !partners)
    throw new Error(`${partnerRoute.method} ${partnerRoute.path} accepts partner assertions: createApp needs options.partners`);
  const mounted = new Set(routes.map((r) => `${r.method} ${r.path}`));
  const elsewhere: Compiled<{ method: Method; path: string; group: string }>[] = (options.api ?? []).flatMap((g) =>
    g.endpoints
      .filter((e) => !mounted.has(`${e.method} ${e.path}`))
      .map((e) => ({ route: { method: e.method, path: e.path, group: g.name }, pattern: compileTemplate(e.path) })),
  );
  const app = new Hono<AppEnv>({ getPath: decodedPath });
  // Buckets live in the table (shared by every instance); the limiter keeps only this app's hints.
  const limiter = new RateLimiter();

  app.use("*", async (c, next) => {
    const incoming = c.req.header("x-request-id");
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : ulid();
    c.set("requestId", requestId);
    // Prepared headers make every response Hono builds (c.json, c.body) carry a Headers object. The node host's
    // lightweight Response keeps later header changes only in that object, and HEAD rebuilds the response
    // from it: with a plain header record the changes below would be lost (tests/http/hostile-input.test.ts).
    c.header("X-Request-Id", requestId);
    c.header("X-Api-Version", "4");
    await next();
    c.res.headers.set("X-Request-Id", requestId);
    c.res.headers.set("X-Api-Version", "4");
  });

  app.use("*", async (c, next) => {
    const origin = allowedOrigin(c.req.header("origin"));
    if (c.req.method === "OPTIONS") return preflight(origin);
    await next();
    // Set on the finished response only: reading `c.res` before the handler (as hono/cors does) makes Hono
    // rebuild the handler's response around a stream body, which costs the node host its fast path.
    if (origin) c.res.headers.set("Access-Control-Allow-Origin", origin);
    c.res.headers.set("Access-Control-Expose-Headers", EXPOSED_HEADERS);
    c.res.headers.append("Vary", "Origin");
  });

  for (const { route, pattern } of compiled) {
    app.on(route.method, honoPattern(route.path), async (c) => {
      const raw = pattern.exec(c.req.path)?.groups ?? {};
      const params = Object.fromEntries(Object.entries(raw).map(([k, val]) => [k, decodeParam(val)]));
      c.set("params", params);
      checkApiVersion(c);
      const { caller, subject } = await credential(c, route, partners);
      const answer = async () => {
        const input = await readInput(c, route, params);
        return caller ? withCaller(caller, () => route.handler(c, input)) : route.handler(c, input);
      };
      enforce(c, limiter.knownDenial(subject));
      let response: Response;
      if (route.method === "GET") {
        // A read changes nothing, so it runs while the limiter's write is in flight (one round trip instead of
        // two); the limiter's answer still decides first, exactly as if it had run alone (API.md §1.6 step 4).
        const answering = answer().then(
          (res) => ({ res }),
          (err: unknown) => ({ err }),
        );
        try {
          enforce(c, await limiter.take(subject));
        } catch (err) {
          // Refused: the answer is never sent, so its body is cancelled and frees what it holds (a stream's slot).
          void answering.then((settled) => ("res" in settled ? settled.res.body?.cancel().catch(() => undefined) : undefined));
          throw err;
        }
        const settled = await answering;
        if ("err" in settled) throw settled.err;
        response = settled.res;
      } else {
        enforce(c, await limiter.take(subject));
        response = await answer();
      }
      const decision = c.get("rate");
      if (!route.public) response.headers.set("Cache-Control", response.headers.get("Cache-Control") ?? "no-store");
      // Success bodies are `application/json; charset=utf-8` (API.md §1.3); Hono's c.json() omits the charset.
      if (response.headers.get("Content-Type") === "application/json") {
        response.headers.set("Content-Type", "application/json; charset=utf-8");
      }
      if (decision) for (const [name, value] of Object.entries(rateHeaders(decision))) response.headers.set(name, value);
      return response;
    });
  }

  app.notFound((c) => {
    const path = c.req.path;
    const here = compiled.filter((r) => r.pattern.test(path)).map((r) => r.route.method);
    const there = elsewhere.filter((r) => r.pattern.test(path)).map((r) => r.route);
    const methods = new Set<string>([...here, ...there.map((r) => r.method)]);
    if (methods.size === 0) return problem(c, new ApiError(404, "NOT_FOUND", `No route matches ${path}.`));
    const wanted = c.req.method === "HEAD" ? "GET" : c.req.method;
    const owner = there.find((r) => r.method === wanted);
    if (owner) return elsewhereAnswer(c, owner);
    if (methods.has("GET")) methods.add("HEAD");
    methods.add("OPTIONS");
    const allow = [...methods].join(", ");
    return problem(c, new ApiError(405, "METHOD_NOT_ALLOWED", `${c.req.method} is not allowed here.`, { headers: { Allow: allow } }));
  });

  app.onError((err, c) => {
    if (err instanceof ClientGone) {
      log.debug("client went away before its answer", {
        requestId: c.get("requestId"),
        method: c.req.method,
        path: c.req.path,
        why: err.message,
      });
    }
    if (err instanceof ApiError) return problem(c, err);
    log.error("unhandled error", { requestId: c.get("requestId"), method: c.req.method, path: c.req.path, error: err });
    return problem(c, new ApiError(500, "INTERNAL", "An internal error occurred."));
  });

  return app;
}

/**
 * A route that another function serves. API Gateway sent the request here because its raw path did not match
 * that function's prefix (`/%77allets/...`): the canonical path does, so the client is sent there (307 keeps
 * the method and body). If the path is already canonical the API's own routes do not send this method to the
 * function that serves it, which is a deployment fault, not the client's.
 */
function elsewhereAnswer(c: AppContext, route: { method: Method; path: string; group: string }): Response {
  const url = new URL(c.req.url);
  const location = canonicalPath(c.req.path);
  if (location !== rawPath(c.req.url)) {
    return c.body(null, 307, { Location: location + url.search, "Cache-Control": "no-store" });
  }
  log.error("a route of another function reached this one; the API's routes must send it to its group", {
    requestId: c.get("requestId"),
    method: c.req.method,
    route: `${route.method} ${route.path}`,
    group: route.group,
  });
  return problem(c, new ApiError(500, "INTERNAL", "An internal error occurred."));
}

/** The raw path of a request URL, as sent. */
function rawPath(url: string): string {
  const start = url.indexOf("/", url.indexOf("://") + 3);
  if (start === -1) return "/";
  const end = url.indexOf("?", start);
  return url.slice(start, end === -1 ? undefined : end);
}

/** A routing path (decoded but for %2F and %25) written as a URL path again: only what must be escaped is. */
function canonicalPath(path: string): string {
  return path
    .split(/(%2F|%25)/)
    .map((part, i) => (i % 2 === 1 ? part : encodeURI(part).replace(/[?#]/g, (ch) => encodeURIComponent(ch))))
    .join("");
}

// ---------------------------------------------------------------------------------------------------------
// Request input

const LOCATION: Record<Part, Location> = { params: "path", query: "query", headers: "header", body: "body" };

/**
 * The declared parts of a request: the body read first (its transport errors come before field errors), then
 * every part validated, all field errors reported together (API.md §1.6 step 6). Parts a domain function
 * checks itself are handed over as read.
 */
async function readInput(c: AppContext, route: Route, params: Record<string, string>): Promise<AnyInput> {
  const input: AnyInput = {
    params,
    query: readQuery(c, route.query),
    headers: route.headers ? readHeaders(c, route.headers) : {},
    body: route.body ? await readJsonBody(c) : undefined,
  };
  const errors: FieldError[] = [];
  for (const part of PARTS) {
    const schema = route[part];
    if (!schema || route.checkedByDomain?.includes(part)) continue;
    const result = v.safeParse(schema, input[part], { abortEarly: false });
    if (result.success) input[part] = result.output as never;
    else errors.push(...fieldErrors(result.issues, LOCATION[part]));
  }
  if (errors.length > 0) throw validationFailed(errors);
  return input;
}

/** Query parameters; those declared as lists take every value (`?status=a&status=b`), the others the first. */
function readQuery(c: AppContext, schema: RequestSchema | undefined): Record<string, string | string[] | undefined> {
  const query: Record<string, string | string[] | undefined> = c.req.query();
  if (!schema) return query;
  for (const [name, entry] of Object.entries(entriesOf(schema))) {
    if (baseOf(entry).type === "array") query[name] = c.req.queries(name);
  }
  return query;
}

/** The declared headers, by their declared names (matched case-insensitively). */
function readHeaders(c: AppContext, schema: RequestSchema): Record<string, string | undefined> {
  return Object.fromEntries(Object.keys(entriesOf(schema)).map((name) => [name, c.req.header(name)]));
}

function problem(c: AppContext, err: ApiError): Response {
  const requestId = c.get("requestId") ?? ulid();
  // Errors are never cached; this also keeps errors to authenticated requests `no-store` (API.md §1.4).
  const headers: Record<string, string> = {
    "Cache-Control": "no-store",
    ...err.extra.headers,
    "X-Request-Id": requestId,
    "X-Api-Version": "4",
  };
  if (err.status === 401) headers["WWW-Authenticate"] = "Bearer";
  const rate = c.get("rate");
  if (rate) Object.assign(headers, rateHeaders(rate));
  return problemResponse(
    {
      status: err.status,
      code: err.code,
      detail: err.message,
      requestId,
      errors: err.extra.errors,
      reason: err.extra.reason,
      limit: err.extra.limit,
    },
    headers,
  );
}

/** Records the limiter's answer (undefined: it failed open, no headers) and refuses an empty bucket with 429. */
function enforce(c: AppContext, decision: RateDecision | undefined) {
  if (!decision) return;
  c.set("rate", decision);
  if (!decision.allowed) {
    throw new ApiError(429, "RATE_LIMITED", "Too many requests; retry later.", { headers: { "Retry-After": String(decision.retryAfter) } });
  }
}

/**
 * Who a request is served as and the rate-limit bucket it is counted in: a public route, no one (per client IP);
 * else the bearer token's owner (API.md §7.3), even when an assertion is sent too; else, on a route that accepts
 * one, a partner assertion (API.md §21.1): the partner's bucket, and the user it names as the caller where the
 * route serves a user. Elsewhere an assertion is no credential: the bearer token is required.
 */
async function credential(c: AppContext, route: Route, partners: AppOptions["partners"]): Promise<{ caller?: Caller; subject: string }> {
  if (route.public) return { subject: RateSubject.ip(clientIp(c)) };
  const authorization = c.req.header("authorization");
  const assertion = c.req.header("x-partner-assertion");
  if (route.partner && partners && authorization === undefined && assertion !== undefined) {
    const partner = await partners(assertion, route.partner.scope);
    const subject = RateSubject.partner(partner.partnerId);
    if (!route.partner.subject) return { subject };
    if (!partner.subject) {
      throw new ApiError(400, "PARTNER_SUBJECT_REQUIRED", "This route needs the assertion's sub to name the user: a non-zero address.");
    }
    // A partner has no token `aud`: the user's default chain is the service's (API.md §5).
    return { caller: { owner: partner.subject, audienceChainId: useConfig().defaultChainId }, subject };
  }
  const caller = await authenticate(authorization);
  return { caller, subject: RateSubject.owner(caller.owner) };
}

function checkApiVersion(c: AppContext) {
  const version = c.req.header("x-api-version");
  if (version !== undefined && version.trim() !== "4") {
    throw new ApiError(400, "UNSUPPORTED_API_VERSION", "This service speaks API version 4 only.");
  }
}

function rateHeaders(d: RateDecision): Record<string, string> {
  return { "X-RateLimit-Limit": String(d.limit), "X-RateLimit-Remaining": String(d.remaining), "X-RateLimit-Reset": String(d.resetAt) };
}

/**
 * The client address for per-IP limits. The addresses the platform vouches for come first (API Gateway's
 * `sourceIp`, the node server's socket): `X-Forwarded-For` is written by the client, so preferring it
 * would let anyone pick a fresh bucket per request. It is used only when neither exists (`app.request()`).
 */
function clientIp(c: AppContext): string {
  const env = c.env as
    { incoming?: { socket?: { remoteAddress?: string } }; requestContext?: { http?: { sourceIp?: string } } } | undefined;
  const direct = env?.requestContext?.http?.sourceIp ?? env?.incoming?.socket?.remoteAddress;
  return direct ?? c.req.header("x-forwarded-for")?.split(",")[0]?.trim() ?? "unknown";
}

/**
 * When the function running this request is ended (epoch ms, Date.now): on Lambda its remaining time, which
 * hono/aws-lambda hands over as `lambdaContext`; Infinity elsewhere (`npm start`, `app.request()`).
 */
export function requestDeadline(c: AppContext): number {
  const lambda = (c.env as { lambdaContext?: { getRemainingTimeInMillis?: () => number } } | undefined)?.lambdaContext;
  const remaining = lambda?.getRemainingTimeInMillis?.();
  return remaining === undefined ? Infinity : Date.now() + remaining;
}

/**
 * The client's connection as a signal: aborted once it closes before its answer is complete. The node host
 * aborts the request's signal only if it existed when the connection closed, so a connection already closed
 * when the handler first asks is read from the host's response object.
 */
export function clientSignal(c: AppContext): AbortSignal {
  const signal = c.req.raw.signal;
  const outgoing = (c.env as { outgoing?: { closed?: boolean; writableFinished?: boolean } } | undefined)?.outgoing;
  if (!signal.aborted && outgoing?.closed && !outgoing.writableFinished) return AbortSignal.abort(new Error("client went away"));
  return signal;
}

/** Path parameter of the matched route (already percent-decoded). */
export const pathParam = (c: AppContext, name: string): string => c.get("params")[name] ?? "";
