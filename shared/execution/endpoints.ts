/**
 * The executions routes (API.md §10) as declarations. The per-workflow list (§10.5) is its own group: its path
 * lies under /workflows, which API Gateway sends to the workflows function, so that function mounts it.
 */
import * as v from "valibot";
import { asInteger, asSchema, component, described, endpoint, group, parameter } from "../http/endpoint";
import { UlidString } from "../http/validate";
import { PageQuery } from "../http/paging";
import { IdempotencyHeaders, listOf } from "../http/schemas";
import { Execution, ExecutionPage, Stats, Status, StatusSummary } from "./schemas";

const LIST_RULES = "Repeated keys, comma-separated values or both; empty items are ignored, duplicates merged, at most 50 values.";

const WorkflowIds = parameter(
  "ExecutionWorkflowIds",
  v.optional(
    listOf(
      UlidString,
      `Only executions of these workflows (ULIDs, any letter case); ids that are not the caller's match nothing. A value that is not a ULID → 400. ${LIST_RULES}`,
    ),
    [],
  ),
);
const Statuses = parameter(
  "ExecutionStatuses",
  v.optional(
    listOf(
      Status,
      `Only executions with one of these statuses: \`pending\`, \`success\`, \`failed\`, \`error\`, \`waiting\`. ${LIST_RULES}`,
    ),
    [],
  ),
);

const RequiredWorkflowId = parameter(
  "ExecutionWorkflowId",
  described(UlidString, "The execution's workflow (ULID, required); missing or not a ULID → 400."),
);

const ExecutionIdParams = v.object({
  id: parameter(
    "ExecutionId",
    v.pipe(v.string(), v.description("Execution id (ULID, any letter case). Malformed or unknown → 404 `EXECUTION_NOT_FOUND`.")),
  ),
});

const timeMs = (description: string) =>
  v.optional(
    v.pipe(
      v.string(),
      v.regex(/^\d{1,16}$/, "must be a time in milliseconds (decimal digits)"),
      v.transform(Number),
      v.maxValue(Number.MAX_SAFE_INTEGER, "must be at most 2^53 - 1"),
      asInteger(0, Number.MAX_SAFE_INTEGER),
      v.description(description),
    ),
  );

/**
 * What the interval pipe accepts, as one pattern: 100 to 5000 ms written as at most 7 digits (optionally with
 * `ms`), or as seconds with at most 4 integer digits and 3 decimals (rounded to whole ms).
 */
const INTERVAL_PATTERN =
  /^(?:(?:0{0,4}[1-9]\d{2}|0{0,3}[1-4]\d{3}|0{0,3}5000)(?:ms)?|(?:0{1,4}\.[1-9]\d{0,2}|0{0,3}[1-4](?:\.\d{1,3})?|0{0,3}5(?:\.0{1,3})?)s)$/;

/** The stream's poll period: milliseconds as an integer, or `250ms` / `1s` / `1.5s`; 100 to 5000. */
export const Interval = parameter(
  "StreamInterval",
  v.optional(
    v.pipe(
      v.string(),
      v.regex(/^(\d{1,7}(ms)?|\d{1,4}(\.\d{1,3})?s)$/, "must be milliseconds (`250`, `250ms`) or seconds (`1s`, `1.5s`)"),
      v.transform((s) =>
        s.endsWith("ms") ? Number(s.slice(0, -2)) : s.endsWith("s") ? Math.round(Number(s.slice(0, -1)) * 1000) : Number(s),
      ),
      v.minValue(100, "must be at least 100 ms"),
      v.maxValue(5000, "must be at most 5000 ms"),
      asSchema({
        anyOf: [
          { type: "integer", minimum: 100, maximum: 5000 },
          { type: "string", pattern: INTERVAL_PATTERN.source },
        ],
      }),
      v.description(
        "Server poll period: an integer in ms, or a duration string `250ms`/`1s`/`1.5s`; 100 to 5000 ms (default 250), else 400.",
      ),
    ),
    "250",
  ),
);

export const list = endpoint({
  method: "GET",
  path: "/executions",
  operationId: "listExecutions",
  summary: "List executions",
  description: ({ limits }) =>
    `One page of the caller's executions, newest first (descending id, i.e. claim time). Executions of deleted workflows stay listed under their \`workflowId\`. Each element is bounded as \`GET /executions/{id}\` is (${limits.maxExecutionRecordBytes} bytes); a page is at most ${limits.maxListPageBytes} bytes and ends early after the last whole execution that fits, with \`hasNextPage\` true.`,
  query: v.object({ workflowId: WorkflowIds, status: Statuses, ...PageQuery }),
  responses: { 200: { description: "A page of executions.", body: ExecutionPage } },
  errors: { 400: ["VALIDATION_FAILED", "INVALID_CURSOR"] },
});

export const count = endpoint({
  method: "GET",
  path: "/executions:count",
  operationId: "countExecutions",
  summary: "Count executions",
  description: "The number of the caller's executions matching `workflowId` and `status`, as in the list.",
  query: v.object({ workflowId: WorkflowIds, status: Statuses }),
  responses: { 200: { description: "The count.", body: v.object({ total: v.pipe(v.number(), v.integer()) }) } },
  errors: { 400: ["VALIDATION_FAILED"] },
});

export const stats = endpoint({
  method: "GET",
  path: "/executions:stats",
  operationId: "getExecutionStats",
  summary: "Execution statistics",
  description:
    "Counts by outcome and the mean duration of the caller's executions whose `startAt` is in [`since`, `until`). `since` after `until` → 400.",
  query: v.object({
    workflowId: WorkflowIds,
    since: parameter("StatsSince", timeMs("Window start (TimeMs), inclusive; default now − 7 days.")),
    until: parameter("StatsUntil", timeMs("Window end (TimeMs), exclusive; default now.")),
  }),
  responses: { 200: { description: "The statistics.", body: Stats } },
  errors: { 400: ["VALIDATION_FAILED"] },
});

export const retrieve = endpoint({
  method: "GET",
  path: "/executions/{id}",
  operationId: "getExecution",
  summary: "Retrieve an execution",
  description: ({ limits }) =>
    `The execution with every recorded step. A pending execution shows the steps finished so far. The answer is at most ${limits.maxExecutionRecordBytes} bytes serialized: when its steps would pass that, the largest recorded outputs are replaced with \`{data: null, truncated: true, originalSize}\` until it fits.`,
  params: ExecutionIdParams,
  query: v.object({ workflowId: RequiredWorkflowId }),
  responses: { 200: { description: "The execution.", body: Execution } },
  errors: { 400: ["VALIDATION_FAILED"], 404: ["EXECUTION_NOT_FOUND"] },
});

export const getStatus = endpoint({
  method: "GET",
  path: "/executions/{id}:getStatus",
  operationId: "getExecutionStatus",
  summary: "An execution's status",
  description: "The status summary of the execution (no steps).",
  params: ExecutionIdParams,
  query: v.object({ workflowId: RequiredWorkflowId }),
  responses: { 200: { description: "The status summary.", body: StatusSummary } },
  errors: { 400: ["VALIDATION_FAILED"], 404: ["EXECUTION_NOT_FOUND"] },
});

/**
 * One event of the status stream. The schema of a `text/event-stream` response describes one event, field by
 * field, as SSE-aware client generators read it; the `: keep-alive` comments between events are no event.
 */
const StatusEvent = component(
  "ExecutionStatusEvent",
  v.pipe(
    v.object({
      id: described(
        v.pipe(v.string(), v.regex(/^[1-9][0-9]*$/)),
        "The `id:` field: the frame's number on this connection, from 1 (`Last-Event-ID` is accepted and ignored).",
      ),
      event: described(v.literal("status"), "The `event:` field: always `status`."),
      data: described(StatusSummary, "The `data:` field: the execution's status summary, as one line of JSON."),
    }),
    v.description(
      'One server-sent event: `id: 1\\nevent: status\\ndata: {"id":…,"status":"pending",…}\\n\\n`. Between events the server sends `: keep-alive\\n\\n` comments.',
    ),
  ),
);

export const stream = endpoint({
  method: "GET",
  path: "/executions/{id}:stream",
  operationId: "streamExecutionStatus",
  summary: "Stream an execution's status (server-sent events)",
  description: ({ limits }) =>
    `Before any byte is sent every failure is an ordinary problem response. Then 200 \`text/event-stream\`: frames \`id: <n>\` / \`event: status\` / \`data: <ExecutionStatusSummary JSON>\` and a blank line; \`n\` counts frames on this connection from 1 (\`Last-Event-ID\` is accepted and ignored). The first frame carries the current status, then one frame per status change. A \`: keep-alive\` comment follows every ${limits.streamKeepaliveMs} ms without a frame. A \`waiting\` execution (API.md §17.1) keeps the stream open: its frames carry \`waitingFor\`, and the return to \`pending\` is a frame too. The stream closes right after a terminal status (so a terminal execution yields exactly one frame), after ${limits.streamMaxMs} ms (reconnect), or when the execution becomes unreadable; errors after the start are not reported in-band. An open stream counts once against the rate limit.`,
  params: ExecutionIdParams,
  query: v.object({ workflowId: RequiredWorkflowId, interval: Interval }),
  responses: {
    200: {
      description: "The status stream.",
      media: "text/event-stream",
      body: StatusEvent,
      headers: {
        "Cache-Control": v.pipe(v.literal("no-cache"), v.description("`no-cache` on the stream.")),
        Connection: v.pipe(v.literal("keep-alive"), v.description("`keep-alive`.")),
        "X-Accel-Buffering": v.pipe(v.literal("no"), v.description("`no`: proxies must not buffer the stream.")),
      },
    },
  },
  errors: { 400: ["VALIDATION_FAILED"], 404: ["EXECUTION_NOT_FOUND"], 429: ["TOO_MANY_STREAMS"] },
  notes: {
    429: ({ limits }) =>
      `\`TOO_MANY_STREAMS\` when the caller already has ${limits.maxOpenStreamsPerOwner} streams open (across every server instance); checked after the execution is found. A stream closed by either side frees its slot at once, one whose connection vanished within 60 s.`,
  },
});

/** `POST /executions/{id}:signal` body (§17.1.4). */
const SignalBody = v.strictObject({
  decision: described(v.picklist(["approve", "reject"], "must be approve or reject"), "`approve` or `reject`."),
  payload: v.optional(described(v.unknown(), "Any JSON, at most 64 KiB serialized; `{{<awaitName>.data.payload}}` downstream.")),
  nodeId: v.optional(described(v.string(), "The await node to signal; required when more than one signal wait is open.")),
});

export const signal = endpoint({
  method: "POST",
  path: "/executions/{id}:signal",
  operationId: "signalExecution",
  summary: "Approve or reject an open signal wait",
  description: ({ limits }) =>
    `Ends an open \`signal\` wait of an \`await\` node (API.md §17.1): \`approve\` (the await step succeeds, its descendants run) or \`reject\` (the step fails \`REJECTED\`, its descendants are skipped). Allowed to the workflow's owner and to the addresses listed in that node's \`approvers\`, each with its own token; anyone else gets 404. Order of checks: body and query (400), lookup and caller (404), \`nodeId\` missing while several signal waits are open (400), no such open signal wait (409 \`EXECUTION_NOT_WAITING\`; a refused signal changes nothing). Concurrent signals and a signal at the deadline record one outcome. The answer waits at most ${limits.blockingTriggerWaitMs} ms for the run to reach its next terminal or \`waiting\` status: the Execution for the owner, the ExecutionStatusSummary for an approver. The same decision and payload again from the caller who ended the wait answers 200 without change.`,
  idempotent: true,
  params: ExecutionIdParams,
  query: v.object({ workflowId: RequiredWorkflowId }),
  headers: IdempotencyHeaders,
  body: SignalBody,
  responses: {
    200: {
      description: "The execution after the run went on (owner), or its status summary (an approver).",
      body: v.union([Execution, StatusSummary]),
    },
  },
  errors: { 400: ["VALIDATION_FAILED"], 404: ["EXECUTION_NOT_FOUND"], 409: ["EXECUTION_NOT_WAITING"] },
});

export const executionContract = group({
  name: "Executions",
  description: "Read-only records of workflow runs, their steps and fees, and the live status stream.",
  codes: {
    EXECUTION_NOT_FOUND: {
      meaning:
        "Execution unknown, not in the given workflow, or another owner's (retrieve, getStatus, stream); for a signal, also a caller who is neither the owner nor an approver of the await node.",
    },
    EXECUTION_NOT_WAITING: {
      meaning: "The execution has no open signal wait for that node (ended, past its deadline, a chainEvent wait, or unknown).",
    },
    TOO_MANY_STREAMS: {
      meaning:
        "The caller's open streams are at `max_open_streams_per_owner`; `limit` is the cap. A quota, not a rate limit: no `Retry-After`. A stream closed by either side frees its slot at once.",
      example: ({ limits }) => ({ limit: limits.maxOpenStreamsPerOwner }),
    },
  },
  endpoints: [list, count, stats, retrieve, getStatus, stream, signal],
});

export const listForWorkflow = endpoint({
  method: "GET",
  path: "/workflows/{workflow_id}/executions",
  operationId: "listWorkflowExecutions",
  summary: "List a workflow's executions",
  description:
    "Same as `GET /executions?workflowId={workflow_id}`, newest first. An unknown, malformed or another owner's id gives an empty page; a deleted workflow's executions stay listed. Pages are bounded as in `GET /executions`.",
  params: v.object({
    workflow_id: parameter(
      "ExecutionsWorkflowId",
      v.pipe(v.string(), v.description("Workflow id (ULID, any letter case). Unknown, malformed or foreign → an empty page.")),
    ),
  }),
  query: v.object({ status: Statuses, ...PageQuery }),
  responses: { 200: { description: "A page of the workflow's executions.", body: ExecutionPage } },
  errors: { 400: ["VALIDATION_FAILED", "INVALID_CURSOR"] },
});

export const workflowExecutionsContract = group({
  name: "Workflow executions",
  description: "A workflow's executions, served by the workflows function (its path lies under /workflows).",
  endpoints: [listForWorkflow],
});
