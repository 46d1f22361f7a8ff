/**
 * Lists of the caller's executions (GET /executions, its count and stats), each page bounded to
 * `max_list_page_bytes` (API.md §18.2); execution.ts describes the storage.
 */
import { encodeTime } from "ulid";
import { useOwner } from "../context";
import {
  executionPage,
  firstExecutionOwner,
  readExecutions,
  startedWithin,
  withStatus,
  type ExecutionSource,
} from "../store/entities/execution";
import { PageBudget } from "../http/paging";
import { assemble, readSteps, type Assembled } from "./execution-read";
import { lower, storedExecution, type Item, type StoredExecution } from "./execution-stored";
import type { Execution, Stats } from "./schemas";
import { useRuntime } from "../current-runtime";
import type { ExecutionStatus } from "../engine/schemas";

/** ULIDs are generated at claim time; the stats window reads ids this much wider than the `startAt` it filters. */
const ID_CLOCK_MARGIN_MS = 5 * 60_000;

export interface Filter {
  workflowIds: string[];
  statuses: ExecutionStatus[];
}

/**
 * GET /executions and GET /workflows/{id}/executions: one page of the caller's executions, newest first. Each
 * is bounded as a single answer is; the page ends after the last whole execution that fits the list page limit
 * (API.md §18.2), so the records of executions it does not answer are never read (`assembleWithin`).
 */
export async function list(filter: Filter, page: { limit: number; after?: string; before?: string }) {
  const source = await sourceFor(useOwner(), filter.workflowIds);
  if (!source) return { items: [] as Item[], hasNextPage: false, hasPreviousPage: false };
  const result = await executionPage(source, withStatus(filter.statuses), page);
  const stored = result.items.map(storedExecution);
  // A `before` page keeps the executions nearest its cursor: it is assembled from its end.
  const walk = result.backward ? [...stored].reverse() : stored;
  const kept = await assembleWithin(walk, new PageBudget());
  const items = result.backward ? kept.reverse() : kept;
  const cut = items.length < stored.length;
  return {
    items,
    hasNextPage: result.hasNextPage || (cut && !result.backward),
    hasPreviousPage: result.hasPreviousPage || (cut && result.backward === true),
    backward: result.backward,
  };
}

/** Executions assembled in parallel at most this many at a time (each 1 Query, +1 BatchGetItem when large). */
const LIST_PARALLEL = 16;
/** What an execution adds to its recorded steps in an answer, at most (fees, costs, the inline trigger step). */
const RECORD_OVERHEAD_BYTES = 16_384;

/**
 * Assembles `walk` in order while the page has room: the longest run that fits `budget`. Reads run ahead in
 * parallel only as far as the executions' recorded sizes (`stepBytes`, an upper bound of what each can add)
 * say the page may still take them, so a page of large records reads one record past its end at most, and a
 * page of small ones reads them all at once. Records written before `stepBytes` count as full-size when they
 * recorded steps.
 */
async function assembleWithin(walk: StoredExecution[], budget: PageBudget): Promise<Execution[]> {
  const maxRecord = useRuntime().config.limits.maxExecutionRecordBytes;
  const estimate = (item: StoredExecution) =>
    Math.min(maxRecord, RECORD_OVERHEAD_BYTES + (item.stepBytes ?? (item.stepIds?.size ? maxRecord : 0)));
  const running: { promise: Promise<Assembled>; estimate: number }[] = [];
  const kept: Execution[] = [];
  let next = 0;
  let ahead = 0;
  while (kept.length < walk.length) {
    while (
      next < walk.length &&
      running.length < LIST_PARALLEL &&
      (running.length === 0 || ahead + estimate(walk[next]!) <= budget.remaining)
    ) {
      const item = walk[next++]!;
      const promise = (async () => assemble(item, item.stepIds?.size ? await readSteps(item.id) : []))();
      // A read started ahead of a cut is never awaited: its failure must not surface as an unhandled rejection.
      promise.catch(() => undefined);
      running.push({ promise, estimate: estimate(item) });
      ahead += estimate(item);
    }
    const head = running.shift()!;
    ahead -= head.estimate;
    const done = await head.promise;
    if (!budget.take(done.bytes)) break;
    kept.push(done.execution);
  }
  return kept;
}

/** GET /executions:count. */
export async function count(filter: Filter): Promise<number> {
  const source = await sourceFor(useOwner(), filter.workflowIds);
  if (!source) return 0;
  let total = 0;
  await readExecutions(source, { filter: withStatus(filter.statuses), count: true }, (n) => (total += n));
  return total;
}

/** GET /executions:stats: executions whose startAt is in [since, until). */
export async function stats(workflowIds: string[], since: number, until: number): Promise<Stats> {
  const result: Stats = { total: 0, succeeded: 0, failed: 0, pending: 0, waiting: 0 };
  const source = await sourceFor(useOwner(), workflowIds);
  if (!source) return result;
  const idBound = (ms: number) => encodeTime(Math.min(Math.max(ms, 0), 2 ** 48 - 1), 10);
  let terminal = 0;
  let duration = 0;
  await readExecutions(
    source,
    {
      range: [idBound(since - ID_CLOCK_MARGIN_MS), `${idBound(until + ID_CLOCK_MARGIN_MS)}\uffff`],
      filter: startedWithin(since, until),
      attributes: ["status", "startAt", "endAt"],
    },
    (_n, items) => {
      for (const item of items as Pick<StoredExecution, "status" | "startAt" | "endAt">[]) {
        result.total += 1;
        if (item.status === "pending") result.pending += 1;
        else if (item.status === "waiting") result.waiting += 1;
        else {
          if (item.status === "success") result.succeeded += 1;
          else result.failed += 1;
          terminal += 1;
          duration += (item.endAt ?? item.startAt) - item.startAt;
        }
      }
    },
  );
  if (terminal > 0) result.avgExecutionTime = Math.round(duration / terminal);
  return result;
}

// ---------------------------------------------------------------------------------------------------------
// Where a list reads from

/**
 * One workflow: its own partition (pattern 13), after one probe of its first item's owner: every execution of
 * a workflow has the workflow's owner, and a foreign partition must not be read through a filter. Several or
 * none: the owner's executions (pattern 14), filtered by workflow. Undefined: nothing can match.
 */
async function sourceFor(owner: string, workflowIds: string[]): Promise<ExecutionSource | undefined> {
  const ids = [...new Set(workflowIds)];
  if (ids.length === 1) {
    const first = await firstExecutionOwner(ids[0]!);
    if (!first || lower(first) !== lower(owner)) return undefined;
    return { workflowId: ids[0]! };
  }
  return ids.length === 0 ? { owner } : { owner, workflowIds: ids };
}
