/**
 * Executions (API.md §10): the record a run writes while it goes, the owner's reads of it, and the sweeper.
 *
 * Storage (shared/store/README.md patterns 13-15):
 * - The execution item (`WF#<wf>#EXEC` / `<id>`, GSI1 by owner, GSI2 while pending) holds the status, fees, costs
 *   and, when its JSON is small, the trigger step. It stays a few KB, so a status read (the stream's poll, the
 *   runner's shouldStop) costs 1-2 read units whatever the run recorded.
 * - Every other step is its own item(s) under `EXEC#<id>`: the step's JSON in parts of at most PART_BYTES, so
 *   no step can hit DynamoDB's 400 KB item limit (a step may carry a 256 KiB output, a 64 KiB log and a config of
 *   up to the 350 KiB workflow document). Steps are keyed by step id, so recording one twice is harmless.
 *   An output above INLINE_OUTPUT_BYTES lies in items of its own beside the step (step items v 2), with its size
 *   on the step's first part: an answer plans which outputs it keeps (API.md §18.2, `max_execution_record_bytes`)
 *   before it reads any, and never reads those it replaces. Step items v 1 hold the whole step and still read.
 * - Answers are bounded (API.md §18.2): one Execution to `max_execution_record_bytes` serialized, its largest
 *   outputs replaced with `{data: null, truncated: true, originalSize}` until it fits; a list page to
 *   `max_list_page_bytes`, assembled item by item in the order it keeps them and ended after the last that fits,
 *   so a list never reads the records of items it does not answer.
 */
import { EventEmitter } from "node:events";
import { BatchGetCommand, GetCommand, type BatchGetCommandOutput, QueryCommand, TransactWriteCommand, UpdateCommand, type QueryCommandInput } from "@aws-sdk/lib-dynamodb";
import { encodeTime } from "ulid";
import { useRuntime } from "../runtime";
import { useOwner } from "../context";
import { notFound } from "../errors";
import { Keys } from "../store/keys";
import { Index, isConditionFailure } from "../store/table";
import { queryPage, queryPages } from "../store/query";
import { PageBudget } from "../http/paging";
import { log } from "../log";
import type { Cost, Execution, ExecutionStatus, Fee, Stats, StatusSummary, Step, ValueFee } from "./schemas";

type Item = Record<string, unknown>;
type Limits = ReturnType<typeof useRuntime>["config"]["limits"];

/** Trigger steps up to this size (JSON bytes) live in the execution item, written by the claim itself. */
const INLINE_TRIGGER_BYTES = 4_096;
/** Bytes of step JSON per step item: with keys and attribute names an item stays far below 400 KB. */
const PART_BYTES = 350_000;
/** Step outputs up to this size (JSON bytes) stay inside the step's items; larger ones get items of their own. */
const INLINE_OUTPUT_BYTES = 4_096;
/** ULIDs are generated at claim time; the stats window reads ids this much wider than the `startAt` it filters. */
const ID_CLOCK_MARGIN_MS = 5 * 60_000;
/**
 * Every execution id sorts after this: a ULID's first character is `0` until the year 3084. The paged query
 * needs a non-empty key prefix (DynamoDB refuses an empty string as a key value).
 */
const ULID_PREFIX = "0";
const TRUNCATED = "…[truncated]";

const table = () => useRuntime().config.tableName;
const lower = (address: string) => address.toLowerCase();

// ---------------------------------------------------------------------------------------------------------
// In-process notification: a status change reaches a stream in this process at once (others poll).

const changes = new EventEmitter();
changes.setMaxListeners(0);
const channel = (workflowId: string, id: string) => `${workflowId}/${id}`;

/** Calls `listener` whenever this process records a step or a status for the execution; returns the unsubscribe. */
export function onChange(workflowId: string, id: string, listener: () => void): () => void {
  changes.on(channel(workflowId, id), listener);
  return () => changes.off(channel(workflowId, id), listener);
}

/** How many listeners (open streams in this process) follow the execution. */
export const listenerCount = (workflowId: string, id: string) => changes.listenerCount(channel(workflowId, id));

// ---------------------------------------------------------------------------------------------------------
// Writing the record (the claim, the runner, the sweeper)

export interface PendingInput {
  workflowId: string;
  owner: string;
  chainId: number;
  id: string;
  index: number;
  startAt: number;
  executionFee: Fee;
  valueFee: ValueFee;
  triggerStep: Step;
}

/**
 * The DynamoDB item of a new `pending` execution, for the claim's TransactWriteItems (it is not written here).
 * The trigger step is inside when small; a large one is recorded by `recordStep` (the runner records every step
 * through its onStep, the trigger step first; a step recorded twice stays one step).
 */
export function pendingItem(input: PendingInput): Item {
  const trigger = JSON.stringify(boundStep(input.triggerStep, useRuntime().config.limits));
  return {
    ...Keys.execution(input.workflowId, input.id),
    ...Keys.executionByOwner(input.owner, input.id),
    ...Keys.pendingExecution(input.startAt, input.id),
    type: "execution",
    v: 1,
    id: input.id,
    workflowId: input.workflowId,
    owner: input.owner,
    chainId: input.chainId,
    index: input.index,
    startAt: input.startAt,
    status: "pending",
    executionFee: input.executionFee,
    valueFee: input.valueFee,
    cogs: {},
    triggerId: input.triggerStep.id,
    ...(Buffer.byteLength(trigger) <= INLINE_TRIGGER_BYTES ? { triggerStep: trigger } : {}),
  };
}

/**
 * Records a finished step (and the cost of its user operation) while the execution is pending; false when it is
 * not (finished, swept, unknown) and nothing was written. Outputs over `max_step_output_bytes` and logs or errors
 * over `max_step_log_bytes` are truncated as API.md §10.2 says. `position` (the node's index in `nodes`) orders
 * steps that started in the same millisecond.
 */
export async function recordStep(workflowId: string, id: string, step: Step, cost?: Cost, position?: number): Promise<boolean> {
  const { db, now, config } = useRuntime();
  const bounded = boundStep(step, config.limits);
  // A large output goes to items of its own; the step keeps `output: null` in its place (key order stays).
  const output = Buffer.from(JSON.stringify(bounded.output), "utf8");
  const inline = output.length <= INLINE_OUTPUT_BYTES;
  const json = JSON.stringify({ position, recordedAt: now(), step: inline ? bounded : { ...bounded, output: null } });
  const bytes = Buffer.from(json, "utf8");
  const parts = Math.max(1, Math.ceil(bytes.length / PART_BYTES));
  const outputParts = inline ? 0 : Math.ceil(output.length / PART_BYTES);
  const update = {
    TableName: table(),
    Key: Keys.execution(workflowId, id),
    ConditionExpression: "#status = :pending",
    // stepBytes (an upper bound: a step recorded twice counts twice) lets a list schedule its reads (`list`).
    UpdateExpression: `ADD stepIds :ids, stepBytes :bytes${cost ? " SET cogs.#node = :cost" : ""}`,
    ExpressionAttributeNames: { "#status": "status", ...(cost ? { "#node": cost.nodeId } : {}) },
    ExpressionAttributeValues: {
      ":pending": "pending",
      ":ids": new Set([step.id]),
      ":bytes": bytes.length + (inline ? 0 : output.length),
      ...(cost ? { ":cost": cost } : {}),
    },
  };
  const puts = Array.from({ length: parts }, (_, part) => ({
    Put: {
      TableName: table(),
      Item: {
        ...Keys.executionStep(id, step.id, part),
        type: "executionStep",
        v: 2,
        stepId: step.id,
        part,
        parts,
        outputBytes: output.length,
        outputParts,
        body: bytes.subarray(part * PART_BYTES, (part + 1) * PART_BYTES),
      },
    },
  }));
  const outputPuts = Array.from({ length: outputParts }, (_, part) => ({
    Put: {
      TableName: table(),
      Item: {
        ...Keys.executionStepOutput(id, step.id, part),
        type: "executionStepOutput",
        v: 2,
        stepId: step.id,
        part,
        parts: outputParts,
        body: output.subarray(part * PART_BYTES, (part + 1) * PART_BYTES),
      },
    },
  }));
  try {
    await db.send(new TransactWriteCommand({ TransactItems: [{ Update: update }, ...puts, ...outputPuts] }));
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
  changes.emit(channel(workflowId, id));
  return true;
}

export interface Outcome {
  status: Exclude<ExecutionStatus, "pending">;
  error?: string;
  endAt: number;
  /** The run's final costs (replace those recorded with steps). */
  cogs?: Cost[];
}

/** Ends a pending execution; false when it had already ended (another writer won) or does not exist. */
export async function finish(workflowId: string, id: string, outcome: Outcome): Promise<boolean> {
  const sets = ["#status = :status", "endAt = :endAt"];
  const values: Item = { ":status": outcome.status, ":endAt": outcome.endAt, ":pending": "pending" };
  if (outcome.error !== undefined) {
    sets.push("#error = :error");
    values[":error"] = outcome.error;
  }
  if (outcome.cogs) {
    sets.push("cogs = :cogs");
    values[":cogs"] = Object.fromEntries(outcome.cogs.map((c) => [c.nodeId, c]));
  }
  try {
    await useRuntime().db.send(
      new UpdateCommand({
        TableName: table(),
        Key: Keys.execution(workflowId, id),
        ConditionExpression: "#status = :pending",
        // The pending index is sparse: the sweeper never sees a finished execution again.
        UpdateExpression: `SET ${sets.join(", ")} REMOVE gsi2pk, gsi2sk`,
        ExpressionAttributeNames: { "#status": "status", ...(outcome.error !== undefined ? { "#error": "error" } : {}) },
        ExpressionAttributeValues: values,
      }),
    );
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
  changes.emit(channel(workflowId, id));
  return true;
}

/** For the runner's shouldStop: true once the execution is terminal (or gone), by a strongly consistent read. */
export async function isFinished(workflowId: string, id: string): Promise<boolean> {
  const found = await readSummary(workflowId, id);
  return !found || found.summary.status !== "pending";
}

/**
 * Ends every execution still pending `execution_timeout_ms` after its start with `error` "execution timed out"
 * (API.md §10.3). The run, if alive, starts no further node: its shouldStop sees the execution terminal.
 */
export async function sweep(now = useRuntime().now(), max = 100): Promise<{ checked: number; timedOut: { workflowId: string; id: string }[] }> {
  const { db, config } = useRuntime();
  const { gsi2pk, gsi2sk: cutoff } = Keys.pendingExecution(now - config.limits.executionTimeoutMs, "");
  const out = await db.send(
    new QueryCommand({
      TableName: table(),
      IndexName: Index.gsi2,
      KeyConditionExpression: "gsi2pk = :pk AND gsi2sk < :cutoff",
      ExpressionAttributeValues: { ":pk": gsi2pk, ":cutoff": cutoff },
      ProjectionExpression: "workflowId, id",
      Limit: max,
    }),
  );
  const timedOut: { workflowId: string; id: string }[] = [];
  for (const item of (out.Items ?? []) as { workflowId: string; id: string }[]) {
    if (await finish(item.workflowId, item.id, { status: "error", error: "execution timed out", endAt: now })) timedOut.push(item);
  }
  return { checked: out.Items?.length ?? 0, timedOut };
}

// ---------------------------------------------------------------------------------------------------------
// Reading the record

export interface ExecutionRecord {
  owner: string;
  execution: Execution;
}

/**
 * The execution with its steps, whoever owns it (the caller checks), at most `max_execution_record_bytes`
 * serialized (API.md §18.2): 1 GetItem + 1 Query of the steps in parallel, then 1 BatchGetItem of the large
 * outputs the answer keeps, if any.
 */
export async function getRecord(workflowId: string, id: string): Promise<ExecutionRecord | undefined> {
  const [out, steps] = await Promise.all([
    useRuntime().db.send(new GetCommand({ TableName: table(), Key: Keys.execution(workflowId, id), ConsistentRead: true })),
    readSteps(id),
  ]);
  const item = out.Item as StoredExecution | undefined;
  return item ? { owner: item.owner, execution: (await assemble(item, steps)).execution } : undefined;
}

/** The status summary and owner by one strongly consistent GetItem of the status fields. */
export async function readSummary(workflowId: string, id: string): Promise<{ owner: string; summary: StatusSummary } | undefined> {
  const out = await useRuntime().db.send(
    new GetCommand({
      TableName: table(),
      Key: Keys.execution(workflowId, id),
      ConsistentRead: true,
      ProjectionExpression: "id, workflowId, #status, startAt, endAt, #error, #owner",
      ExpressionAttributeNames: { "#status": "status", "#error": "error", "#owner": "owner" },
    }),
  );
  const item = out.Item as StoredExecution | undefined;
  return item ? { owner: item.owner, summary: toSummary(item) } : undefined;
}

/** Path ids are ULIDs in any letter case; anything else names no execution. */
const normalizeId = (id: string) => {
  const upper = id.toUpperCase();
  return /^[0-9A-HJKMNP-TV-Z]{26}$/.test(upper) ? upper : undefined;
};

/** GET /executions/{id}: the caller's execution in that workflow, or 404 EXECUTION_NOT_FOUND. */
export async function retrieve(workflowId: string, rawId: string): Promise<Execution> {
  const id = normalizeId(rawId);
  const found = id ? await getRecord(workflowId, id) : undefined;
  if (!found || lower(found.owner) !== lower(useOwner())) throw executionNotFound();
  return found.execution;
}

/** GET /executions/{id}:getStatus and the stream's first read. */
export async function statusOf(workflowId: string, rawId: string): Promise<StatusSummary> {
  const id = normalizeId(rawId);
  const found = id ? await readSummary(workflowId, id) : undefined;
  if (!found || lower(found.owner) !== lower(useOwner())) throw executionNotFound();
  return found.summary;
}

const executionNotFound = () => notFound("EXECUTION_NOT_FOUND", "The execution");

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
  const result = await queryPage({
    ...source.key,
    skPrefix: ULID_PREFIX,
    order: "desc",
    filter: combine(source.filter, statusFilter(filter.statuses)),
    limit: page.limit,
    after: page.after,
    before: page.before,
  });
  const stored = result.items as unknown as StoredExecution[];
  // A `before` page keeps the executions nearest its cursor: it is assembled from its end.
  const walk = result.backward ? [...stored].reverse() : stored;
  const kept = await assembleWithin(walk, new PageBudget());
  const items = result.backward ? kept.reverse() : kept;
  const cut = items.length < stored.length;
  return {
    items: items as unknown as Item[],
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
  await readAll(source, { filter: combine(source.filter, statusFilter(filter.statuses)), count: true }, (n) => (total += n));
  return total;
}

/** GET /executions:stats: executions whose startAt is in [since, until). */
export async function stats(workflowIds: string[], since: number, until: number): Promise<Stats> {
  const result: Stats = { total: 0, succeeded: 0, failed: 0, pending: 0 };
  const source = await sourceFor(useOwner(), workflowIds);
  if (!source) return result;
  const idBound = (ms: number) => encodeTime(Math.min(Math.max(ms, 0), 2 ** 48 - 1), 10);
  const window = {
    expression: "startAt >= :since AND startAt < :until",
    values: { ":since": since, ":until": until },
  };
  let terminal = 0;
  let duration = 0;
  await readAll(
    source,
    {
      range: [idBound(since - ID_CLOCK_MARGIN_MS), `${idBound(until + ID_CLOCK_MARGIN_MS)}\uffff`],
      filter: combine(source.filter, window),
      projection: "#status, startAt, endAt",
    },
    (_n, items) => {
      for (const item of items as unknown as StoredExecution[]) {
        result.total += 1;
        if (item.status === "pending") result.pending += 1;
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

interface QueryFilter {
  expression: string;
  names?: Record<string, string>;
  values?: Record<string, unknown>;
}

interface Source {
  key: { index?: string; pkName: string; pk: string; skName: string };
  filter?: QueryFilter;
}

/**
 * One workflow: its own partition (pattern 13), after one probe of its first item's owner: every execution of
 * a workflow has the workflow's owner, and a foreign partition must not be read through a filter. Several or
 * none: the owner's executions (pattern 14), filtered by workflow. Undefined: nothing can match.
 */
async function sourceFor(owner: string, workflowIds: string[]): Promise<Source | undefined> {
  const ids = [...new Set(workflowIds)];
  if (ids.length === 1) {
    const pk = Keys.execution(ids[0]!, "").pk;
    const probe = await useRuntime().db.send(
      new QueryCommand({
        TableName: table(),
        KeyConditionExpression: "pk = :pk",
        ExpressionAttributeValues: { ":pk": pk },
        ExpressionAttributeNames: { "#owner": "owner" },
        ProjectionExpression: "#owner",
        Limit: 1,
      }),
    );
    const first = probe.Items?.[0] as { owner?: string } | undefined;
    if (!first?.owner || lower(first.owner) !== lower(owner)) return undefined;
    return { key: { pkName: "pk", pk, skName: "sk" } };
  }
  const key = { index: Index.gsi1, pkName: "gsi1pk", pk: Keys.executionByOwner(owner, "").gsi1pk, skName: "gsi1sk" };
  if (ids.length === 0) return { key };
  return {
    key,
    filter: {
      expression: `workflowId IN (${ids.map((_, i) => `:w${i}`).join(", ")})`,
      values: Object.fromEntries(ids.map((w, i) => [`:w${i}`, w])),
    },
  };
}

function statusFilter(statuses: ExecutionStatus[]): QueryFilter | undefined {
  const wanted = [...new Set(statuses)];
  if (wanted.length === 0) return undefined;
  return {
    expression: `#status IN (${wanted.map((_, i) => `:s${i}`).join(", ")})`,
    names: { "#status": "status" },
    values: Object.fromEntries(wanted.map((s, i) => [`:s${i}`, s])),
  };
}

function combine(...filters: (QueryFilter | undefined)[]): QueryFilter | undefined {
  const present = filters.filter((f): f is QueryFilter => f !== undefined);
  if (present.length === 0) return undefined;
  return {
    expression: present.map((f) => `(${f.expression})`).join(" AND "),
    names: Object.assign({}, ...present.map((f) => f.names ?? {})) as Record<string, string>,
    values: Object.assign({}, ...present.map((f) => f.values ?? {})) as Record<string, unknown>,
  };
}

/** Reads a whole selection page by page (count, stats): `onPage` gets the count and the items of each page. */
async function readAll(
  source: Source,
  options: { filter?: QueryFilter; range?: [string, string]; count?: boolean; projection?: string },
  onPage: (count: number, items: Item[]) => void,
) {
  const [lo, hi] = options.range ?? [ULID_PREFIX, `${ULID_PREFIX}\uffff`];
  const names: Record<string, string> = { "#pk": source.key.pkName, "#sk": source.key.skName, ...options.filter?.names };
  if (options.projection?.includes("#status")) names["#status"] = "status";
  const input: QueryCommandInput = {
    TableName: table(),
    IndexName: source.key.index,
    KeyConditionExpression: "#pk = :pk AND #sk BETWEEN :lo AND :hi",
    FilterExpression: options.filter?.expression,
    ExpressionAttributeNames: names,
    ExpressionAttributeValues: { ":pk": source.key.pk, ":lo": lo, ":hi": hi, ...options.filter?.values },
    ...(options.count ? { Select: "COUNT" as const } : { ProjectionExpression: options.projection }),
  };
  let startKey: Item | undefined;
  do {
    const out = await useRuntime().db.send(new QueryCommand({ ...input, ExclusiveStartKey: startKey }));
    onPage(out.Count ?? 0, out.Items ?? []);
    startKey = out.LastEvaluatedKey;
  } while (startKey);
}

// ---------------------------------------------------------------------------------------------------------
// Stored shapes

interface StoredExecution {
  id: string;
  workflowId: string;
  owner: string;
  chainId: number;
  index: number;
  startAt: number;
  endAt?: number;
  status: ExecutionStatus;
  error?: string;
  executionFee: Fee;
  valueFee: ValueFee;
  cogs?: Record<string, Cost>;
  triggerId: string;
  triggerStep?: string;
  stepIds?: Set<string>;
  /** Bytes of step JSON recorded so far (steps recorded before it existed are not counted: then absent). */
  stepBytes?: number;
}

interface StoredStep {
  position?: number;
  recordedAt: number;
  step: Step;
}

/** A step as read back: its output in `step.output`, or (`outputParts` > 0) `null` there and in items of its own. */
interface ReadStep extends StoredStep {
  /** Serialized bytes of the recorded output. */
  outputBytes: number;
  outputParts: number;
}

interface StepPart {
  stepId: string;
  part: number;
  parts: number;
  body: Uint8Array;
  /** Step items v 2, on every part. */
  outputBytes?: number;
  outputParts?: number;
}

/**
 * Every recorded step of an execution, its parts joined: one Query page per MB of steps. Outputs above
 * INLINE_OUTPUT_BYTES are not read here (`readOutputs` reads those an answer keeps).
 */
async function readSteps(id: string): Promise<ReadStep[]> {
  const parts = new Map<string, { first?: StepPart; chunks: Uint8Array[] }>();
  for await (const out of queryPages({
    TableName: table(),
    KeyConditionExpression: "pk = :pk AND begins_with(sk, :step)",
    ExpressionAttributeValues: { ":pk": Keys.executionStep(id, "", 0).pk, ":step": "STEP#" },
    ConsistentRead: true,
  })) {
    for (const item of (out.Items ?? []) as StepPart[]) {
      const entry = parts.get(item.stepId) ?? { chunks: [] };
      if (item.part === 0) entry.first = item;
      entry.chunks[item.part] = item.body;
      parts.set(item.stepId, entry);
    }
  }
  const steps: ReadStep[] = [];
  for (const { first, chunks: all } of parts.values()) {
    // Parts beyond the count of part 0 are leftovers of an earlier, longer recording of the same step.
    const chunks = all.slice(0, first?.parts ?? 0);
    if (!first || chunks.length !== first.parts || chunks.some((c) => c === undefined)) continue;
    const stored = JSON.parse(Buffer.concat(chunks).toString("utf8")) as StoredStep;
    steps.push({
      ...stored,
      // Step items v 1 hold the output in the step.
      outputBytes: first.outputBytes ?? Buffer.byteLength(JSON.stringify(stored.step.output)),
      outputParts: first.outputParts ?? 0,
    });
  }
  return steps;
}

/** The recorded outputs of `wanted` (steps whose output lies in its own items), into their steps. */
async function readOutputs(id: string, wanted: ReadStep[]): Promise<void> {
  const keys = wanted.flatMap((s) => Array.from({ length: s.outputParts }, (_, part) => Keys.executionStepOutput(id, s.step.id, part)));
  const chunks = new Map<string, Uint8Array[]>();
  for (let i = 0; i < keys.length; i += 100) {
    let request: Record<string, unknown>[] | undefined = keys.slice(i, i + 100);
    for (let attempt = 0; request?.length; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, Math.min(1_000, 25 * 2 ** attempt)));
      if (attempt > 8) throw new Error("reading step outputs: keys left unprocessed");
      const out: BatchGetCommandOutput = await useRuntime().db.send(
        new BatchGetCommand({ RequestItems: { [table()]: { Keys: request, ConsistentRead: true } } }),
      );
      for (const item of (out.Responses?.[table()] ?? []) as StepPart[]) {
        const entry = chunks.get(item.stepId) ?? [];
        entry[item.part] = item.body;
        chunks.set(item.stepId, entry);
      }
      request = out.UnprocessedKeys?.[table()]?.Keys;
    }
  }
  for (const s of wanted) {
    const parts = chunks.get(s.step.id)?.slice(0, s.outputParts) ?? [];
    const whole = parts.length === s.outputParts && !parts.some((c) => c === undefined);
    // Written in the step's own transaction, so always there; a record never answers with a hole.
    s.step.output = whole ? (JSON.parse(Buffer.concat(parts).toString("utf8")) as Step["output"]) : { data: null };
  }
}

function toSummary(item: StoredExecution): StatusSummary {
  return {
    id: item.id,
    workflowId: item.workflowId,
    status: item.status,
    startAt: item.startAt,
    ...(item.endAt !== undefined ? { endAt: item.endAt } : {}),
    ...(item.error !== undefined ? { error: item.error } : {}),
  };
}

/** The steps in API order: trigger step first, then by startAt, node position, then recording order (API.md §10.1). */
function orderSteps(item: StoredExecution, recorded: ReadStep[]): ReadStep[] {
  const byId = new Map<string, ReadStep>();
  if (item.triggerStep) {
    const step = JSON.parse(item.triggerStep) as Step;
    byId.set(item.triggerId, { position: -1, recordedAt: item.startAt, step, outputBytes: Buffer.byteLength(JSON.stringify(step.output)), outputParts: 0 });
  }
  for (const s of recorded) byId.set(s.step.id, s);
  const rank = (s: StoredStep) => (s.step.id === item.triggerId ? 0 : 1);
  return [...byId.values()].sort(
    (a, b) =>
      rank(a) - rank(b) ||
      a.step.startAt - b.step.startAt ||
      (a.position ?? Number.MAX_SAFE_INTEGER) - (b.position ?? Number.MAX_SAFE_INTEGER) ||
      a.recordedAt - b.recordedAt,
  );
}

/** The API shape of the execution item around `steps` (in API order). */
function toExecution(item: StoredExecution, steps: Step[]): Execution {
  const order = new Map(steps.map((s, i) => [s.id, i]));
  const cogs = Object.values(item.cogs ?? {}).sort(
    (a, b) => (order.get(a.nodeId) ?? steps.length) - (order.get(b.nodeId) ?? steps.length) || (a.nodeId < b.nodeId ? -1 : 1),
  );
  return {
    id: item.id,
    workflowId: item.workflowId,
    chainId: item.chainId,
    index: item.index,
    startAt: item.startAt,
    ...(item.endAt !== undefined ? { endAt: item.endAt } : {}),
    status: item.status,
    ...(item.error !== undefined ? { error: item.error } : {}),
    steps,
    executionFee: item.executionFee,
    cogs,
    valueFee: item.valueFee,
  };
}

// ---------------------------------------------------------------------------------------------------------
// Bounds of an answer (API.md §18.2)

interface Assembled {
  execution: Execution;
  /** Its serialized size: the bytes it takes on the wire. */
  bytes: number;
}

/**
 * The execution item and its recorded steps as one Execution of at most `max_execution_record_bytes`
 * serialized: the outputs it replaces are never read, the others that lie in their own items are read then.
 */
async function assemble(item: StoredExecution, recorded: ReadStep[]): Promise<Assembled> {
  const max = useRuntime().config.limits.maxExecutionRecordBytes;
  const ordered = orderSteps(item, recorded);
  const execution = toExecution(item, ordered.map((s) => s.step));
  const pending = fitRecord(execution, ordered.map((s) => ({ bytes: s.outputBytes, held: s.outputParts === 0 })), max);
  if (pending.length > 0) await readOutputs(item.id, pending.map((i) => ordered[i]!));
  const bytes = Buffer.byteLength(JSON.stringify(execution));
  if (bytes > max) log.warn("execution answer above max_execution_record_bytes", { executionId: item.id, bytes, max });
  return { execution, bytes };
}

/**
 * An execution held whole in memory (a run's result) bounded as a recorded one is answered: at most
 * `max_execution_record_bytes` serialized (API.md §18.2). The steps it changes are copies; `execution` stays.
 */
export function boundExecution(execution: Execution, max = useRuntime().config.limits.maxExecutionRecordBytes): Execution {
  const bounded = { ...execution, steps: execution.steps.map((s) => ({ ...s })) };
  fitRecord(bounded, bounded.steps.map((s) => ({ bytes: Buffer.byteLength(JSON.stringify(s.output)), held: true })), max);
  return bounded;
}

/** A last-resort log or error keeps this many bytes (API.md §10.2's `…[truncated]` form). */
const LAST_RESORT_TEXT_BYTES = 256;

/**
 * Brings `execution` within `max` serialized bytes, in place. `outputs[i]` is step i's recorded output size and
 * whether the step holds it (`held`) or carries `null` in its place until it is read. While too large, the
 * largest outputs are replaced with `{data: null, truncated: true, originalSize}` (API.md §18.2, §10.2); should
 * every output be replaced and the record still pass `max` (up to 101 steps each with a 64 KiB log and error),
 * the largest logs and errors are cut to LAST_RESORT_TEXT_BYTES and configs and inputs (optional, the
 * workflow's own) are left out, largest first. Sizes are computed, not measured: each output is serialized
 * once. Returns the indexes of the steps whose output is kept but not held, in step order: the caller reads them.
 */
function fitRecord(execution: Execution, outputs: { bytes: number; held: boolean }[], max: number): number[] {
  const steps = execution.steps;
  const size = (value: unknown) => Buffer.byteLength(JSON.stringify(value));
  const NULL_BYTES = 4;
  const marker = (originalSize: number) => ({ data: null, truncated: true as const, originalSize });
  // With every output in place: the record with `null` outputs, then each output's own bytes instead of `null`.
  let total = size({ ...execution, steps: steps.map((s) => ({ ...s, output: null })) });
  for (const o of outputs) total += o.bytes - NULL_BYTES;
  const replaced = new Set<number>();
  if (total > max) {
    const isMarker = (i: number) => outputs[i]!.held && (steps[i]!.output as { truncated?: unknown } | null)?.truncated === true;
    const candidates = steps
      .map((_, i) => i)
      .filter((i) => !isMarker(i) && size(marker(outputs[i]!.bytes)) < outputs[i]!.bytes)
      .sort((a, b) => outputs[b]!.bytes - outputs[a]!.bytes || a - b);
    for (const i of candidates) {
      if (total <= max) break;
      const replacement = marker(outputs[i]!.bytes);
      total -= outputs[i]!.bytes - size(replacement);
      steps[i]!.output = replacement;
      replaced.add(i);
    }
  }
  if (total > max) {
    type Cut = { i: number; field: "log" | "error" | "config" | "inputs"; bytes: number };
    const cuts: Cut[] = steps.flatMap((s, i) =>
      (["log", "error", "config", "inputs"] as const).filter((f) => s[f] !== undefined).map((field) => ({ i, field, bytes: size(s[field]) })),
    );
    cuts.sort((a, b) => b.bytes - a.bytes || a.i - b.i);
    for (const cut of cuts) {
      if (total <= max) break;
      const step = steps[cut.i]!;
      if (cut.field === "log" || cut.field === "error") {
        const shorter = truncate(step[cut.field]!, LAST_RESORT_TEXT_BYTES);
        total -= cut.bytes - size(shorter);
        step[cut.field] = shorter;
      } else {
        // The member goes with its key, its colon and one comma.
        total -= size(cut.field) + 1 + cut.bytes + 1;
        delete step[cut.field];
      }
    }
  }
  return steps.map((_, i) => i).filter((i) => !outputs[i]!.held && !replaced.has(i));
}

// ---------------------------------------------------------------------------------------------------------
// Bounds of a recorded step (API.md §10.2)

function boundStep(step: Step, limits: Limits): Step {
  const out: Step = { ...step };
  const outputBytes = Buffer.byteLength(JSON.stringify(step.output));
  if (outputBytes > limits.maxStepOutputBytes) out.output = { data: null, truncated: true, originalSize: outputBytes };
  if (step.log !== undefined) out.log = truncate(step.log, limits.maxStepLogBytes);
  if (step.error !== undefined) out.error = truncate(step.error, limits.maxStepLogBytes);
  return out;
}

/** At most `max` UTF-8 bytes, ending with `…[truncated]` when cut (never inside a character). */
function truncate(text: string, max: number): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= max) return text;
  let cut = Math.max(0, max - Buffer.byteLength(TRUNCATED));
  while (cut > 0 && (bytes[cut]! & 0xc0) === 0x80) cut -= 1;
  return bytes.subarray(0, cut).toString("utf8") + TRUNCATED;
}
