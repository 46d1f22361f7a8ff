/**
 * Executions (API.md §10; shared/execution/execution.ts describes the storage): one item per execution in its
 * workflow's partition (`WF#<wf>#EXEC` / ULID, pattern 13), on GSI1 by owner (pattern 14) and, while pending, on
 * sparse GSI2 oldest first (pattern 15). Owned here: steps are recorded, the run is marked started and the
 * execution is ended only while it is pending (ending it takes it off the pending index); the reads and lists.
 * Its steps and run input are items of their own (./execution-parts.ts).
 */
import { defineEntity, queryEach, queryOnce, transact, type KeyQuery } from "../entity";
import { addTo, remove, set, when, type Condition, type UpdateAction } from "../expression";
import { Keys } from "../keys";
import { queryPage, type PageResult } from "../query";
import { Index, isConditionFailure } from "../table";
import { stepPartItems, type StepRecording } from "./execution-parts";

export interface ExecutionId {
  workflowId: string;
  id: string;
}

const Execution = defineEntity({
  type: "execution",
  version: 1,
  key: ({ workflowId, id }: ExecutionId) => Keys.execution(workflowId, id),
});

type Item = Record<string, unknown>;

const isPending = when.eq("status", "pending");

/** Writes a claimed execution's item (built whole by shared/execution) unless it is there already (the sweeper, or a retry, wrote it). */
export async function putClaimedExecution(item: Item): Promise<void> {
  try {
    await Execution.put({ workflowId: String(item.workflowId), id: String(item.id) }, item, { if: when.notExists() });
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
export function pendingExecutionItem(fields: Item & { id: string; workflowId: string; owner: string; startAt: number }): Item {
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
  try {
    await transact([Execution.tx.update(execution, actions, { if: isPending }), ...stepPartItems(execution.id, recording)]);
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

/** Ends a pending execution (off the pending index); false when it had ended already or does not exist. */
export async function finishExecution(
  execution: ExecutionId,
  outcome: { status: string; endAt: number; error?: string; cogs?: Record<string, unknown> },
): Promise<boolean> {
  const actions: UpdateAction[] = [set("status", outcome.status), set("endAt", outcome.endAt)];
  if (outcome.error !== undefined) actions.push(set("error", outcome.error));
  if (outcome.cogs) actions.push(set("cogs", outcome.cogs));
  actions.push(remove("gsi2pk"), remove("gsi2sk"));
  try {
    await Execution.update(execution, actions, { if: isPending });
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

/** The conditional "started" mark: only a pending execution not yet started takes it; the item after, or undefined. */
export async function markRunStarted(execution: ExecutionId, now: number): Promise<Item | undefined> {
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

/** The status fields and owner (strongly consistent GetItem of those only). */
export const getExecutionSummary = (execution: ExecutionId) =>
  Execution.get(execution, { consistent: true, attributes: ["id", "workflowId", "status", "startAt", "endAt", "error", "owner"] });

/** Executions pending since before `cutoff` (ms), oldest first, at most `max` (pattern 15: one Query). */
export async function pendingBefore(cutoff: number, max: number): Promise<{ workflowId: string; id: string }[]> {
  const { gsi2pk, gsi2sk } = Keys.pendingExecution(cutoff, "");
  const page = await queryOnce({ index: Index.gsi2, pk: gsi2pk, sk: { lt: gsi2sk }, attributes: ["workflowId", "id"], limit: max });
  return page.items as { workflowId: string; id: string }[];
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

function sourceKey(source: ExecutionSource) {
  return "workflowId" in source
    ? { pkName: "pk", pk: Keys.execution(source.workflowId, "").pk, skName: "sk" }
    : { index: Index.gsi1, pkName: "gsi1pk", pk: Keys.executionByOwner(source.owner, "").gsi1pk, skName: "gsi1sk" };
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
  const page = await queryOnce({ pk: Keys.execution(workflowId, "").pk, attributes: ["owner"], limit: 1 });
  return (page.items[0] as { owner?: string } | undefined)?.owner;
}

/** One page of the source's executions, newest first (API.md §3). */
export function executionPage(
  source: ExecutionSource,
  filter: Condition | undefined,
  page: { limit: number; after?: string; before?: string },
): Promise<PageResult> {
  const where = sourceFilter(source, filter);
  return queryPage({
    ...sourceKey(source),
    skPrefix: ULID_PREFIX,
    order: "desc",
    ...(where ? { where } : {}),
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
  onPage: (count: number, items: Item[]) => void,
) {
  const key = sourceKey(source);
  const filter = sourceFilter(source, options.filter);
  const query: KeyQuery = {
    ...(key.index ? { index: key.index } : {}),
    pk: key.pk,
    sk: { between: options.range ?? [ULID_PREFIX, `${ULID_PREFIX}\uffff`] },
    ...(filter ? { filter } : {}),
    ...(options.count ? { count: true } : { attributes: options.attributes }),
  };
  for await (const page of queryEach(query)) onPage(page.count, page.items);
}
