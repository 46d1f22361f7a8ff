/**
 * The responses of the OpenAPI document's operations (shared/service/openapi.ts): problem+json error responses
 * with an example per code, the rate-limit headers, and the declared success responses.
 */
import type { Endpoint, ProblemCode } from "../endpoint";
import type { Config } from "../../config";
import type { Builder } from "./schemas";
import { headerRef, schemaRef, TITLES, type Json } from "./kit";

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
export function problemResponse(
  status: number,
  codes: string[],
  catalogue: Record<string, ProblemCode>,
  config: Config,
  note?: string,
): Json {
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
  if (codes.includes("RATE_LIMITED") || codes.includes("IDEMPOTENCY_IN_PROGRESS")) headers["Retry-After"] = headerRef("RetryAfter");
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

export function successResponse(b: Builder, e: Endpoint, status: number): Json {
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
