/**
 * The secrets routes (API.md §12) as declarations. Their fields are checked by the domain (secret.ts), whose
 * order mixes codes (`path.name` → SECRET_NAME_RESERVED → body → `orgId`); the schemas here document them.
 */
import * as v from "valibot";
import { described, endpoint, group } from "../http/endpoint";
import { PageQuery } from "../http/paging";
import * as S from "./schemas";

const NameParams = v.object({
  name: described(
    S.Name,
    "`^[A-Za-z_][A-Za-z0-9_]{0,127}$`, else 400 `VALIDATION_FAILED`. Names starting with `ap_` in any letter case are reserved.",
  ),
});

export const list = endpoint({
  method: "GET",
  path: "/secrets",
  operationId: "listSecrets",
  summary: "List secret metadata",
  description:
    "One page of the caller's secret metadata, ordered by `name` ascending (byte order), then user scope before workflow scope, then `workflowId` ascending. Values are never returned. Field checks: `workflowId`, then `orgId`, then paging.",
  query: v.object({ ...S.ListQuery.entries, ...PageQuery }),
  checkedByDomain: ["query"],
  responses: { 200: { description: "A page of secret metadata.", body: S.InfoPage } },
  errors: { 400: ["VALIDATION_FAILED", "SECRET_SCOPE_UNSUPPORTED", "INVALID_CURSOR"], 404: ["WORKFLOW_NOT_FOUND"] },
});

export const put = endpoint({
  method: "PUT",
  path: "/secrets/{name}",
  operationId: "putSecret",
  summary: "Create or replace a secret",
  description:
    "Creates the caller's secret `name` (workflow-scoped when `workflowId` is given, else user-scoped) or replaces the value of the existing one with the same identity. No body in the response either way. Field checks: path `name` (400 `VALIDATION_FAILED`, then `SECRET_NAME_RESERVED`), then body members, then `orgId`.",
  params: NameParams,
  body: S.PutBody,
  checkedByDomain: ["params", "body"],
  responses: { 201: { description: "Created (no body)." }, 204: { description: "Replaced an existing secret (no body)." } },
  errors: {
    400: ["VALIDATION_FAILED", "SECRET_NAME_RESERVED", "SECRET_SCOPE_UNSUPPORTED"],
    404: ["WORKFLOW_NOT_FOUND"],
    429: ["SECRETS_LIMIT_REACHED"],
    503: ["UPSTREAM_UNAVAILABLE"],
  },
  notes: {
    429: ({ limits }) =>
      `\`SECRETS_LIMIT_REACHED\` when creating would exceed ${limits.maxSecretsPerOwner} secrets for the caller (all scopes).`,
    503: "The key service (KMS) is unreachable; nothing is written.",
  },
});

export const remove = endpoint({
  method: "DELETE",
  path: "/secrets/{name}",
  operationId: "deleteSecret",
  summary: "Delete a secret",
  description:
    "Deletes the caller's secret of that name: the workflow-scoped one when `workflowId` is given, else the user-scoped one only. 204 whether or not anything was deleted.",
  params: NameParams,
  query: S.RemoveQuery,
  checkedByDomain: ["params", "query"],
  responses: { 204: { description: "Deleted, or nothing to delete (no body)." } },
  errors: { 400: ["VALIDATION_FAILED", "SECRET_SCOPE_UNSUPPORTED"] },
});

export const secretContract = group({
  name: "Secrets",
  description: "Per-owner secret values, user- or workflow-scoped; values are write-only.",
  codes: {
    SECRET_NAME_RESERVED: { meaning: "Secret name starts with `ap_` (any letter case).", fields: true },
    SECRET_SCOPE_UNSUPPORTED: { meaning: "`orgId` given: organization-scoped secrets are not supported.", fields: true },
    WORKFLOW_NOT_FOUND: { meaning: "Workflow unknown, malformed id, deleted, or another owner's." },
    SECRETS_LIMIT_REACHED: {
      meaning:
        "Secret cap per owner reached on creating a new secret (replacing is always allowed); `limit` is the cap. Not a rate limit: no `Retry-After`.",
      example: ({ limits }) => ({ limit: limits.maxSecretsPerOwner }),
    },
  },
  endpoints: [list, put, remove],
});
