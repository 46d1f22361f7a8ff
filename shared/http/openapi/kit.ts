/**
 * What every part of the OpenAPI document (shared/service/openapi.ts) shares: the JSON type, references to
 * components, the interface version, the problem titles and the problem codes every group answers.
 */
import type { ProblemCode, Text } from "../endpoint";
import type { Config } from "../../config";

export type Json = Record<string, unknown>;

export const API_VERSION = 4;

export const schemaRef = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
export const paramRef = (name: string): Json => ({ $ref: `#/components/parameters/${name}` });
export const headerRef = (name: string): Json => ({ $ref: `#/components/headers/${name}` });
export const responseRef = (name: string): Json => ({ $ref: `#/components/responses/${name}` });
export const text = (t: Text, config: Config) => (typeof t === "function" ? t(config) : t);

/** HTTP reason phrases used as problem `title` (API.md §2). */
export const TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
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

/** The 401 codes of a bearer token (API.md §7.3). */
export const UNAUTHORIZED_CODES = ["AUTH_REQUIRED", "AUTH_MALFORMED", "AUTH_INVALID_TOKEN"];

/** Codes the app itself or several groups answer (API.md §15); a group declares the codes only it answers. */
export const COMMON_CODES: Record<string, ProblemCode> = {
  AUTH_REQUIRED: { meaning: "No `Authorization` header on a non-public route." },
  AUTH_MALFORMED: { meaning: "Not `Bearer <token>`, or the token is not a compact JWS." },
  AUTH_INVALID_TOKEN: { meaning: "Bad signature, expired, wrong issuer, `alg` not ES256 (`none` included), unknown `kid`, bad claims." },
  PARTNER_ASSERTION_MALFORMED: { meaning: "`X-Partner-Assertion` is not a compact JWS with a JSON payload naming its partner in `iss`." },
  PARTNER_UNKNOWN: { meaning: "The assertion's `iss` is not a partner of `PARTNERS`." },
  PARTNER_ASSERTION_INVALID: { meaning: "The signature does not verify with any of the partner's keys, or `alg` is not EdDSA." },
  PARTNER_ASSERTION_NO_EXP: { meaning: "The assertion has no numeric `exp`." },
  PARTNER_ASSERTION_TTL: {
    meaning: "The assertion has expired (no leeway), or its `exp` is more than 1 hour ahead of the server's clock.",
  },
  PARTNER_ASSERTION_AUDIENCE: { meaning: "`PARTNER_ASSERTION_AUDIENCE` is set and the assertion's `aud` does not include it." },
  PARTNER_SUSPENDED: { meaning: "The partner's status in `PARTNERS` is `suspended`." },
  PARTNER_SCOPE_DENIED: { meaning: "The partner's registered `scopes` lack the scope this route needs (`read`)." },
  PARTNER_TOKEN_SCOPE: { meaning: "The assertion's `scope` lacks the scope this route needs (`read`)." },
  PARTNER_SUBJECT_REQUIRED: { meaning: "A partner assertion on a route that serves a user: its `sub` is not a non-zero address." },
  INVALID_JSON: { meaning: "Body is not JSON or not a JSON object." },
  VALIDATION_FAILED: {
    meaning: "A field-level problem in path, query, headers or body; `errors` lists every problem found.",
    fields: true,
  },
  INVALID_CURSOR: { meaning: "`before`/`after` cursor undecodable or issued by another endpoint or for another caller." },
  UNSUPPORTED_API_VERSION: { meaning: "`X-Api-Version` other than `4`." },
  UNSUPPORTED_CHAIN: { meaning: "A non-zero chain id that is not configured." },
  PAYLOAD_TOO_LARGE: { meaning: "Request body over the body limit." },
  UNSUPPORTED_MEDIA_TYPE: { meaning: "Non-empty body without `Content-Type: application/json`." },
  RATE_LIMITED: { meaning: "Rate-limit bucket empty; `Retry-After` says when to retry. The rejected request consumed no token." },
  IDEMPOTENCY_IN_PROGRESS: {
    meaning:
      "A request with the same `Idempotency-Key` is still being processed; `Retry-After` says when its lease ends (after a crash, a retry then replays its outcome or performs it once).",
  },
  IDEMPOTENCY_KEY_MISMATCH: { meaning: "`Idempotency-Key` reused with a different body." },
  INTERNAL: { meaning: "Unexpected failure; generic `detail`." },
  UPSTREAM_UNAVAILABLE: {
    meaning:
      "Chain RPC, bundler, paymaster or key service unusable: 503 when unreachable or timed out, 502 when it answered with something invalid.",
  },
};
