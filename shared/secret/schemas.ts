/**
 * The shapes of the secrets API (API.md §12), used by the domain (secret.ts) to validate and by the contract
 * (endpoints.ts) to document. Messages never echo the received value (a mistyped value might still be a secret).
 */
import * as v from "valibot";
import { useConfig } from "../current-runtime";
import { component, configured, described } from "../http/endpoint";
import { page } from "../http/paging";
import { TimeMs, Ulid } from "../http/schemas";

export const NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

export const Name = v.pipe(
  v.string("must be a string"),
  v.regex(NAME_PATTERN, "must start with a letter or _ and contain only letters, digits and _ (at most 128 characters)"),
);

/** Names starting with `ap_` in any letter case are reserved (SECRET_NAME_RESERVED). */
export const isReservedName = (name: string) => name.slice(0, 3).toLowerCase() === "ap_";

const utf8Bytes = (s: string) => Buffer.byteLength(s, "utf8");
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const Value = v.pipe(
  v.string("must be a string"),
  v.check((s) => !LONE_SURROGATE.test(s), "must be valid Unicode text"),
  v.check(
    (s) => utf8Bytes(s) >= 1 && utf8Bytes(s) <= useConfig().limits.maxSecretBytes,
    () => `must be 1 to ${useConfig().limits.maxSecretBytes} bytes of UTF-8`,
  ),
  // A character is at least one byte, so the byte limit bounds the length too.
  configured(({ limits }) => ({
    minLength: 1,
    maxLength: limits.maxSecretBytes,
    description: `1 to ${limits.maxSecretBytes} bytes of UTF-8 (valid Unicode text). Stored only envelope-encrypted; never logged or returned.`,
  })),
);

const WorkflowId = Ulid;

/** Missing required members say "is required"; a body that is not an object cannot reach here from HTTP. */
const objectMessage = (issue: v.BaseIssue<unknown>) => (issue.expected === "Object" ? "must be an object" : "is required");

/**
 * Body of PUT /secrets/{name}. `orgId` is listed only to be rejected with SECRET_SCOPE_UNSUPPORTED. Unknown
 * members are reported by the domain beside the members' own errors (a strict object would report them twice).
 */
export const PutBody = component(
  "SecretPutRequest",
  v.pipe(
    v.object(
      {
        value: Value,
        workflowId: v.optional(
          described(
            WorkflowId,
            "ULID (any letter case). Given: workflow scope, and the workflow must be the caller's (404 `WORKFLOW_NOT_FOUND`). Absent: user scope.",
          ),
        ),
        orgId: v.optional(
          v.pipe(
            v.unknown(),
            v.description("Not supported: any non-null value → 400 `SECRET_SCOPE_UNSUPPORTED`."),
            v.metadata({ type: "null" }), // documents the one value accepted (the domain checks, after the other members)
          ),
        ),
      },
      objectMessage,
    ),
    v.description("The secret's value and scope. A secret is identified by (owner, name, workflowId or none)."),
  ),
);

const orgId = v.optional(v.pipe(v.string(), v.description("Not supported: any value → 400 `SECRET_SCOPE_UNSUPPORTED`.")));

/** Query of GET /secrets besides the paging parameters. */
export const ListQuery = v.object({
  workflowId: v.optional(
    described(
      WorkflowId,
      "ULID (any letter case). Only that workflow's secrets; the workflow must be the caller's, else 404 `WORKFLOW_NOT_FOUND`. Absent: all of the caller's secrets, both scopes.",
    ),
  ),
  orgId,
});

/** Query of DELETE /secrets/{name}. */
export const RemoveQuery = v.object({
  workflowId: v.optional(
    described(
      WorkflowId,
      "ULID (any letter case). Given: deletes that workflow-scoped secret (a foreign `workflowId` deletes nothing). Absent: deletes the user-scoped secret of that name only. Malformed → 400 `VALIDATION_FAILED`.",
    ),
  ),
  orgId,
});

/** A list element (API.md §12.1); the value is never part of it. */
export const Info = component(
  "SecretMetadata",
  v.pipe(
    v.object({
      name: v.pipe(v.string(), v.regex(NAME_PATTERN)),
      scope: v.picklist(["user", "workflow"]),
      workflowId: v.optional(described(Ulid, "Present exactly when `scope` is `workflow`.")),
      createdAt: TimeMs,
      updatedAt: described(TimeMs, "Last put; equals `createdAt` until replaced."),
    }),
    v.description("A secret's metadata; the value is never returned by any endpoint."),
  ),
);
export type Info = v.InferOutput<typeof Info>;

export const InfoPage = page("SecretMetadataPage", Info);
