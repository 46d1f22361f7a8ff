/**
 * One operation of the OpenAPI document (shared/service/openapi.ts): its parameters, request body, security,
 * and its responses with the error codes the app adds in the order of API.md §1.6.
 */
import type { Endpoint, Group } from "../endpoint";
import type { Builder } from "./schemas";
import { paramRef, responseRef, text, type Json } from "./kit";
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
      required: b.bodyRequired(e.body),
      description:
        "`Content-Type: application/json` (parameters such as `charset=utf-8` allowed) when the body is non-empty; an empty body is read as `{}` and then validated. Unknown members are rejected; an optional member sent as `null` is treated as absent.",
      content: { "application/json": { schema: b.requestBody(e.body) } },
    };
  }
  // Public operations say so explicitly (`[]`); there is no document-level default.
  result.security = e.public ? [] : [{ bearerAuth: [] }];
  return result;
}
