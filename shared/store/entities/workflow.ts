/**
 * The workflow record (store patterns 10-12): one item per workflow, `pk = WF#<id>`, `sk = WORKFLOW`, listed per
 * owner on gsi1 (newest first) and per wallet on gsi3 (both keys only, so a claim's count update writes no index
 * entry; records written before gsi3 are listed per wallet on gsi2), its definition in an item of its own (pattern 10b). The
 * domain's stored form (item `v` 3 without the document, `v` 2 with it as JSON text) is built and read by shared/workflow/stored.ts; this module owns the keys, the reads and writes and
 * their conditions.
 */
import { defineEntity } from "../entity";
import { queryPages, type ListPage, type ListQuery, type Query } from "../query";
import { add, copy, remove, set, when, type Condition } from "../expression";
import { Keys } from "../item-keys";
import { Index, isConditionFailure } from "../table";

type Item = Record<string, unknown>;

const WorkflowItem = defineEntity({ type: "workflow", version: 3, key: (id: string) => Keys.workflow(id) });

/**
 * The immutable definition of a workflow (pattern 10b): the client's document as JSON text, in an item of its own
 * so that no write of the record (a claim's count, a status) rewrites it, and kept after the record is deleted
 * (the executions' steps name their node's config in it instead of copying it).
 */
const DefinitionItem = defineEntity<{ workflowId: string; document: string }, string>({
  type: "workflowDefinition",
  version: 1,
  key: (id: string) => Keys.workflowDefinition(id),
});

/** Transaction item: the definition of a new workflow. */
export const createDefinitionItem = (id: string, document: string) =>
  DefinitionItem.tx.put(id, { workflowId: id, document }, { if: when.notExists() });

/** Writes the definition of a workflow stored before definitions had items of their own, unless there is one. */
export async function keepDefinition(id: string, document: string): Promise<void> {
  try {
    await DefinitionItem.put(id, { workflowId: id, document }, { if: when.notExists() });
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
}

/** The documents of the definitions of `ids` that exist (strongly consistent BatchGetItems of 100 keys), by id. */
export async function readDefinitions(ids: readonly string[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  let keys = [...new Set(ids)].map((id) => DefinitionItem.key(id));
  for (let attempt = 0; keys.length > 0 && attempt < 10; attempt++) {
    const batches = [];
    for (let i = 0; i < keys.length; i += 100) batches.push(DefinitionItem.batchGet(keys.slice(i, i + 100), { consistent: true }));
    keys = [];
    for (const out of await Promise.all(batches)) {
      for (const item of out.items) found.set(item.workflowId, item.document);
      keys.push(...out.unprocessed);
    }
  }
  return found;
}

/** The workflow item (strongly consistent), or undefined when there is none. */
export async function readWorkflowItem(id: string): Promise<Item | undefined> {
  const item = await WorkflowItem.get(id, { consistent: true });
  return item && item.type === WorkflowItem.type ? item : undefined;
}

/** The owner recorded on the workflow item (an eventually consistent read of that attribute), if the item exists. */
/** The `owner` and `type` of the item at a workflow's key (one GetItem of those two attributes): ownership checks. */
export function workflowOwnerItem(id: string): Promise<{ owner?: unknown; type?: unknown } | undefined> {
  return WorkflowItem.get(id, { attributes: ["owner", "type"] });
}

export async function workflowOwner(id: string): Promise<string | undefined> {
  const item = await WorkflowItem.get(id, { attributes: ["owner"] });
  return typeof item?.owner === "string" ? item.owner : undefined;
}

// ---------------------------------------------------------------------------------------------------------
// The claim's count update (shared/workflow/claim.ts, "Claiming")

/** Runnable (API.md §8.2) at `now`, and the claim recording its index under `marker` not landed yet. */
const runnable = (now: number, marker: string) =>
  when.and(
    when.exists(),
    when.eq("status", "enabled"),
    when.lt("executionCount", when.attr("maxExecution")),
    when.or(when.notExists("expiredAt"), when.gt("expiredAt", now)),
    when.or(when.notExists("startAt"), when.le("startAt", now)),
    when.notExists(marker),
  );

/** What one count update writes besides +1 on the count. */
export interface IndexTake {
  /** The attribute that records the index given (the count before the update). */
  marker: string;
  /** The claim's time: `lastRanAt` and `updatedAt`. */
  now: number;
  /** Attributes set beside the marker (a manual claim's run input). */
  also?: Item;
  /** Attributes removed by the same write (markers of claims whose executions are written). */
  removed?: readonly string[];
}

/** +1 on the count, the count before it recorded under `marker`, the run's time, `also` set, `removed` removed. */
const countActions = (take: IndexTake) => [
  add("executionCount", 1),
  copy(take.marker, "executionCount"),
  set("lastRanAt", take.now),
  set("updatedAt", take.now),
  ...Object.entries(take.also ?? {}).map(([name, value]) => set(name, value)),
  ...(take.removed ?? []).map((name) => remove(name)),
];

/**
 * Takes the next index of a runnable workflow (one conditional UpdateItem, ReturnValues UPDATED_NEW): `{index}`.
 * When the condition fails (gone, not runnable, or this claim's index already taken) the answer is the item as the
 * condition saw it (ReturnValuesOnConditionCheckFailure, so explaining costs no read): `{refused}`, undefined when
 * there is no item.
 */
export async function takeIndex(id: string, take: IndexTake): Promise<{ index: number } | { refused: Item | undefined }> {
  try {
    const updated = await WorkflowItem.update(id, countActions(take), {
      if: runnable(take.now, take.marker),
      returnValues: "UPDATED_NEW",
      returnOldOnFailure: true,
    });
    return { index: Number(updated?.[take.marker]) };
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
    // The document client leaves the item carried by the exception as raw AttributeValues.
    const raw = (err as { Item?: Record<string, AttributeValue> }).Item;
    return { refused: raw && Object.keys(raw).length > 0 ? fromAttributeValues(raw) : undefined };
  }
}

/** Transaction item: the same count update (the sweeper's, beside a check of the intent). */
export const takeIndexItem = (id: string, marker: string, now: number) =>
  WorkflowItem.tx.update(id, countActions({ marker, now }), { if: runnable(now, marker) });

/** Removes claim attributes (markers and what they keep beside them) from an existing workflow item (one UpdateItem). */
export async function removeClaimAttributes(id: string, names: readonly string[]): Promise<void> {
  if (names.length === 0) return;
  try {
    await WorkflowItem.update(
      id,
      names.map((name) => remove(name)),
      { if: when.exists() },
    );
  } catch (err) {
    if (!isConditionFailure(err)) throw err; // deleted: nothing to remove
  }
}

/** A DynamoDB AttributeValue as the low-level API carries it. */
type AttributeValue = {
  S?: string;
  N?: string;
  BOOL?: boolean;
  NULL?: boolean;
  M?: Record<string, AttributeValue>;
  L?: AttributeValue[];
  SS?: string[];
  NS?: string[];
  B?: Uint8Array;
  BS?: Uint8Array[];
};

/** The raw item of a failed condition as the document client would have read it (the workflow item's types). */
function fromAttributeValues(raw: Record<string, AttributeValue>): Item {
  const value = (v: AttributeValue): unknown => {
    if (v.S !== undefined) return v.S;
    if (v.N !== undefined) return Number(v.N);
    if (v.BOOL !== undefined) return v.BOOL;
    if (v.NULL !== undefined) return null;
    if (v.M !== undefined) return Object.fromEntries(Object.entries(v.M).map(([k, x]) => [k, value(x)]));
    if (v.L !== undefined) return v.L.map(value);
    if (v.SS !== undefined) return new Set(v.SS);
    if (v.NS !== undefined) return new Set(v.NS.map(Number));
    if (v.B !== undefined) return v.B;
    if (v.BS !== undefined) return new Set(v.BS);
    return undefined;
  };
  return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, value(v)]));
}

// ---------------------------------------------------------------------------------------------------------
// Writes that take or give back a slot of the active cap, each a transaction item beside the counter's
// (shared/workflow/slots.ts); every one is conditioned on the slot being as read (`held`).

/** The record still holds (or still does not hold) a slot, as it did when read. */
const slotIs = (held: boolean) => (held ? when.eq("holdsSlot", true) : when.or(when.notExists("holdsSlot"), when.eq("holdsSlot", false)));
/** Not past `expiredAt` at `now` (or without one). */
const unexpired = (now: number) => when.or(when.notExists("expiredAt"), when.gt("expiredAt", now));
const enabledOrDisabled = () => when.in("status", ["enabled", "disabled"]);

/**
 * Transaction item: the new workflow's item (`attributes`: the stored form, besides keys, `type` and `v`), listed
 * for its owner (gsi1) and its wallet (gsi3); only when no item has its key.
 */
export const createItem = (id: string, owner: string, wallet: string, attributes: Item) =>
  WorkflowItem.tx.put(
    id,
    { ...Keys.workflowByOwner(owner, id), ...Keys.workflowByWallet(owner, wallet, id), ...attributes },
    { if: when.notExists() },
  );

/** Transaction item: enabled (unexpired) → disabled, its slot given back. */
export const pauseItem = (id: string, held: boolean, now: number) =>
  WorkflowItem.tx.update(id, [set("status", "disabled"), set("holdsSlot", false), set("updatedAt", now)], {
    if: when.and(when.eq("status", "enabled"), unexpired(now), slotIs(held)),
  });

/** Transaction item: disabled (unexpired, holding no slot) → enabled, holding a slot. */
export const resumeItem = (id: string, now: number) =>
  WorkflowItem.tx.update(id, [set("status", "enabled"), set("holdsSlot", true), set("updatedAt", now)], {
    if: when.and(when.eq("status", "disabled"), unexpired(now), when.ne("holdsSlot", true)),
  });

/** Transaction item: the workflow's item deleted (cancel). */
export const deleteItem = (id: string, held: boolean) => WorkflowItem.tx.delete(id, { if: when.and(when.exists(), slotIs(held)) });

/**
 * Transaction item: the write that completes the workflow (API.md §8.2): `completed` with `reason`, `completedAt`
 * the claim's time `now` (at the cap: only while `executionCount >= maxExecution`) or its `expiredAt` (expired: only
 * while `expiredAt <= now`), `updatedAt = now`, the slot given back; only while enabled or disabled.
 */
export const completeItem = (id: string, held: boolean, c: { reason: string; now: number; cause: "atCap" | "expired" }) =>
  WorkflowItem.tx.update(
    id,
    [
      set("status", "completed"),
      set("completionReason", c.reason),
      c.cause === "expired" ? copy("completedAt", "expiredAt") : set("completedAt", c.now),
      set("holdsSlot", false),
      set("updatedAt", c.now),
    ],
    {
      if: when.and(
        enabledOrDisabled(),
        c.cause === "expired" ? when.le("expiredAt", c.now) : when.ge("executionCount", when.attr("maxExecution")),
        slotIs(held),
      ),
    },
  );

/**
 * Transaction item: enabled or disabled (unexpired at `endAt`) → `failed` / CONSECUTIVE_ERRORS at `endAt`, the slot
 * given back; only while the consecutive errors are still at `limit` or more.
 */
export const failItem = (id: string, held: boolean, endAt: number, limit: number) =>
  WorkflowItem.tx.update(
    id,
    [
      set("status", "failed"),
      set("completionReason", "CONSECUTIVE_ERRORS"),
      set("completedAt", endAt),
      set("holdsSlot", false),
      set("updatedAt", endAt),
    ],
    { if: when.and(enabledOrDisabled(), when.ge("consecutiveErrors", limit), unexpired(endAt), slotIs(held)) },
  );

/** Transaction item: the slot of a workflow that expired while holding it given back (only once). */
export const releaseExpiredSlotItem = (id: string, now: number) =>
  WorkflowItem.tx.update(id, [set("holdsSlot", false)], { if: when.and(when.eq("holdsSlot", true), when.le("expiredAt", now)) });

/** The ids of the owner's workflows that expired at or before `now` still holding a slot (gsi1 Query, every page). */
export async function* expiredSlotHolders(owner: string, now: number): AsyncGenerator<string[]> {
  for await (const page of WorkflowItem.pages({
    index: Index.gsi1,
    pk: Keys.workflowByOwner(owner, "").gsi1pk,
    filter: when.and(when.eq("holdsSlot", true), when.le("expiredAt", now)),
    attributes: ["id"],
  })) {
    yield page.items.map((item) => String(item.id));
  }
}

// ---------------------------------------------------------------------------------------------------------
// Consecutive errors (shared/workflow/outcome.ts)

/** The workflow's consecutive errors (strongly consistent read of that attribute); undefined without an item. */
export async function consecutiveErrorsOf(id: string): Promise<number | undefined> {
  const item = await WorkflowItem.get(id, { consistent: true, attributes: ["consecutiveErrors"] });
  return item ? Number(item.consecutiveErrors) : undefined;
}

/** Sets the consecutive errors back to 0; throws ConditionalCheckFailedException unless the item exists with some. */
export async function resetConsecutiveErrors(id: string): Promise<void> {
  await WorkflowItem.update(id, [set("consecutiveErrors", 0)], { if: when.and(when.exists(), when.gt("consecutiveErrors", 0)) });
}

/** +1 consecutive error on an existing item; the item after it. Throws ConditionalCheckFailedException without one. */
export async function countConsecutiveError(id: string): Promise<Item> {
  return (await WorkflowItem.update(id, [add("consecutiveErrors", 1)], { if: when.exists(), returnValues: "ALL_NEW" })) ?? {};
}

// ---------------------------------------------------------------------------------------------------------
// Lists and counts (patterns 11 and 12: newest first by id)

export interface ListScope {
  /** Lower-case wallet addresses; none: all the owner's workflows. */
  wallets: string[];
  /** Effective statuses (API.md §8.2) at `now`; none: all. `running` matches nothing. */
  statuses: string[];
  now: number;
}

/** Where a list reads: an index partition, and the partitions listed with it (`ListQuery.alsoFrom`). */
export type ListSource = Query & Pick<ListQuery, "alsoFrom">;

/**
 * The index partitions that serve the scope (one wallet: gsi3, and gsi2 for records written before it; else gsi1),
 * and the filter for the rest.
 */
export function listQuery(owner: string, scope: ListScope): ListSource {
  const { wallets, now } = scope;
  const terms: Condition[] = [];
  if (wallets.length > 1) {
    const keys = wallets.map((w) => Keys.workflowByWallet(owner, w, "").gsi3pk);
    terms.push(when.or(when.in("gsi3pk", keys), when.in("gsi2pk", keys)));
  }
  const statuses = new Set(scope.statuses);
  if (statuses.size > 0) {
    const alive = unexpired(now);
    const parts: Condition[] = [];
    if (statuses.has("enabled")) parts.push(when.and(when.eq("status", "enabled"), alive));
    if (statuses.has("disabled")) parts.push(when.and(when.eq("status", "disabled"), alive));
    if (statuses.has("completed"))
      parts.push(
        when.or(
          when.eq("status", "completed"),
          when.and(when.or(when.eq("status", "enabled"), when.eq("status", "disabled")), when.le("expiredAt", now)),
        ),
      );
    if (statuses.has("failed")) parts.push(when.eq("status", "failed"));
    // Only `running`: reserved, never stored, so nothing matches (every workflow item has an id).
    terms.push(parts.length > 0 ? when.or(...parts) : when.notExists("id"));
  }
  const filter = terms.length > 0 ? { filter: when.and(...terms) } : {};
  if (wallets.length !== 1) return { index: Index.gsi1, pk: Keys.workflowByOwner(owner, "").gsi1pk, ...filter };
  const pk = Keys.workflowByWallet(owner, wallets[0]!, "").gsi3pk;
  return { index: Index.gsi3, pk, alsoFrom: [{ index: Index.gsi2, pk }], ...filter };
}

/**
 * Every workflow id sorts after this: a ULID's first character is `0` until the year 3084 (the list's sort keys
 * are bare ids).
 */
const ULID_PREFIX = "0";

/** One page of the list (`listQuery`), newest first, from a cursor position (a workflow id). */
export function listWorkflows(q: ListSource, page: { limit: number; after?: string; before?: string }): Promise<ListPage<Item>> {
  return WorkflowItem.list({ ...q, sk: { beginsWith: ULID_PREFIX }, order: "desc", ...page });
}

/** How many items the list has (Select COUNT, every page of each of its partitions). */
export async function listCount(q: ListSource): Promise<number> {
  const { alsoFrom = [], ...first } = q;
  let total = 0;
  for (const source of [first, ...alsoFrom.map((partition) => ({ ...first, ...partition }))])
    for await (const page of WorkflowItem.pages({ ...source, count: true })) total += page.count;
  return total;
}

// ---------------------------------------------------------------------------------------------------------
// Reads of other records' keys that workflow operations need (the wallet and secret entities may take them)

/** Whether `address` is one of the owner's registered wallets on any chain (one Query of the wallets' keys). */
export async function isOwnersWallet(owner: string, address: string): Promise<boolean> {
  // Wallet sort keys are `WALLET#<chain>#<address lower-case>` (Keys.wallet): keys only, each compared with the key
  // Keys.wallet builds for its chain.
  const prefix = "WALLET#"; // every chain's (Keys.walletPrefix is one chain's)
  for await (const page of queryPages({
    pk: Keys.owner(owner),
    sk: { beginsWith: prefix },
    attributes: ["sk"],
    consistent: true,
  })) {
    for (const item of page.items) {
      const chainId = Number(String(item.sk).split("#")[1]);
      if (Keys.wallet(owner, chainId, address).sk === item.sk) return true;
    }
  }
  return false;
}

/** The names of the owner's secrets scoped to workflow `id` (store pattern 3: gsi1, every page). */
export async function* workflowSecretNames(owner: string, id: string): AsyncGenerator<string[]> {
  for await (const page of queryPages({
    index: Index.gsi1,
    pk: Keys.secretByWorkflow(owner, id, "").gsi1pk,
    attributes: ["name"],
  })) {
    yield page.items.map((item) => String(item.name));
  }
}
