/** HTTP routes of the executions API (API.md §10): endpoints.ts declares them; the domain reads the records. */
import { clientSignal, route, type Route } from "../http/app";
import { decodePage, pageEnvelope } from "../http/paging";
import { ClientGone, validationFailed } from "../errors";
import { useOwner } from "../context";
import * as Contract from "./endpoints";
import { STREAM_HEADERS, statusStream } from "./stream";
import * as StreamSlots from "./stream-slots";
import { admitStreamOpen } from "./stream-admission";
import { signal } from "./signal";
import { useRuntime } from "../current-runtime";
import { statusOf, retrieve } from "./execution-read";
import { list, count, stats } from "./execution-list";

const WEEK_MS = 7 * 24 * 3600_000;
/** Cursors are bound to the list that issued them (API.md §3); a position is an execution id. */
const LIST = "executions";
const workflowList = (workflowId: string) => `executions:${workflowId}`;

const position = (item: Record<string, unknown>) => String(item.id);

/** GET /executions/{id}:stream alone: the streaming Function URL's app (functions/stream.ts). */
export const executionStreamRoutes: Route[] = [
  route(Contract.stream, async (c, { params, query }) => {
    const owner = useOwner();
    // The client's connection: an open it abandons leaves the owner's queue, or frees the slot it just took.
    const gone = clientSignal(c);
    const head = c.req.method === "HEAD";
    const opened = await admitStreamOpen(
      owner,
      async () => {
        // Every failure (404 included) is answered before the first byte: the status is read here, not in the body.
        const first = await statusOf(query.workflowId, params.id);
        // Then the quota (API.md §1.6 step 9, §17.5): 429 TOO_MANY_STREAMS. HEAD opens no stream, so takes no slot.
        if (!head) return { first, lease: await StreamSlots.acquireStreamSlot(owner) };
        await StreamSlots.checkStreamSlot(owner);
        return { first, lease: undefined };
      },
      gone,
    ).catch((err: unknown) => {
      throw gone.aborted ? new ClientGone("the stream was abandoned before its answer") : err;
    });
    if (gone.aborted) {
      await opened.lease?.release();
      throw new ClientGone("the stream was abandoned before its answer");
    }
    if (!opened.lease) return new Response(null, { status: 200, headers: new Headers(STREAM_HEADERS) });
    const { limits } = useRuntime().config;
    const options = { intervalMs: query.interval, keepaliveMs: limits.streamKeepaliveMs, maxMs: limits.streamMaxMs };
    const body = statusStream(owner, opened.first, options, opened.lease, gone);
    return new Response(body, { status: 200, headers: new Headers(STREAM_HEADERS) });
  }),
];

export const executionRoutes: Route[] = [
  route(Contract.list, async (c, { query }) => {
    const page = decodePage(query, LIST, useOwner());
    const result = await list({ workflowIds: query.workflowId, statuses: query.status }, page);
    return c.json(pageEnvelope(result, (item) => item, position, LIST, useOwner()));
  }),
  route(Contract.count, async (c, { query }) => c.json({ total: await count({ workflowIds: query.workflowId, statuses: query.status }) })),
  route(Contract.stats, async (c, { query }) => {
    const until = query.until ?? useRuntime().now();
    const since = query.since ?? Math.max(0, until - WEEK_MS);
    if (since > until) throw validationFailed([{ path: "query.since", message: "must not be after until" }]);
    return c.json(await stats(query.workflowId, since, until));
  }),
  route(Contract.retrieve, async (c, { params, query }) => c.json(await retrieve(query.workflowId, params.id))),
  route(Contract.getStatus, async (c, { params, query }) => c.json(await statusOf(query.workflowId, params.id))),
  route(Contract.signal, async (c, { params, query, headers, body }) => {
    const answer = await signal(query.workflowId, params.id, body, headers["Idempotency-Key"]);
    if (answer.replayed) c.header("Idempotency-Replayed", "true");
    return c.json(answer.result, 200);
  }),
  ...executionStreamRoutes,
];

/** GET /workflows/{workflow_id}/executions, mounted by the workflows function. */
export const workflowExecutionRoutes: Route[] = [
  route(Contract.listForWorkflow, async (c, { params, query }) => {
    const workflowId = params.workflow_id.toUpperCase();
    const endpoint = workflowList(workflowId);
    const page = decodePage(query, endpoint, useOwner());
    const known = /^[0-9A-HJKMNP-TV-Z]{26}$/.test(workflowId);
    const result = known
      ? await list({ workflowIds: [workflowId], statuses: query.status }, page)
      : { items: [], hasNextPage: false, hasPreviousPage: false };
    return c.json(pageEnvelope(result, (item) => item, position, endpoint, useOwner()));
  }),
];
