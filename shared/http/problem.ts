/** RFC 7807 problem bodies (API.md §2): the schema the document shows, and the bodies the service sends. */
import { STATUS_CODES } from "node:http";
import * as v from "valibot";
import type { FieldError } from "../errors";
import { component } from "./endpoint";

const FieldErrorSchema = component(
  "FieldError",
  v.object({
    path: v.pipe(
      v.string(),
      v.description(
        "Where the problem is, prefixed by its location (`body.`, `query.`, `path.` or `header.`), then a dotted path with `[index]` for arrays, e.g. `body.salt`, `query.limit`, `path.address`, `header.Idempotency-Key`.",
      ),
      v.examples(["query.limit"]),
    ),
    message: v.pipe(v.string(), v.description("What is wrong, in plain words.")),
  }),
);

/** @public registered as the `Problem` component of the OpenAPI document when this module loads. */
export const ProblemSchema = component(
  "Problem",
  v.pipe(
    v.object({
      type: v.pipe(v.literal("about:blank"), v.description("Always `about:blank`.")),
      title: v.pipe(v.string(), v.description("The HTTP reason phrase of `status`."), v.examples(["Bad Request"])),
      status: v.pipe(v.number(), v.integer(), v.minValue(400), v.maxValue(599), v.description("Same as the HTTP status.")),
      detail: v.pipe(v.string(), v.description("Human-readable explanation for this occurrence. Not stable; do not parse.")),
      instance: v.pipe(v.string(), v.description("The request id (same value as the `X-Request-Id` response header).")),
      code: v.pipe(
        v.string(),
        v.regex(/^[A-Z][A-Z0-9_]*$/),
        v.description("Stable UPPER_SNAKE machine code (API.md §15)."),
        v.examples(["VALIDATION_FAILED"]),
      ),
      errors: v.optional(
        v.pipe(
          v.array(FieldErrorSchema),
          v.description("Present on `VALIDATION_FAILED` and the other field-level 400s; lists every problem found."),
        ),
      ),
      reason: v.optional(
        v.pipe(
          v.picklist(["EXPIRED", "MAX_EXECUTIONS_REACHED", "FAILED", "DISABLED", "NOT_STARTED"]),
          v.description("On 412 `WORKFLOW_NOT_RUNNABLE` only."),
        ),
      ),
      limit: v.optional(
        v.pipe(
          v.number(),
          v.integer(),
          v.minValue(0),
          v.description(
            "On the quota 429s (`WALLETS_LIMIT_REACHED`, `WORKFLOWS_LIMIT_REACHED`, `SECRETS_LIMIT_REACHED`): the cap that was hit.",
          ),
        ),
      ),
    }),
    v.description(
      "RFC 7807 problem details, the body of every 4xx and 5xx response (`application/problem+json`). Clients branch on `code`, never on `detail`; new codes may be added within version 4. 5xx bodies never contain stack traces, upstream responses, storage errors, keys or secret values, and no error body ever contains a secret value.",
    ),
  ),
);

export type Problem = v.InferOutput<typeof ProblemSchema>;

export interface ProblemInput {
  status: number;
  code: string;
  detail: string;
  requestId: string;
  errors?: FieldError[];
  reason?: string;
  limit?: number;
}

export function problemResponse(p: ProblemInput, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(problemBody(p)), {
    status: p.status,
    // A Headers object, not a record: see the first middleware in app.ts.
    headers: new Headers({ "Content-Type": "application/problem+json", ...headers }),
  });
}

export function problemBody(p: ProblemInput): Problem {
  return {
    type: "about:blank",
    title: STATUS_CODES[p.status] ?? "Error",
    status: p.status,
    detail: p.detail,
    instance: p.requestId,
    code: p.code,
    ...(p.errors ? { errors: p.errors } : {}),
    ...(p.reason ? { reason: p.reason as Problem["reason"] } : {}),
    ...(p.limit !== undefined ? { limit: p.limit } : {}),
  };
}
