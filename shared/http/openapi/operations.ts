/**
 * One operation of the OpenAPI document (shared/service/openapi.ts): its parameters, request body, security,
 * and its responses with the error codes the app adds in the order of API.md §1.6.
 */
import type { Endpoint, Group } from "../endpoint";
import type { Builder } from "./schemas";
import { paramRef, responseRef, text, UNAUTHORIZED_CODES, type Json } from "./kit";

const PARTNER_401 = [
  "PARTNER_ASSERTION_MALFORMED",
  "PARTNER_UNKNOWN",
  "PARTNER_ASSERTION_INVALID",
  "PARTNER_ASSERTION_NO_EXP",
  "PARTNER_ASSERTION_TTL",
  "PARTNER_ASSERTION_AUDIENCE",
];
import { problemResponse, successResponse } from "./responses";

export function operation(b: Builder, group: Group, e: Endpoint): Json {
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
  if (e.partner) {
    // API.md §21.1: where an assertion is a credential, its refusals join the token's.
    responses["401"] = problemResponse(401, [...UNAUTHORIZED_CODES, ...PARTNER_401], b.codes(group), config);
    add(403, ["PARTNER_SUSPENDED", "PARTNER_SCOPE_DENIED", "PARTNER_TOKEN_SCOPE"]);
    if (e.partner.subject) add(400, ["PARTNER_SUBJECT_REQUIRED"]);
  } else if (!e.public) responses["401"] = responseRef("Unauthorized");
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
      required: b.bodyRequired(e.body),
      description:
        "`Content-Type: application/json` (parameters such as `charset=utf-8` allowed) when the body is non-empty; an empty body is read as `{}` and then validated. Unknown members are rejected; an optional member sent as `null` is treated as absent.",
      content: { "application/json": { schema: b.requestBody(e.body) } },
    };
  }
  // Public operations say so explicitly (`[]`); there is no document-level default.
  result.security = e.public ? [] : e.partner ? [{ bearerAuth: [] }, { partnerAssertion: [] }] : [{ bearerAuth: [] }];
  return result;
}
