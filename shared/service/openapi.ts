/**
 * `GET /openapi.json` and `GET /docs` (API.md §6.3): the OpenAPI 3.1 document, generated from the route
 * declarations (api.ts → each group's contract.ts), and an HTML reference rendered from it.
 *
 * Every shape comes from a valibot schema converted with @valibot/to-json-schema (draft 2020-12, the OpenAPI
 * 3.1 dialect): schemas named with `component()` become `#/components/schemas/*`, query/header/path schemas
 * named with `parameter()` become `#/components/parameters/*`. What JSON Schema cannot express sits beside the
 * schema that owns it: `v.check` messages become `x-rules`, `configured()` adds text that quotes settings,
 * `asInteger()` documents a query string as the integer it is read as. This module holds only what every route
 * shares: the problem responses, the common headers and parameters, the security scheme and the overview.
 *
 * The document depends only on the settings, so it is built once per configuration and cached.
 */
import type * as v from "valibot";
import { toJsonSchema, toJsonSchemaDefs, type ConversionConfig, type JsonSchema } from "@valibot/to-json-schema";
import { route, type Route } from "../http/app";
import { AS_INTEGER, CONFIGURED, entriesOf, parameterNames, schemaNames, type Endpoint, type Group, type ProblemCode, type RequestSchema, type Text } from "../http/contract";
import { api } from "./api";
import * as Service from "./contract";
import type { Config } from "../config";
import { useRuntime } from "../current-runtime";
// Components every route refers to (they register themselves when loaded).
import "../http/problem";
import "../http/paging";

type Json = Record<string, unknown>;

const API_VERSION = 4;

const schemaRef = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const paramRef = (name: string): Json => ({ $ref: `#/components/parameters/${name}` });
const headerRef = (name: string): Json => ({ $ref: `#/components/headers/${name}` });
const responseRef = (name: string): Json => ({ $ref: `#/components/responses/${name}` });
const text = (t: Text, config: Config) => (typeof t === "function" ? t(config) : t);

/** HTTP reason phrases used as problem `title` (API.md §2). */
const TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  412: "Precondition Failed",
  413: "Payload Too Large",
  415: "Unsupported Media Type",
  422: "Unprocessable Entity",
  429: "Too Many Requests",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
};

/** Codes the app itself or several groups answer (API.md §15); a group declares the codes only it answers. */
const COMMON_CODES: Record<string, ProblemCode> = {
  AUTH_REQUIRED: { meaning: "No `Authorization` header on a non-public route." },
  AUTH_MALFORMED: { meaning: "Not `Bearer <token>`, or the token is not a compact JWS." },
  AUTH_INVALID_TOKEN: { meaning: "Bad signature, expired, wrong issuer, `alg` not ES256 (`none` included), unknown `kid`, bad claims." },
  INVALID_JSON: { meaning: "Body is not JSON or not a JSON object." },
  VALIDATION_FAILED: { meaning: "A field-level problem in path, query, headers or body; `errors` lists every problem found.", fields: true },
  INVALID_CURSOR: { meaning: "`before`/`after` cursor undecodable or issued by another endpoint or for another caller." },
  UNSUPPORTED_API_VERSION: { meaning: "`X-Api-Version` other than `4`." },
  UNSUPPORTED_CHAIN: { meaning: "A non-zero chain id that is not configured." },
  PAYLOAD_TOO_LARGE: { meaning: "Request body over the body limit." },
  UNSUPPORTED_MEDIA_TYPE: { meaning: "Non-empty body without `Content-Type: application/json`." },
  RATE_LIMITED: { meaning: "Rate-limit bucket empty; `Retry-After` says when to retry. The rejected request consumed no token." },
  IDEMPOTENCY_IN_PROGRESS: { meaning: "A request with the same `Idempotency-Key` is still being processed." },
  IDEMPOTENCY_KEY_MISMATCH: { meaning: "`Idempotency-Key` reused with a different body." },
  INTERNAL: { meaning: "Unexpected failure; generic `detail`." },
  UPSTREAM_UNAVAILABLE: {
    meaning: "Chain RPC, bundler, paymaster or key service unusable: 503 when unreachable or timed out, 502 when it answered with something invalid.",
  },
};

// ---------------------------------------------------------------------------------------------------------
// Schemas

/** valibot → JSON Schema with the annotations of contract.ts; named schemas become component references. */
function conversion(config: Config, definitions: Record<string, v.GenericSchema>): ConversionConfig {
  return {
    target: "draft-2020-12",
    // Transforms have no JSON Schema; the pipe around them still converts (patterns first, then the transform).
    errorMode: "ignore",
    definitions,
    overrideRef: ({ referenceId }) => `#/components/schemas/${referenceId}`,
    overrideAction: ({ valibotAction, jsonSchema }) => annotate(valibotAction, jsonSchema as Json, config) as JsonSchema | undefined,
  };
}

/** The annotations of contract.ts: check messages as `x-rules`, `configured()` text, `asInteger()` ranges. */
function annotate(valibotAction: unknown, schema: Json, config: Config): Json | undefined {
  const action = valibotAction as { type: string; message?: unknown; metadata?: Record<string, unknown> };
  if (action.type === "check" && typeof action.message === "string") {
    return { ...schema, "x-rules": [...((schema["x-rules"] as string[] | undefined) ?? []), action.message] };
  }
  const doc = action.type === "metadata" ? action.metadata?.[CONFIGURED] : undefined;
  if (typeof doc === "function") {
    const { [CONFIGURED]: _, ...rest } = schema;
    return { ...rest, ...(doc as (c: Config) => Json)(config) };
  }
  const integer = action.type === "metadata" ? action.metadata?.[AS_INTEGER] : undefined;
  if (integer) {
    const { [AS_INTEGER]: _, pattern: _pattern, ...rest } = schema;
    return { ...rest, type: "integer", ...(integer as Json) };
  }
  return undefined;
}

/**
 * A request object: unknown members are rejected, and optional members also accept `null` (API.md §1.3:
 * an optional member sent as `null` is treated as absent).
 */
function requestObject(schema: Json): Json {
  const required = new Set((schema.required as string[] | undefined) ?? []);
  const properties = Object.fromEntries(
    Object.entries((schema.properties as Record<string, Json> | undefined) ?? {}).map(([name, prop]) => {
      if (required.has(name)) return [name, prop];
      if (typeof prop.type === "string") return [name, { ...prop, type: [prop.type, "null"] }];
      if (Array.isArray(prop.anyOf)) return [name, { ...prop, anyOf: [...prop.anyOf, { type: "null" }] }];
      if (prop.$ref !== undefined) return [name, { anyOf: [prop, { type: "null" }] }];
      return [name, prop]; // already accepts anything, null included
    }),
  );
  return { ...schema, type: "object", properties, additionalProperties: false };
}

class Builder {
  readonly definitions: Record<string, v.GenericSchema> = {};
  readonly parameters: Record<string, Json> = {};
  private readonly cfg: ConversionConfig;
  private readonly requestBodies = new Set<string>();

  constructor(private readonly config: Config) {
    for (const [schema, name] of schemaNames) {
      if (this.definitions[name] && this.definitions[name] !== schema) throw new Error(`Two schemas are named ${name}`);
      this.definitions[name] = schema;
    }
    this.cfg = conversion(config, this.definitions);
  }

  /** A schema where it is used: a reference when it is named, else inline. */
  schema(schema: v.GenericSchema): Json {
    const { $schema: _, $defs: _defs, ...rest } = toJsonSchema(schema, this.cfg) as Json;
    return rest;
  }

  /** The body schema of a request (a closed object accepting null for optional members). */
  requestBody(schema: v.GenericSchema): Json {
    const name = schemaNames.get(schema);
    if (!name) return requestObject(this.schema(schema));
    this.requestBodies.add(name);
    return schemaRef(name);
  }

  schemas(): Record<string, Json> {
    const converted = toJsonSchemaDefs(this.definitions, this.cfg) as Record<string, Json>;
    for (const name of this.requestBodies) converted[name] = requestObject(converted[name]!);
    return converted;
  }

  /** The parameters of one part of a request (path, query or header), named ones as component references. */
  params(schema: RequestSchema | undefined, location: "path" | "query" | "header"): Json[] {
    if (!schema) return [];
    return Object.entries(entriesOf(schema)).map(([name, entry]) => {
      const param = this.param(name, location, entry);
      const component = parameterNames.get(entry);
      if (!component) return param;
      const existing = this.parameters[component];
      if (existing && (existing.name !== name || existing.in !== location)) throw new Error(`Parameter ${component} is used as two parameters`);
      this.parameters[component] = param;
      return paramRef(component);
    });
  }

  private param(name: string, location: string, entry: v.GenericSchema): Json {
    const { description, ...schema } = this.schema(entry);
    if (schema.type === "integer" && typeof schema.default === "string") schema.default = Number(schema.default);
    const optional = ["optional", "exact_optional", "nullish"].includes(entry.type);
    return {
      name,
      in: location,
      required: location === "path" || !optional,
      ...(description ? { description } : {}),
      ...(schema.type === "array" ? { style: "form", explode: true } : {}),
      schema,
    };
  }

  /** The problem code catalogue for a group's routes. */
  codes(group: Group): Record<string, ProblemCode> {
    return { ...COMMON_CODES, ...group.codes };
  }

  get settings() {
    return this.config;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Responses

function problemExample(status: number, code: string, meaning: ProblemCode, config: Config): Json {
  const detail =
    status === 500
      ? "An internal error occurred."
      : code === "UPSTREAM_UNAVAILABLE"
        ? "The chain RPC or bundler is unavailable."
        : code === "VALIDATION_FAILED"
          ? "Request validation failed."
          : meaning.meaning;
  const value: Json = { type: "about:blank", title: TITLES[status], status, detail, instance: "01JD7Q0S7W3C2Y8K5N6M4P1R9T", code };
  if (code === "VALIDATION_FAILED") value.errors = [{ path: "query.limit", message: "must be at most 200" }];
  else if (meaning.fields) value.errors = [{ path: "body.field", message: "what is wrong, in plain words" }];
  Object.assign(value, meaning.example?.(config));
  return { summary: code, value };
}

/** One error status of one operation: a problem+json body whose `code` is one of `codes`. */
function problemResponse(status: number, codes: string[], catalogue: Record<string, ProblemCode>, config: Config, note?: string): Json {
  const entries = codes.map((code) => {
    const meaning = catalogue[code];
    if (!meaning) throw new Error(`Problem code ${code} is not declared (API.md §15)`);
    return [code, meaning] as const;
  });
  const headers: Json = {
    "X-Request-Id": headerRef("XRequestId"),
    "X-Api-Version": headerRef("XApiVersion"),
    "Cache-Control": headerRef("CacheControlNoStore"),
  };
  if (status === 401) headers["WWW-Authenticate"] = headerRef("WWWAuthenticate");
  else Object.assign(headers, rateLimitHeaders());
  if (codes.includes("RATE_LIMITED")) headers["Retry-After"] = headerRef("RetryAfter");
  const lines = entries.map(([code, meaning]) => `- \`${code}\`: ${meaning.meaning}`);
  return {
    description: `${TITLES[status]}. \`code\` is one of:\n\n${lines.join("\n")}${note ? `\n\n${note}` : ""}`,
    headers,
    content: {
      "application/problem+json": {
        schema: schemaRef("Problem"),
        examples: Object.fromEntries(entries.map(([code, meaning]) => [code, problemExample(status, code, meaning, config)])),
      },
    },
    "x-problem-codes": codes,
  };
}

const rateLimitHeaders = (): Json => ({
  "X-RateLimit-Limit": headerRef("XRateLimitLimit"),
  "X-RateLimit-Remaining": headerRef("XRateLimitRemaining"),
  "X-RateLimit-Reset": headerRef("XRateLimitReset"),
});

function successResponse(b: Builder, e: Endpoint, status: number): Json {
  const declared = e.responses[status]!;
  const headers: Json = {
    "X-Request-Id": headerRef("XRequestId"),
    "X-Api-Version": headerRef("XApiVersion"),
    ...rateLimitHeaders(),
    ...(e.public ? {} : { "Cache-Control": headerRef("CacheControlNoStore") }),
    ...(e.idempotent ? { "Idempotency-Replayed": headerRef("IdempotencyReplayed") } : {}),
  };
  for (const [name, schema] of Object.entries(declared.headers ?? {})) {
    const { description, ...converted } = b.schema(schema);
    headers[name] = { description: description ?? name, required: schema.type !== "optional", schema: converted };
  }
  const response: Json = { description: declared.description, headers };
  if (declared.body) response.content = { [declared.media ?? "application/json"]: { schema: b.schema(declared.body) } };
  return response;
}

// ---------------------------------------------------------------------------------------------------------
// Operations

function operation(b: Builder, group: Group, e: Endpoint): Json {
  const config = b.settings;
  const errors = new Map<number, string[]>(Object.entries(e.errors ?? {}).map(([status, codes]) => [Number(status), [...codes]]));
  const add = (status: number, codes: string[], first = false) => {
    const current = errors.get(status) ?? [];
    errors.set(status, first ? [...codes, ...current] : [...current, ...codes]);
  };
  // API.md §1.6: X-Api-Version, authentication, rate limit, body transport come before the endpoint's checks.
  if (e.body) add(400, ["INVALID_JSON"], true);
  add(400, ["UNSUPPORTED_API_VERSION"], true);
  if (e.body) {
    add(413, ["PAYLOAD_TOO_LARGE"]);
    add(415, ["UNSUPPORTED_MEDIA_TYPE"]);
  }
  add(429, ["RATE_LIMITED"], true);
  if (e.idempotent) {
    add(409, ["IDEMPOTENCY_IN_PROGRESS"]);
    add(422, ["IDEMPOTENCY_KEY_MISMATCH"]);
  }

  const responses: Json = {};
  for (const status of Object.keys(e.responses)) responses[status] = successResponse(b, e, Number(status));
  if (!e.public) responses["401"] = responseRef("Unauthorized");
  const notes: Record<number, string | undefined> = {
    ...Object.fromEntries(Object.entries(e.notes ?? {}).map(([status, note]) => [status, text(note, config)])),
    413: `\`PAYLOAD_TOO_LARGE\`: the body is larger than ${config.limits.maxBodyBytes} bytes.`,
  };
  const catalogue = b.codes(group);
  for (const status of [...errors.keys()].sort((x, y) => x - y)) {
    responses[String(status)] = problemResponse(status, errors.get(status)!, catalogue, config, notes[status]);
  }
  responses["500"] = responseRef("InternalError");

  const result: Json = {
    operationId: e.operationId,
    summary: e.summary,
    description: text(e.description, config),
    tags: [group.name],
    parameters: [
      ...b.params(e.params, "path"),
      ...b.params(e.query, "query"),
      ...b.params(e.headers, "header"),
      paramRef("XApiVersion"),
      paramRef("XRequestId"),
    ],
    responses,
  };
  if (e.body) {
    result.requestBody = {
      required: false,
      description:
        "`Content-Type: application/json` (parameters such as `charset=utf-8` allowed) when the body is non-empty; an empty body is read as `{}` and then validated. Unknown members are rejected; an optional member sent as `null` is treated as absent.",
      content: { "application/json": { schema: b.requestBody(e.body) } },
    };
  }
  // Public operations say so explicitly (`[]`); there is no document-level default.
  result.security = e.public ? [] : [{ bearerAuth: [] }];
  return result;
}

// ---------------------------------------------------------------------------------------------------------
// Components every route shares

function sharedComponents(config: Config): Json {
  const { limits } = config;
  const headers: Record<string, Json> = {
    XRequestId: {
      description: "The request's `X-Request-Id` when it was 1–128 characters from `[A-Za-z0-9._:-]`, else a generated ULID. Also the `instance` of a problem body.",
      required: true,
      schema: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,128}$" },
    },
    XApiVersion: { description: "Always `4`.", required: true, schema: { type: "string", const: String(API_VERSION) } },
    XRateLimitLimit: {
      description: `Rate-limit bucket capacity (${limits.rateLimitBurst}). On every response to a request that reached the rate limiter (after the version and authentication checks).`,
      schema: { type: "integer", minimum: 1 },
    },
    XRateLimitRemaining: { description: "Whole tokens left after this request.", schema: { type: "integer", minimum: 0 } },
    XRateLimitReset: { description: "Unix time in seconds (rounded up) at which the bucket will be full again.", schema: { type: "integer", minimum: 0 } },
    RetryAfter: { description: "On 429 `RATE_LIMITED` only: whole seconds (at least 1) until one token is available.", schema: { type: "integer", minimum: 1 } },
    WWWAuthenticate: { description: "Always `Bearer` on 401.", required: true, schema: { type: "string", const: "Bearer" } },
    CacheControlNoStore: { description: "`no-store` on authenticated responses and on every error.", schema: { type: "string", const: "no-store" } },
    IdempotencyReplayed: {
      description: "`true` when the response is a replay of an earlier request with the same `Idempotency-Key`; absent otherwise.",
      schema: { type: "string", const: "true" },
    },
  };
  const parameters: Record<string, Json> = {
    XApiVersion: {
      name: "X-Api-Version",
      in: "header",
      required: false,
      description: "Optional. Any value other than `4` → 400 `UNSUPPORTED_API_VERSION` (checked before authentication).",
      schema: { type: "string", enum: [String(API_VERSION)] },
    },
    XRequestId: {
      name: "X-Request-Id",
      in: "header",
      required: false,
      description: "Optional. A value of 1–128 characters from `[A-Za-z0-9._:-]` is echoed in the response; any other value is ignored and a ULID generated.",
      schema: { type: "string", examples: ["client-req-42"] },
    },
  };
  const responses: Record<string, Json> = {
    Unauthorized: problemResponse(401, ["AUTH_REQUIRED", "AUTH_MALFORMED", "AUTH_INVALID_TOKEN"], COMMON_CODES, config),
    InternalError: problemResponse(500, ["INTERNAL"], COMMON_CODES, config),
  };
  const securitySchemes = {
    bearerAuth: {
      type: "http",
      scheme: "bearer",
      bearerFormat: "JWT",
      description:
        "`Authorization: Bearer <token>` with a token from `POST /auth:exchange` (ES256 JWT). No query-string or cookie alternative. Missing header → 401 `AUTH_REQUIRED`; not `Bearer <three base64url segments>` → 401 `AUTH_MALFORMED`; bad signature, `alg` other than ES256, unknown `kid`, wrong `iss`, expired (no leeway), `iat` more than 60 s ahead, bad `sub`/`aud` → 401 `AUTH_INVALID_TOKEN`.",
    },
  };
  return { headers, parameters, responses, securitySchemes };
}

const DESCRIPTION = (config: Config, groups: readonly Group[]) => `The HTTP API of the workflow automation service, interface version ${API_VERSION} (API.md).

**Served by this deployment:** ${groups.map((g) => g.description.replace(/\.$/, "").replace(/^./, (ch) => ch.toLowerCase())).join("; ")}. Users create workflows (a trigger and a graph of nodes) that run from their smart wallets; every run is an execution, read-only to clients: the workflow and execution endpoints are described below with every other route of the contract that this deployment serves.

**Routing.** Paths are relative to the root of the base URL, with no version segment. A colon followed by a verb is a literal part of the path (\`/wallets/{address}:withdraw\`); paths are matched after percent-decoding, so \`%3A\` equals \`:\`. A trailing slash is not stripped. A path that matches no route answers 404 \`NOT_FOUND\`; a path that matches a route with another method answers 405 \`METHOD_NOT_ALLOWED\` with an \`Allow\` header; both are decided before authentication. \`HEAD\` on a \`GET\` route answers like \`GET\` without a body; \`OPTIONS\` is a CORS preflight answered 204 without authentication.

**Order of checks.** Route match (404/405) → \`X-Api-Version\` (400 \`UNSUPPORTED_API_VERSION\`) → authentication on non-public routes (401 \`AUTH_*\`) → rate limit (429 \`RATE_LIMITED\`) → body transport (413, 415, 400 \`INVALID_JSON\`) → field validation (400, all field errors reported together in \`errors\`) → record lookups (404) → state (409) → quotas (429 with \`limit\`) → upstream calls (400 \`INSUFFICIENT_BALANCE\`, 502/503 \`UPSTREAM_UNAVAILABLE\`). A request that fails any check changes nothing.

**Bodies.** Success bodies are \`application/json; charset=utf-8\`; errors are \`application/problem+json\` (see \`Problem\`); 204 responses carry no body. Request bodies larger than ${config.limits.maxBodyBytes} bytes answer 413. Unknown body members are rejected; an optional member sent as \`null\` is treated as absent. Unknown query parameters are ignored; known ones with a bad value answer 400 \`VALIDATION_FAILED\`. Boolean query parameters accept exactly \`true\`/\`false\`; integer ones decimal digits only. Big values (wei, salts, nonces) are decimal strings; times are unix milliseconds. \`x-rules\` lists checks a schema keyword cannot express (checksums, ranges of big numbers).

**Errors.** Every 4xx/5xx body is RFC 7807 with a stable \`code\`; clients branch on \`code\`. Access to another owner's record answers exactly as if it did not exist.

**Paging.** Paged lists answer \`{data, pageInfo}\` and take \`limit\` (1–200, default 20), \`after\` and \`before\` (opaque cursors bound to the endpoint and caller; never both).

**Rate limiting.** A token bucket per token subject (per client IP on public routes): capacity ${config.limits.rateLimitBurst}, refilled at ${config.limits.rateLimitRps} tokens per second; \`X-RateLimit-*\` headers on every response that reached the limiter.

**Versioning.** Every response carries \`X-Api-Version: ${API_VERSION}\`; a request may send it, and any other value is rejected. Within version ${API_VERSION} only additive changes are made (new endpoints, optional request fields, response fields, error codes); clients must ignore response fields they do not know. Deprecations are announced here and with \`Deprecation\`/\`Sunset\` headers at least 6 months ahead.`;

/** The OpenAPI document of `groups` under `config`. */
export function buildDocument(config: Config, groups: readonly Group[] = api): Json {
  const b = new Builder(config);
  const paths: Record<string, Json> = {};
  for (const group of groups) {
    for (const e of group.endpoints) (paths[e.path] ??= {})[e.method.toLowerCase()] = operation(b, group, e);
  }
  const shared = sharedComponents(config);
  return {
    openapi: "3.1.1",
    jsonSchemaDialect: "https://spec.openapis.org/oas/3.1/dialect/base",
    info: {
      title: "Workflow Automation Service API",
      version: config.serviceVersion,
      "x-api-version": API_VERSION,
      description: DESCRIPTION(config, groups),
    },
    "x-api-version": API_VERSION,
    servers: [{ url: "/", description: "This deployment" }],
    tags: groups.map((g) => ({ name: g.name, description: g.description })),
    paths,
    components: {
      schemas: b.schemas(),
      parameters: { ...b.parameters, ...(shared.parameters as Json) },
      headers: shared.headers,
      responses: shared.responses,
      securitySchemes: shared.securitySchemes,
    },
  };
}

// ---------------------------------------------------------------------------------------------------------
// /docs

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[ch]!);

function buildDocsPage(doc: Json): string {
  const info = doc.info as Json;
  const rows: string[] = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Json>>)) {
    for (const [method, op] of Object.entries(item)) {
      const auth = (op.security as unknown[]).length > 0 ? "bearer token" : "public";
      rows.push(
        `<li><code>${method.toUpperCase()} ${escapeHtml(path)}</code> — ${escapeHtml(String(op.summary))} <small>(${auth}; <code>${escapeHtml(String(op.operationId))}</code>)</small></li>`,
      );
    }
  }
  const title = `${escapeHtml(String(info.title))} ${escapeHtml(String(info.version))}`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<style>body{font-family:system-ui,sans-serif;margin:2rem;line-height:1.5}code{font-size:.95em}li{margin:.25rem 0}</style>
</head>
<body>
<div id="app"></div>
<main id="fallback">
<h1>${title}</h1>
<p>Interface version ${API_VERSION}. The machine-readable description is <a href="./openapi.json">/openapi.json</a> (OpenAPI 3.1); an interactive reference loads here when JavaScript and the CDN are available.</p>
<h2>Operations</h2>
<ul>
${rows.join("\n")}
</ul>
</main>
<script src="https://cdn.jsdelivr.net/npm/@scalar/api-reference@1"></script>
<script>
(function () {
  if (!window.Scalar || typeof window.Scalar.createApiReference !== "function") return;
  document.getElementById("fallback").hidden = true;
  window.Scalar.createApiReference("#app", { url: new URL("openapi.json", window.location.href).href });
})();
</script>
</body>
</html>
`;
}

// ---------------------------------------------------------------------------------------------------------
// Cache and routes

interface Built {
  document: Json;
  json: string;
  html: string;
}

const cache = new WeakMap<Config, Built>();

function built(config: Config): Built {
  let entry = cache.get(config);
  if (!entry) {
    const document = buildDocument(config);
    entry = { document, json: JSON.stringify(document), html: buildDocsPage(document) };
    cache.set(config, entry);
  }
  return entry;
}

/** The OpenAPI document for a configuration (the running one by default); built once per configuration. */
export const openapiDocument = (config: Config = useRuntime().config): Json => built(config).document;

export const openapiRoutes: Route[] = [
  route(Service.openapi, (c) => c.body(built(useRuntime().config).json, 200, { "Content-Type": "application/json; charset=utf-8" })),
  route(Service.docs, (c) => c.html(built(useRuntime().config).html, 200)),
];
