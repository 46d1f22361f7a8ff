/**
 * The workflow routes of API.md §8.8.1-§8.8.6 as declarations: shapes, documentation and codes; routes.ts binds
 * the handlers. The create body is validated by the domain (validateDefinition with the deployment's limits, in
 * the order of §8.7); the schemas here (built with the default limits) document it.
 */
import * as v from "valibot";
import { component, described, endpoint, group, parameter } from "../http/endpoint";
import { PageQuery, page } from "../http/paging";
import { AddressString } from "../http/address-schemas";
import { listOf } from "../http/schemas";
import { WORKFLOW_STATUSES, workflowSchemas } from "./schemas";

const S = workflowSchemas();

// Named components of the OpenAPI document (registered when this module loads, in this order).
/** @public */
export const Trigger = component("Trigger", S.Trigger);
/** @public */
export const Node = component("Node", S.Node);
/** @public */
export const Edge = component("Edge", S.Edge);
const Workflow = component("Workflow", S.Workflow);
const WorkflowPage = page("WorkflowPage", Workflow);
const CreateBody = component("WorkflowCreateRequest", S.CreateBody);
const WorkflowCount = component(
  "WorkflowCount",
  v.object({
    total: described(v.pipe(v.number(), v.integer(), v.minValue(0)), "The number of the caller's workflows matching the filters."),
  }),
);

const LIST_RULES = "Repeated keys, comma-separated values, or both; empty items are ignored, duplicates merged, at most 50 values.";

const LIST_STATUSES = [...WORKFLOW_STATUSES, "running"] as const;

const SmartWalletFilter = parameter(
  "WorkflowWalletFilter",
  v.optional(
    listOf(
      AddressString,
      `Only workflows of these wallets (addresses in any accepted case). None: all of the caller's workflows. Addresses that are not the caller's match nothing. ${LIST_RULES}`,
    ),
    [],
  ),
);
const StatusFilter = parameter(
  "WorkflowStatusFilter",
  v.optional(
    listOf(
      v.picklist(LIST_STATUSES, `must be one of ${LIST_STATUSES.join(", ")}`),
      `Effective statuses to include (an expired workflow is \`completed\`); \`running\` is reserved and matches nothing. Any other value → 400 \`VALIDATION_FAILED\`. ${LIST_RULES}`,
    ),
    [],
  ),
);

const ListQuery = v.object({ smartWalletAddress: SmartWalletFilter, status: StatusFilter, ...PageQuery });
const CountQuery = v.object({ smartWalletAddress: SmartWalletFilter, status: StatusFilter });

const IdParams = v.object({
  id: parameter(
    "WorkflowIdPath",
    v.pipe(
      v.string(),
      v.description("Workflow id (ULID, any letter case). Malformed, unknown, deleted or another owner's → 404 `WORKFLOW_NOT_FOUND`."),
    ),
  ),
});
const CancelParams = v.object({
  id: parameter(
    "WorkflowCancelId",
    v.pipe(v.string(), v.description("Workflow id. Any value is accepted: unknown, malformed or another owner's ids answer 204 too.")),
  ),
});

export const create = endpoint({
  method: "POST",
  path: "/workflows",
  operationId: "createWorkflow",
  summary: "Create a workflow",
  description: ({ limits }) =>
    `Validates the definition (API.md §8.7, in this order: field shapes and rules across fields, all reported together as 400 \`VALIDATION_FAILED\`; configured chains, 400 \`UNSUPPORTED_CHAIN\`; graph rules, 400 \`WORKFLOW_GRAPH_INVALID\`; frequency floors, 400 \`TRIGGER_TOO_FREQUENT\`; the stored document at most ${limits.maxWorkflowBytes} bytes of canonical JSON, 413 \`PAYLOAD_TOO_LARGE\`; \`smartWalletAddress\` registered by the caller on any chain, 400 \`WALLET_NOT_OWNED\`; fewer than ${limits.maxActiveWorkflowsPerOwner} active workflows, 429 \`WORKFLOWS_LIMIT_REACHED\`), then stores it \`enabled\`. The answer carries defaults materialised, the trigger id, generated chain edges when \`edges\` was omitted or empty, and \`inputVariables.settings.runner\`/\`chainId\`.`,
  body: CreateBody,
  checkedByDomain: ["body"],
  responses: {
    201: {
      description: "Created: the Workflow (status `enabled`).",
      body: Workflow,
      headers: { Location: v.pipe(v.string(), v.description("`/workflows/{id}` of the new workflow.")) },
    },
  },
  errors: {
    400: ["VALIDATION_FAILED", "UNSUPPORTED_CHAIN", "WORKFLOW_GRAPH_INVALID", "TRIGGER_TOO_FREQUENT", "WALLET_NOT_OWNED"],
    429: ["WORKFLOWS_LIMIT_REACHED"],
  },
  notes: {
    429: ({ limits }) =>
      `\`WORKFLOWS_LIMIT_REACHED\` when the caller already has ${limits.maxActiveWorkflowsPerOwner} active (enabled, unexpired) workflows; \`limit\` is the cap. Nothing is written.`,
  },
});

export const list = endpoint({
  method: "GET",
  path: "/workflows",
  operationId: "listWorkflows",
  summary: "List workflows",
  description: "One page of the caller's workflows, newest first, filtered by wallet and by effective status.",
  query: ListQuery,
  responses: { 200: { description: "A page of workflows.", body: WorkflowPage } },
  errors: { 400: ["VALIDATION_FAILED", "INVALID_CURSOR"] },
});

export const count = endpoint({
  method: "GET",
  path: "/workflows:count",
  operationId: "countWorkflows",
  summary: "Count workflows",
  description: "The number of the caller's workflows matching the same filters as the list (no paging).",
  query: CountQuery,
  responses: { 200: { description: "The count.", body: WorkflowCount } },
  errors: { 400: ["VALIDATION_FAILED"] },
});

export const retrieve = endpoint({
  method: "GET",
  path: "/workflows/{id}",
  operationId: "getWorkflow",
  summary: "Retrieve a workflow",
  description: "The caller's workflow, with its effective status (an expired one reads `completed`, `EXPIRED`).",
  params: IdParams,
  responses: { 200: { description: "The workflow.", body: Workflow } },
  errors: { 404: ["WORKFLOW_NOT_FOUND"] },
});

export const cancel = endpoint({
  method: "DELETE",
  path: "/workflows/{id}",
  operationId: "cancelWorkflow",
  summary: "Cancel (delete) a workflow",
  description:
    "Removes the caller's workflow at once: later reads answer 404 and lists no longer include it; its schedules and watchers stop; its workflow-scoped secrets are deleted; an execution in flight ends `error` (\"workflow was deleted\"); its executions stay readable. 204 in every case, including unknown, malformed, already deleted and other owners' ids (those are left untouched).",
  params: CancelParams,
  responses: { 204: { description: "Removed, or nothing to remove (no body)." } },
});

export const pause = endpoint({
  method: "POST",
  path: "/workflows/{id}:pause",
  operationId: "pauseWorkflow",
  summary: "Pause a workflow",
  description: "`enabled` → `disabled` (automatic fires stop; manual triggers answer 412). Idempotent. No body is read.",
  params: IdParams,
  responses: { 200: { description: "The workflow after the operation.", body: Workflow } },
  errors: { 404: ["WORKFLOW_NOT_FOUND"], 409: ["WORKFLOW_TERMINAL"] },
});

export const resume = endpoint({
  method: "POST",
  path: "/workflows/{id}:resume",
  operationId: "resumeWorkflow",
  summary: "Resume a workflow",
  description:
    "`disabled` → `enabled`, subject to the active-workflow cap; fires missed while disabled are not replayed. An enabled workflow answers 200 unchanged (no quota check). No body is read.",
  params: IdParams,
  responses: { 200: { description: "The workflow after the operation.", body: Workflow } },
  errors: { 404: ["WORKFLOW_NOT_FOUND"], 409: ["WORKFLOW_TERMINAL"], 429: ["WORKFLOWS_LIMIT_REACHED"] },
  notes: {
    429: ({ limits }) =>
      `\`WORKFLOWS_LIMIT_REACHED\` when resuming would give the caller more than ${limits.maxActiveWorkflowsPerOwner} active workflows.`,
  },
});

export const workflowContract = group({
  name: "Workflows",
  description: "Workflows: create, list, count, retrieve, pause, resume and cancel.",
  codes: {
    WORKFLOW_GRAPH_INVALID: {
      meaning:
        "Edges naming unknown ids, plain edge out of a branch, duplicate edge, cycle (named), unreachable node, template naming a non-ancestor node, branch without explicit edges.",
      fields: true,
    },
    TRIGGER_TOO_FREQUENT: { meaning: "Cron fires closer together than the floor, or a block period under the floor.", fields: true },
    WALLET_NOT_OWNED: { meaning: "`smartWalletAddress` is not a wallet the caller registered (on any chain).", fields: true },
    WORKFLOW_NOT_FOUND: { meaning: "Workflow unknown, malformed id, deleted, or another owner's." },
    WORKFLOW_TERMINAL: { meaning: "Pause or resume on a `completed` or `failed` workflow (effective status)." },
    PAYLOAD_TOO_LARGE: { meaning: "Request body over the body limit, or the stored workflow document over `max_workflow_bytes`." },
    WORKFLOWS_LIMIT_REACHED: {
      meaning: "Active-workflow cap reached on create or resume; `limit` is the cap. Not a rate limit: no `Retry-After`.",
      example: ({ limits }) => ({ limit: limits.maxActiveWorkflowsPerOwner }),
    },
  },
  endpoints: [create, list, count, retrieve, cancel, pause, resume],
});
