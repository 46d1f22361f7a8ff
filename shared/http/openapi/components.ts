/**
 * What the OpenAPI document (shared/service/openapi.ts) declares once for every route: the common headers and
 * parameters, the shared problem responses, the security scheme, and the overview of the API.
 */
import type { Group } from "../endpoint";
import type { Config } from "../../config";
import { API_VERSION, COMMON_CODES, UNAUTHORIZED_CODES, type Json } from "./kit";
import { problemResponse } from "./responses";

export function sharedComponents(config: Config): Json {
  const { limits } = config;
  const headers: Record<string, Json> = {
    XRequestId: {
      description:
        "The request's `X-Request-Id` when it was 1–128 characters from `[A-Za-z0-9._:-]`, else a generated ULID. Also the `instance` of a problem body.",
      required: true,
      schema: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,128}$" },
    },
    XApiVersion: { description: "Always `4`.", required: true, schema: { type: "string", const: String(API_VERSION) } },
    XRateLimitLimit: {
      description: `Rate-limit bucket capacity (${limits.rateLimitBurst}). On every response to a request that reached the rate limiter (after the version and authentication checks).`,
      schema: { type: "integer", minimum: 1 },
    },
    XRateLimitRemaining: { description: "Whole tokens left after this request.", schema: { type: "integer", minimum: 0 } },
    XRateLimitReset: {
      description: "Unix time in seconds (rounded up) at which the bucket will be full again.",
      schema: { type: "integer", minimum: 0 },
    },
    RetryAfter: {
      description:
        "On 429 `RATE_LIMITED`: whole seconds (at least 1) until one token is available. On 409 `IDEMPOTENCY_IN_PROGRESS`: whole seconds (at least 1) until the first request's lease on the key ends, when a retry is answered (replayed, or performed once).",
      schema: { type: "integer", minimum: 1 },
    },
    WWWAuthenticate: { description: "Always `Bearer` on 401.", required: true, schema: { type: "string", const: "Bearer" } },
    CacheControlNoStore: {
      description: "`no-store` on authenticated responses and on every error.",
      schema: { type: "string", const: "no-store" },
    },
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
      description:
        "Optional. A value of 1–128 characters from `[A-Za-z0-9._:-]` is echoed in the response; any other value is ignored and a ULID generated.",
      schema: { type: "string", examples: ["client-req-42"] },
    },
  };
  const responses: Record<string, Json> = {
    Unauthorized: problemResponse(401, UNAUTHORIZED_CODES, COMMON_CODES, config),
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
    partnerAssertion: {
      type: "apiKey",
      in: "header",
      name: "X-Partner-Assertion",
      description:
        "API.md §21.1, on the routes that list it: a partner's compact JWS, EdDSA (Ed25519), signed with a key of its `PARTNERS` entry: `iss` its id, `exp` required and at most 1 hour ahead, `aud` including `PARTNER_ASSERTION_AUDIENCE` when set, `scope` (space-separated or an array) and the partner's registered `scopes` both including `read`; `sub` names the user where the route serves one. Used only without `Authorization` (with both, the bearer token's owner is served); on any other route it is no credential. Each partner has its own rate-limit bucket.",
    },
  };
  return { headers, parameters, responses, securitySchemes };
}

export const DESCRIPTION = (
  config: Config,
  groups: readonly Group[],
) => `The HTTP API of the workflow automation service, interface version ${API_VERSION} (API.md).

**Served by this deployment:** ${groups.map((g) => g.description.replace(/\.$/, "").replace(/^./, (ch) => ch.toLowerCase())).join("; ")}. Users create workflows (a trigger and a graph of nodes) that run from their smart wallets; every run is an execution, read-only to clients: the workflow and execution endpoints are described below with every other route of the contract that this deployment serves.

**Routing.** Paths are relative to the root of the base URL, with no version segment. A colon followed by a verb is a literal part of the path (\`/wallets/{address}:withdraw\`); paths are matched after percent-decoding, so \`%3A\` equals \`:\`. A trailing slash is not stripped. A path that matches no route answers 404 \`NOT_FOUND\`; a path that matches a route with another method answers 405 \`METHOD_NOT_ALLOWED\` with an \`Allow\` header; both are decided before authentication. \`HEAD\` on a \`GET\` route answers like \`GET\` without a body; \`OPTIONS\` is a CORS preflight answered 204 without authentication.

**Order of checks.** Route match (404/405) → \`X-Api-Version\` (400 \`UNSUPPORTED_API_VERSION\`) → authentication on non-public routes (401 \`AUTH_*\`) → rate limit (429 \`RATE_LIMITED\`) → body transport (413, 415, 400 \`INVALID_JSON\`) → field validation (400, all field errors reported together in \`errors\`) → record lookups (404) → state (409) → quotas (429 with \`limit\`) → upstream calls (400 \`INSUFFICIENT_BALANCE\`, 502/503 \`UPSTREAM_UNAVAILABLE\`). A request that fails any check changes nothing.

**Bodies.** Success bodies are \`application/json; charset=utf-8\`; errors are \`application/problem+json\` (see \`Problem\`); 204 responses carry no body. Request bodies larger than ${config.limits.maxBodyBytes} bytes answer 413. Unknown body members are rejected; an optional member sent as \`null\` is treated as absent. Unknown query parameters are ignored; known ones with a bad value answer 400 \`VALIDATION_FAILED\`. Boolean query parameters accept exactly \`true\`/\`false\`; integer ones decimal digits only. Big values (wei, salts, nonces) are decimal strings; times are unix milliseconds. \`x-rules\` lists checks a schema keyword cannot express (checksums, ranges of big numbers, UTF-8 byte limits, which \`maxLength\` only bounds).

**Errors.** Every 4xx/5xx body is RFC 7807 with a stable \`code\`; clients branch on \`code\`. Access to another owner's record answers exactly as if it did not exist.

**Paging.** Paged lists answer \`{data, pageInfo}\` and take \`limit\` (1–200, default 20), \`after\` and \`before\` (opaque cursors bound to the endpoint and caller; never both).

**Rate limiting.** A token bucket per token subject (per client IP on public routes): capacity ${config.limits.rateLimitBurst}, refilled at ${config.limits.rateLimitRps} tokens per second; \`X-RateLimit-*\` headers on every response that reached the limiter.

**Versioning.** Every response carries \`X-Api-Version: ${API_VERSION}\`; a request may send it, and any other value is rejected. Within version ${API_VERSION} only additive changes are made (new endpoints, optional request fields, response fields, error codes); clients must ignore response fields they do not know. Deprecations are announced here and with \`Deprecation\`/\`Sunset\` headers at least 6 months ahead.`;
