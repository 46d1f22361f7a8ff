/**
 * Executions (API.md §10; shared/execution/README.md describes the storage): one item per execution in its
 * workflow's partition (`WF#<wf>#EXEC` / ULID, pattern 13), on GSI1 by owner (pattern 14) and, while pending, on
 * the sparse keys-only GSI3 oldest first (pattern 15). Owned here: steps are recorded, the run is marked started and the
 * execution is ended only while it is pending (ending it takes it off the pending index); the reads and lists.
 * Its steps and run input are items of their own (./execution-parts.ts).
 */
import { defineEntity, transact, type Stored } from "../entity";
import { addTo, remove, set, when, type Condition, type UpdateAction } from "../expression";
import { DuePartition, Keys } from "../item-keys";
import { dueTargets, fromShards, queryOnce, queryPages, type ListPage, type Query, type TableKey } from "../query";
import { Index, isConditionFailure, landed } from "../table";
import { putStepParts, stepPartItems, type StepRecording } from "./execution-parts";

export interface ExecutionId {
  workflowId: string;
  id: string;
}

type Item = Record<string, unknown>;

/**
 * An execution item's attributes as the store reads them (shared/execution/execution-stored.ts types the rest);
 * besides these, an open wait is `wait:<nodeId>` and an ended signal wait `end:<nodeId>` (below).
 */
export interface ExecutionItem {
  id: string;
  workflowId: string;
  owner: string;
  status: string;
  startAt: number;
  endAt?: number;
  error?: string;
  stepIds?: Set<string>;
  stepBytes?: number;
  runStartedAt?: number;
  /** The sealed state of a suspended or checkpointed run (`sealedState` below). */
  stateGeneration?: number;
  stateParts?: number;
  stateKey?: Item;
  pendingMs?: number;
  openWaits?: string[];
  suspendedSteps?: number;
  passStartedAt?: number;
  driverAt?: number;
  [attribute: string]: unknown;
}

const Execution = defineEntity<ExecutionItem, ExecutionId>({
  type: "execution",
  version: 1,
  key: ({ workflowId, id }) => Keys.execution(workflowId, id),
});

/** An execution item as read. */
export type StoredExecutionItem = Stored<ExecutionItem>;

const isPending = when.eq("status", "pending");

/**
 * Puts the execution on a due partition of gsi3 (pending or waiting), off gsi2, where items written before gsi3
 * carry the same keys (README "Sharded due keys").
 */
const onDueIndex = (keys: { gsi3pk: string; gsi3sk: string }) => [
  set("gsi3pk", keys.gsi3pk),
  set("gsi3sk", keys.gsi3sk),
  ...offLegacyDueIndex,
];
const offLegacyDueIndex = [remove("gsi2pk"), remove("gsi2sk")];
/** Takes the execution off every due partition (it ended). */
const offDueIndexes = [remove("gsi3pk"), remove("gsi3sk"), ...offLegacyDueIndex];

/** The table keys of a keys-only Query's items. */
const keysOf = (items: readonly Record<string, unknown>[]): TableKey[] => items.map((key) => ({ pk: String(key.pk), sk: String(key.sk) }));

/**
 * The executions of a due partition whose sort key is before `bound`, oldest first in each shard, at most `max`
 * (one keys-only Query per shard).
 */
async function dueBefore(partition: string, bound: string, max: number): Promise<ExecutionId[]> {
  return fromShards(dueTargets(partition), max, async ({ index, pk }) => {
    const page = await queryOnce({ index, pk, sk: { lt: bound }, attributes: ["pk", "sk"], limit: max });
    return keysOf(page.items).map(Keys.executionOf);
  });
}

/** Writes a claimed execution's item (built whole by shared/execution) unless it is there already (the sweeper, or a retry, wrote it). */
export async function putClaimedExecution(item: Item): Promise<void> {
  try {
    // A claim carries its execution item as it was built (shared/execution), through intents and journals.
    await Execution.put({ workflowId: String(item.workflowId), id: String(item.id) }, item as ExecutionItem, { if: when.notExists() });
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
}

/** Whether the execution `executionId` of workflow `workflowId` is written (strongly consistent, key only). */
export async function executionWritten(workflowId: string, executionId: string): Promise<boolean> {
  return (await Execution.get({ workflowId, id: executionId }, { consistent: true, attributes: ["pk"] })) !== undefined;
}

/**
 * The item of a new pending execution (keys, both indexes, `type`, `v`), for the claim's transaction; `fields`
 * holds its attributes from `id` on.
 */
export function pendingExecutionItem(fields: ExecutionItem): Stored<ExecutionItem> {
  return {
    ...Execution.key(fields),
    ...Keys.executionByOwner(fields.owner, fields.id),
    ...Keys.pendingExecution(fields.startAt, fields.id),
    type: Execution.type,
    v: Execution.version,
    ...fields,
  };
}

/**
 * Records a step while the execution is pending, in one transaction: its id and bytes (and its user operation's
 * cost under `cogs.<nodeId>`) on the execution item, its parts and output parts. False when not pending.
 */
export async function recordStepItems(
  execution: ExecutionId,
  recording: StepRecording & { bytes: number; cost?: { nodeId: string } },
): Promise<boolean> {
  const actions: UpdateAction[] = [addTo("stepIds", new Set([recording.stepId])), addTo("stepBytes", recording.bytes)];
  if (recording.cost) actions.push(set(["cogs", recording.cost.nodeId], recording.cost));
  return landed(transact([Execution.tx.update(execution, actions, { if: isPending }), ...stepPartItems(execution.id, recording)]));
}

/** Ends a pending execution (off the pending index); false when it had ended already or does not exist. */
export async function finishExecution(
  execution: ExecutionId,
  outcome: { status: string; endAt: number; error?: string; cogs?: Record<string, unknown> },
  last?: StepRecording & { bytes: number },
): Promise<boolean> {
  const actions: UpdateAction[] = [set("status", outcome.status), set("endAt", outcome.endAt)];
  if (outcome.error !== undefined) actions.push(set("error", outcome.error));
  if (outcome.cogs) actions.push(set("cogs", outcome.cogs));
  actions.push(...offDueIndexes);
  if (last) {
    // The run's last step (its cost is in `outcome.cogs`): its items first, then the update that lists it in
    // `stepIds`. Readers show only the steps their execution lists, so a step whose update is then refused (the
    // run had ended) is never seen; two plain writes cost half a transaction's.
    actions.push(addTo("stepIds", new Set([last.stepId])), addTo("stepBytes", last.bytes));
    await putStepParts(execution.id, last);
  }
  return landed(Execution.update(execution, actions, { if: isPending }));
}

/** The conditional "started" mark: only a pending execution not yet started takes it; the item after, or undefined. */
export async function markRunStarted(execution: ExecutionId, now: number): Promise<StoredExecutionItem | undefined> {
  try {
    return await Execution.update(execution, [set("runStartedAt", now)], {
      if: when.and(isPending, when.notExists("runStartedAt")),
      returnValues: "ALL_NEW",
    });
  } catch (err) {
    if (isConditionFailure(err)) return undefined;
    throw err;
  }
}

/** The execution item (strongly consistent). */
export const getExecution = (execution: ExecutionId) => Execution.get(execution, { consistent: true });

/** Executions pending since before `cutoff` (ms), oldest first, at most `max` (pattern 15: one Query). */
export async function pendingBefore(cutoff: number, max: number): Promise<ExecutionId[]> {
  return dueBefore(DuePartition.pendingExecution, Keys.pendingExecution(cutoff, "").gsi3sk, max);
}

// ---------------------------------------------------------------------------------------------------------
// Lists (GET /executions, :count, :stats)

/**
 * Where a list reads: one workflow's partition (pattern 13), or the owner's executions on GSI1 (pattern 14),
 * then only those of `workflowIds` when given.
 */
export type ExecutionSource = { workflowId: string } | { owner: string; workflowIds?: readonly string[] };

/**
 * Every execution id sorts after this: a ULID's first character is `0` until the year 3084. The paged query
 * needs a non-empty key prefix (DynamoDB refuses an empty string as a key value).
 */
const ULID_PREFIX = "0";

function sourceKey(source: ExecutionSource): Pick<Query, "index" | "pk"> {
  return "workflowId" in source
    ? { pk: Keys.execution(source.workflowId, "").pk }
    : { index: Index.gsi1, pk: Keys.executionByOwner(source.owner, "").gsi1pk };
}

/** The source's filter and the caller's, joined. */
function sourceFilter(source: ExecutionSource, filter: Condition | undefined): Condition | undefined {
  const ids = "workflowIds" in source && source.workflowIds?.length ? when.in("workflowId", source.workflowIds) : undefined;
  return ids || filter ? when.and(ids, filter) : undefined;
}

/** Only executions of these statuses (none given: all). */
export const withStatus = (statuses: readonly string[]) => (statuses.length ? when.in("status", [...new Set(statuses)]) : undefined);

/** Only executions whose startAt lies in [since, until). */
export const startedWithin = (since: number, until: number) => when.and(when.ge("startAt", since), when.lt("startAt", until));

/** The owner of a workflow's first execution (one Query of one item), or undefined when it has none. */
export async function firstExecutionOwner(workflowId: string): Promise<string | undefined> {
  const page = await Execution.query({ pk: Keys.execution(workflowId, "").pk, attributes: ["owner"], limit: 1 });
  return page.items[0]?.owner;
}

/** One page of the source's executions, newest first (API.md §3). */
export function executionPage(
  source: ExecutionSource,
  filter: Condition | undefined,
  page: { limit: number; after?: string; before?: string },
): Promise<ListPage<StoredExecutionItem>> {
  const where = sourceFilter(source, filter);
  return Execution.list({
    ...sourceKey(source),
    sk: { beginsWith: ULID_PREFIX },
    order: "desc",
    ...(where ? { filter: where } : {}),
    limit: page.limit,
    after: page.after,
    before: page.before,
  });
}

/**
 * Reads a whole selection page by page: ids in `range` (default all), `count` only or the `attributes`;
 * `onPage` gets each page's count and items.
 */
export async function readExecutions(
  source: ExecutionSource,
  options: { filter?: Condition; range?: [string, string]; count?: boolean; attributes?: readonly string[] },
  onPage: (count: number, items: Partial<StoredExecutionItem>[]) => void,
) {
  const filter = sourceFilter(source, options.filter);
  const query: Query = {
    ...sourceKey(source),
    sk: { between: options.range ?? [ULID_PREFIX, `${ULID_PREFIX}\uffff`] },
    ...(filter ? { filter } : {}),
    ...(options.count ? { count: true } : { attributes: options.attributes }),
  };
  for await (const page of Execution.pages(query)) onPage(page.count, page.items);
}

// ---------------------------------------------------------------------------------------------------------
// Waits of `await` nodes (API.md §17.1; shared/execution/waits.ts)
//
// An open wait is the attribute `wait:<nodeId>` of the execution item (a map: kind, deadline, …); an ended
// signal wait leaves `end:<nodeId>` (decision, signer, payload hash) for replays. Top-level attributes, not a map
// of waits, so that no write needs the map to exist first. While `waiting` the item is on gsi3 `EXEC#waiting#<shard>`
// (pattern 26) instead of the pending index.

const WAIT_PREFIX = "wait:";
export const END_PREFIX = "end:";

/**
 * The open waits of an execution item, by node id, each as `W`: the shape its writer (shared/execution/waits.ts,
 * through `putOpenWait`) gave it.
 */
export function openWaitsOf<W extends object = Item>(item: Item): Map<string, W> {
  const waits = new Map<string, W>();
  for (const [name, value] of Object.entries(item)) if (name.startsWith(WAIT_PREFIX)) waits.set(name.slice(WAIT_PREFIX.length), value as W);
  return waits;
}

/** Records a wait that began, while the execution is pending; false when it is not. */
export async function putOpenWait(execution: ExecutionId, nodeId: string, wait: Item): Promise<boolean> {
  return landed(Execution.update(execution, [set(`${WAIT_PREFIX}${nodeId}`, wait)], { if: isPending }));
}

/**
 * Ends a wait, in one transaction: the wait removed, the await node's step recorded (its parts, its id and bytes),
 * `end` kept when given, all only while the wait is open, the execution still has the status it was read with,
 * and `guard` holds (a signal before the deadline, a timeout at or after it). A waiting execution is put on the
 * waiting index at `attentionAt` (the sweeper resumes it if the hand-over is lost). False when refused.
 */
export async function endOpenWait(
  execution: ExecutionId,
  nodeId: string,
  options: {
    status: "pending" | "waiting";
    guard: Condition;
    end?: Item;
    attentionAt: number;
    recording: StepRecording & { bytes: number };
  },
): Promise<boolean> {
  const waitName = `${WAIT_PREFIX}${nodeId}`;
  const actions: UpdateAction[] = [
    remove(waitName),
    addTo("stepIds", new Set([options.recording.stepId])),
    addTo("stepBytes", options.recording.bytes),
  ];
  if (options.end) actions.push(set(`${END_PREFIX}${nodeId}`, options.end));
  if (options.status === "waiting") actions.push(...onDueIndex(Keys.waitingExecution(options.attentionAt, execution.id)));
  const condition = when.and(when.exists(waitName), when.eq("status", options.status), options.guard);
  return landed(transact([Execution.tx.update(execution, actions, { if: condition }), ...stepPartItems(execution.id, options.recording)]));
}

/**
 * Suspends a pending run: `waiting`, its state's generation, pending time so far and open waits recorded, off the
 * pending index onto the waiting one at `attentionAt`; only while pending and while every wait in `open` is still
 * open (one that ended meanwhile is the run's to take up first). False when refused.
 */
export async function suspendRun(
  execution: ExecutionId,
  fields: {
    stateGeneration: number;
    stateParts: number;
    stateKey: Item;
    pendingMs: number;
    open: string[];
    attentionAt: number;
    /** How many steps are recorded at the suspension (recovery tells a pass that made progress from one that did not). */
    steps: number;
  },
): Promise<boolean> {
  const waiting = Keys.waitingExecution(fields.attentionAt, execution.id);
  return landed(
    Execution.update(execution, [set("status", "waiting"), ...sealedState(fields), ...onDueIndex(waiting)], {
      if: when.and(isPending, ...fields.open.map((id) => when.exists(`${WAIT_PREFIX}${id}`))),
    }),
  );
}

/** What a suspension and a checkpoint both record of the run's sealed state. */
const sealedState = (fields: Parameters<typeof suspendRun>[1]) => [
  set("stateGeneration", fields.stateGeneration),
  set("stateParts", fields.stateParts),
  set("stateKey", fields.stateKey),
  set("pendingMs", fields.pendingMs),
  set("openWaits", fields.open),
  set("suspendedSteps", fields.steps),
];

/**
 * Checkpoints a pending run that goes on after waits ended (./recovery.ts takes such a pass over if its driver
 * dies): its state's generation, the pass's start and pending time before it, the waits open at the checkpoint
 * (ended ones included) and the steps recorded but theirs; only while pending. False when refused.
 */
export async function checkpointRun(
  execution: ExecutionId,
  fields: Parameters<typeof suspendRun>[1] & { passStartedAt: number; driverAt: number },
): Promise<boolean> {
  return landed(
    Execution.update(execution, [...sealedState(fields), set("passStartedAt", fields.passStartedAt), set("driverAt", fields.driverAt)], {
      if: isPending,
    }),
  );
}

/**
 * Resumes a waiting run: `pending` again, back on the pending index at `virtualStart` (now − the pending time so
 * far: the timeout counts pending time only), only while it is waiting on generation `stateGeneration` (two
 * resumers: one wins). The item after, or undefined.
 */
export async function resumeRun(
  execution: ExecutionId,
  stateGeneration: number,
  now: number,
  virtualStart: number,
): Promise<StoredExecutionItem | undefined> {
  const pending = Keys.pendingExecution(virtualStart, execution.id);
  try {
    return await Execution.update(
      execution,
      [set("status", "pending"), set("passStartedAt", now), set("driverAt", now), ...onDueIndex(pending)],
      { if: when.and(when.eq("status", "waiting"), when.eq("stateGeneration", stateGeneration)), returnValues: "ALL_NEW" },
    );
  } catch (err) {
    if (isConditionFailure(err)) return undefined;
    throw err;
  }
}

/** The driver of a resumed pass is alive: `driverAt` moved to `now` while the execution is pending. */
export async function renewDriver(execution: ExecutionId, now: number): Promise<boolean> {
  return landed(Execution.update(execution, [set("driverAt", now)], { if: isPending }));
}

/**
 * Takes a resumed pass over from a driver that stopped renewing `driverAt` (a crash): only while the execution is
 * pending on generation `read.stateGeneration`, with the `driverAt` and `stepBytes` read (no step recorded since,
 * no other taker: one driver wins). The item after, or undefined.
 */
export async function takeOverRun(
  execution: ExecutionId,
  read: { stateGeneration: number; driverAt: number; stepBytes: number },
  now: number,
): Promise<StoredExecutionItem | undefined> {
  try {
    return await Execution.update(execution, [set("driverAt", now)], {
      if: when.and(
        isPending,
        when.eq("stateGeneration", read.stateGeneration),
        when.eq("driverAt", read.driverAt),
        when.eq("stepBytes", read.stepBytes),
      ),
      returnValues: "ALL_NEW",
    });
  } catch (err) {
    if (isConditionFailure(err)) return undefined;
    throw err;
  }
}

/**
 * Pending executions whose runner is gone, oldest first, at most `max` (pattern 15 filtered): resumed from a sealed
 * state and whose driver has not renewed `driverAt` since `cutoff` (`resume`), or never started by a runner and
 * pending since before `unstartedCutoff` (the claim was written, the hand-over died with its process).
 */
export async function lostRuns(cutoff: number, unstartedCutoff: number, max: number): Promise<(ExecutionId & { resume: boolean })[]> {
  const bound = Keys.pendingExecution(Math.max(cutoff, unstartedCutoff), "").gsi3sk;
  const lost = (item: Pick<ExecutionItem, (typeof LOST_RUN_ATTRIBUTES)[number]>) =>
    item.status === "pending" &&
    ((item.stateGeneration !== undefined && typeof item.driverAt === "number" && item.driverAt < cutoff) ||
      (item.runStartedAt === undefined && item.startAt < unstartedCutoff));
  return fromShards(dueTargets(DuePartition.pendingExecution), max, async ({ index, pk }) => {
    const found: (ExecutionId & { resume: boolean })[] = [];
    // The index holds keys only: each page's items are read by key (a key left unprocessed waits for the next pass).
    for await (const page of queryPages({ index, pk, sk: { lt: bound }, attributes: ["pk", "sk"], limit: LOST_RUN_PAGE })) {
      const keys = keysOf(page.items);
      if (keys.length === 0) continue;
      const { items } = await Execution.batchGet(keys, { attributes: LOST_RUN_ATTRIBUTES });
      const read = new Map(items.map((item) => [item.id, item]));
      for (const key of keys) {
        const item = read.get(key.sk);
        if (item && lost(item)) found.push({ workflowId: item.workflowId, id: item.id, resume: item.stateGeneration !== undefined });
      }
      if (found.length >= max) break;
    }
    return found;
  });
}

const LOST_RUN_ATTRIBUTES = ["workflowId", "id", "status", "startAt", "runStartedAt", "stateGeneration", "driverAt"] as const;
/** Keys per Query page of `lostRuns`, one BatchGetItem each (its limit). */
const LOST_RUN_PAGE = 100;

/** Ends a waiting execution (`error`: its workflow was deleted); false when it is not waiting. */
export async function endWaiting(execution: ExecutionId, outcome: { endAt: number; error: string }): Promise<boolean> {
  return landed(
    Execution.update(execution, [set("status", "error"), set("endAt", outcome.endAt), set("error", outcome.error), ...offDueIndexes], {
      if: when.eq("status", "waiting"),
    }),
  );
}

/** Waiting executions whose attention time is before `cutoff`, oldest first, at most `max` (pattern 26: one Query). */
export async function waitingDue(cutoff: number, max: number): Promise<ExecutionId[]> {
  return dueBefore(DuePartition.waitingExecution, Keys.waitingExecution(cutoff, "").gsi3sk, max);
}

/** The waiting executions of a workflow (pattern 13 filtered by status; every page). */
export async function waitingOf(workflowId: string): Promise<ExecutionId[]> {
  const found: ExecutionId[] = [];
  const query = {
    pk: Keys.execution(workflowId, "").pk,
    filter: when.eq("status", "waiting"),
    attributes: ["workflowId", "id"] as const,
    consistent: true,
  };
  for await (const page of Execution.pages(query)) found.push(...page.items);
  return found;
}
