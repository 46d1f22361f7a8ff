/**
 * Workflows (API.md §8.1, §8.2, §8.7 items 8-10, §8.8.1-§8.8.6): the stored record, its effective status, the
 * active-workflow cap, and the claim that starts an execution.
 *
 * Access patterns (shared/store/README.md):
 *
 * | Who / when                         | Reads or writes                                         | Key                                          |
 * |------------------------------------|---------------------------------------------------------|----------------------------------------------|
 * | create                             | the caller's wallets (1 Query, keys only)               | pk = OWNER#o, sk begins with WALLET#          |
 * |                                    | record + active counter (1 TransactWriteItems)          | Keys.workflow, Keys.counter(o, activeWorkflows) |
 * | retrieve, pause, resume, delete    | the record (1 strongly consistent GetItem)              | Keys.workflow(id) (pattern 10)               |
 * | list, count                        | the owner's workflows newest first (Query)              | gsi1 Keys.workflowByOwner (pattern 11)       |
 * | list, count with one wallet        | that wallet's workflows newest first (Query)            | gsi2 Keys.workflowByWallet (pattern 12)      |
 * | claim (trigger, scheduler,         | intent PutItem, 1 conditional UpdateItem (count),       | Keys.claimIntent (pattern 22) or Keys.fire   |
 * | watcher)                           | PutItem (execution), intent Delete/UpdateItem           | (17), Keys.workflow, Keys.execution (13)     |
 * |                                    | (see "Claiming")                                        |                                              |
 * | claim recovery (sweeper)           | in-flight intents oldest first (Query) + per intent     | gsi2 Keys.claimInFlight (pattern 22)         |
 * |                                    | GetItem (execution), GetItem (record), steps left       | Keys.execution, Keys.workflow                |
 * | expiry pass (sweeper)              | due expiry entries oldest first (Query) + per workflow   | gsi2 Keys.expiryDue (pattern 21)             |
 * |                                    | GetItem + 1 TransactWriteItems (record + counter)       | Keys.workflow, Keys.counter                  |
 *
 * Effective status (§8.2): a record stored `enabled` or `disabled` whose `expiredAt` is at or before now reads,
 * filters, counts and behaves as `completed` / `EXPIRED` with `completedAt = expiredAt`; nothing has to store it.
 *
 * The active cap (§4.1: enabled, unexpired workflows per owner). A record carries `holdsSlot`: true while it is
 * counted in the owner's counter `activeWorkflows`. Every write that sets `holdsSlot` changes the counter in the
 * same transaction (create and resume +1 below the cap; pause, the claim that completes it, the failure after
 * consecutive errors and delete −1), so the counter always equals the number of records holding a slot. Expiry is
 * lazy, so an expired record keeps its slot until released: when a create or resume finds the counter at the cap,
 * the owner's expired slot-holders are released first (each by one transaction: `holdsSlot` true → false with the
 * counter −1, conditioned on still holding it, so concurrent releases never double-count) and the write is tried
 * once more. The cap therefore counts exactly the enabled, unexpired workflows whenever it refuses.
 *
 * Expiry in the background (§8.2): a workflow created with `expiredAt` gets an expiry entry beside its record
 * (Keys.expiry, listed by due time through sparse gsi2, pattern 21). The sweeper's `expireDue` stores the effective
 * status (`completed` / EXPIRED, `completedAt = expiredAt`), frees the slot and removes schedules and watch entry;
 * the entry goes last, so a pass interrupted half-way is finished by the next one. Cancel and the other terminal
 * writes delete the entry too (best effort: a stale one is only deleted by the pass).
 *
 * The stored form (item version 2): what the client wrote (`name`, `trigger`, `nodes`, `edges`, `inputVariables`)
 * is one JSON text attribute, `document`; the attributes that conditions, filters and updates name (status,
 * counts, times, slot) stay attributes. Free-form JSON is therefore stored exactly as sent: DynamoDB refuses
 * empty map keys and maps nested deeper than 32 levels, and its marshaller would treat `__proto__` as a prototype
 * (API.md §18.6), none of which touches a string. Items of version 1 (those members as DynamoDB maps) read back
 * unchanged: `fromItem` decodes both forms, and every read of a workflow item goes through it.
 */
import { BatchGetCommand, DeleteCommand, GetCommand, PutCommand, QueryCommand, TransactWriteCommand, UpdateCommand, type QueryCommandInput } from "@aws-sdk/lib-dynamodb";
import { ulid } from "ulid";
import { useOwner } from "../context";
import { ApiError, notFound, quotaReached } from "../errors";
import { useRuntime } from "../runtime";
import { Keys } from "../store/keys";
import { queryPages } from "../store/query";
import { decrement, incrementBelow } from "../store/counters";
import { Index, cancellationReasons } from "../store/table";
import { checksumAddress, type Address } from "../address";
import { log } from "../log";
import { Secret } from "../secret";
import { validateDefinition } from "./definition";
import { startFiring, stopFiring } from "./scheduler";
import * as Watch from "./watch-registry";
import type { Workflow } from "./schemas";
import type { CompletionReason, StoredStatus, WorkflowRecord } from "./record";

export type { StoredStatus, CompletionReason, WorkflowRecord } from "./record";

export const ENTITY = "workflow";
const VERSION = 1;
/** Version of the workflow item: 2 keeps the client's document as JSON text (module header). */
const RECORD_VERSION = 2;
const COUNTER = "activeWorkflows";
const MAX_ATTEMPTS = 60;
const ULID_PATTERN = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** The Workflow object of API.md §8.1, as answered. */
export type WorkflowInfo = Workflow;
export type ListStatus = StoredStatus | "running";

/** A claim found a fire record already written: that fire has already produced its execution. */
export class DuplicateFire extends Error {
  constructor(readonly fireId: string) {
    super(`Fire ${fireId} was already claimed`);
    this.name = "DuplicateFire";
  }
}

type Item = Record<string, unknown>;
const table = () => useRuntime().config.tableName;
const workflowNotFound = () => notFound("WORKFLOW_NOT_FOUND", "The workflow");
const terminal = () => new ApiError(409, "WORKFLOW_TERMINAL", "The workflow is completed or failed; its status can no longer change.");
const counterKey = (owner: string) => Keys.counter(owner, COUNTER);
const errorName = (err: unknown) => (err as { name?: string }).name;
const backoff = (attempt: number) => new Promise((r) => setTimeout(r, Math.random() * 5 * Math.min(attempt, 10)));

/** An id in any letter case upper-cased, or undefined when it cannot be a workflow id (then: as unknown). */
const normaliseId = (id: string): string | undefined => (ULID_PATTERN.test(id.toUpperCase()) ? id.toUpperCase() : undefined);
const sameOwner = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
/** Condition that the record still holds (or still does not hold) a slot, as it did when read. */
const slotIs = (held: boolean) =>
  held
    ? { expression: "holdsSlot = :slotHeld", values: { ":slotHeld": true } }
    : { expression: "(attribute_not_exists(holdsSlot) OR holdsSlot = :slotHeld)", values: { ":slotHeld": false } };

// ---------------------------------------------------------------------------------------------------------
// Effective status and the Workflow object

const isExpired = (r: Pick<WorkflowRecord, "status" | "expiredAt">, now: number) =>
  (r.status === "enabled" || r.status === "disabled") && r.expiredAt !== undefined && r.expiredAt <= now;

/** §8.2: the status every read and operation sees. */
export function effectiveStatus(r: WorkflowRecord, now: number): { status: StoredStatus; completionReason?: CompletionReason; completedAt?: number } {
  if (isExpired(r, now)) return { status: "completed", completionReason: "EXPIRED", completedAt: r.expiredAt };
  if (r.status === "completed" || r.status === "failed") return { status: r.status, completionReason: r.completionReason, completedAt: r.completedAt };
  return { status: r.status };
}

/** The §8.1 Workflow object of a record at `now`. */
export function toInfo(r: WorkflowRecord, now: number): WorkflowInfo {
  const e = effectiveStatus(r, now);
  return {
    id: r.id,
    ...(r.name !== undefined ? { name: r.name } : {}),
    owner: checksumAddress(r.owner),
    smartWalletAddress: checksumAddress(r.smartWalletAddress),
    chainId: r.chainId,
    trigger: r.trigger,
    nodes: r.nodes,
    edges: r.edges,
    inputVariables: r.inputVariables,
    status: e.status,
    ...(r.startAt !== undefined ? { startAt: r.startAt } : {}),
    ...(r.expiredAt !== undefined ? { expiredAt: r.expiredAt } : {}),
    maxExecution: r.maxExecution,
    executionCount: r.executionCount,
    remainingExecutions: Math.max(0, r.maxExecution - r.executionCount),
    ...(e.completionReason !== undefined ? { completionReason: e.completionReason } : {}),
    ...(r.lastRanAt !== undefined ? { lastRanAt: r.lastRanAt } : {}),
    createdAt: r.createdAt,
    ...(e.completedAt !== undefined ? { completedAt: e.completedAt } : {}),
  };
}

/**
 * Why a workflow is not runnable at `now` (§8.8.7 order: the completion reason of a completed workflow, FAILED,
 * DISABLED, NOT_STARTED), or undefined when it is runnable.
 */
export function notRunnableReason(r: WorkflowRecord, now: number): string | undefined {
  const e = effectiveStatus(r, now);
  if (e.status === "completed") return e.completionReason ?? "MAX_EXECUTIONS_REACHED";
  if (r.executionCount >= r.maxExecution) return "MAX_EXECUTIONS_REACHED";
  if (e.status === "failed") return "FAILED";
  if (e.status === "disabled") return "DISABLED";
  if (r.startAt !== undefined && now < r.startAt) return "NOT_STARTED";
  return undefined;
}

const notRunnable = (reason: string) =>
  new ApiError(412, "WORKFLOW_NOT_RUNNABLE", "The workflow cannot run now.", { reason });

// ---------------------------------------------------------------------------------------------------------
// The stored form

/** Members of the record stored together as the JSON text attribute `document` (module header). */
const DOCUMENT_MEMBERS = ["name", "trigger", "nodes", "edges", "inputVariables"] as const;
type DocumentMember = (typeof DOCUMENT_MEMBERS)[number];

/** The item attributes of a record (besides keys, `type` and `v`): the client's document as one JSON text. */
export function toItem(record: WorkflowRecord): Item {
  const attributes: Item = {};
  const document: Item = {};
  for (const [member, value] of Object.entries(record)) {
    if (value === undefined) continue;
    if ((DOCUMENT_MEMBERS as readonly string[]).includes(member)) document[member] = value;
    else attributes[member] = value;
  }
  return { ...attributes, document: JSON.stringify(document) };
}

/**
 * The record of a stored workflow item of either version: version 2 keeps `document` (JSON text), version 1
 * (written before it) the same members as DynamoDB maps and lists, which are taken as they are.
 */
export function fromItem(item: Item): WorkflowRecord {
  if (typeof item.document !== "string") return item as unknown as WorkflowRecord;
  const { document, ...attributes } = item;
  const parsed = JSON.parse(document) as Partial<Pick<WorkflowRecord, DocumentMember>>;
  // Spread and JSON.parse define members as data, so keys such as `__proto__` inside the document stay data.
  return { ...attributes, ...parsed } as unknown as WorkflowRecord;
}

// ---------------------------------------------------------------------------------------------------------
// Reading

async function read(id: string): Promise<WorkflowRecord | undefined> {
  const { Item } = await useRuntime().db.send(new GetCommand({ TableName: table(), Key: Keys.workflow(id), ConsistentRead: true }));
  return Item && Item.type === ENTITY ? fromItem(Item) : undefined;
}

/** The caller's workflow record, or 404 WORKFLOW_NOT_FOUND (unknown, malformed, deleted or another owner's alike). */
export async function requireOwned(rawId: string): Promise<WorkflowRecord> {
  const owner = useOwner();
  const id = normaliseId(rawId);
  const record = id ? await read(id) : undefined;
  if (!record || !sameOwner(record.owner, owner)) throw workflowNotFound();
  return record;
}

/** GET /workflows/{id}: the caller's workflow (§8.8.4). */
export async function getOwned(id: string): Promise<WorkflowInfo> {
  const record = await requireOwned(id);
  return toInfo(record, useRuntime().now());
}

/** The record for a run, whoever asks (runner, scheduler, watcher); undefined once deleted. */
export async function getForRun(id: string): Promise<WorkflowRecord | undefined> {
  const normalised = normaliseId(id);
  return normalised ? read(normalised) : undefined;
}

// ---------------------------------------------------------------------------------------------------------
// Create (§8.8.1)

/** Canonical JSON (members sorted at every level, no spaces): the form whose UTF-8 size §4.1 limits. */
function canonicalJson(value: unknown): string {
  const sort = (x: unknown): unknown =>
    Array.isArray(x)
      ? x.map(sort)
      : x !== null && typeof x === "object"
        ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, sort((x as Item)[k])]))
        : x;
  return JSON.stringify(sort(value));
}

/** §8.7 item 9: `address` is one of the owner's registered wallets on any chain (hidden ones included). */
async function isRegisteredWallet(owner: Address, address: Address): Promise<boolean> {
  // Wallet sort keys are `WALLET#<chain>#<address lower-case>` (Keys.wallet): one Query over the owner's wallets,
  // keys only; each is compared with the key Keys.wallet builds for its chain.
  for await (const out of queryPages({
    TableName: table(),
    KeyConditionExpression: "pk = :pk AND begins_with(sk, :prefix)",
    ExpressionAttributeValues: { ":pk": Keys.owner(owner), ":prefix": "WALLET#" },
    ProjectionExpression: "sk",
    ConsistentRead: true,
  })) {
    for (const item of out.Items ?? []) {
      const chainId = Number(String(item.sk).split("#")[1]);
      if (Keys.wallet(owner, chainId, address).sk === item.sk) return true;
    }
  }
  return false;
}

/** POST /workflows: validates (§8.7 in order), stores the workflow `enabled` holding a slot of the cap, answers it. */
export async function create(body: Record<string, unknown>): Promise<WorkflowInfo> {
  const owner = useOwner();
  const { config, now: clock } = useRuntime();
  const now = clock();
  const { definition } = validateDefinition(body, {
    mode: "create",
    now,
    limits: config.limits,
    chains: config.chains.map((c) => ({ chainId: c.chainId, blockTimeSeconds: c.blockTimeSeconds })),
    defaultChainId: config.defaultChainId,
  });

  const id = ulid(now);
  const record: WorkflowRecord = {
    id,
    owner: checksumAddress(owner),
    ...(definition.name !== undefined ? { name: definition.name } : {}),
    smartWalletAddress: checksumAddress(definition.smartWalletAddress),
    chainId: definition.chainId,
    trigger: definition.trigger,
    nodes: definition.nodes,
    edges: definition.edges,
    inputVariables: definition.inputVariables,
    status: "enabled",
    ...(definition.startAt !== undefined ? { startAt: definition.startAt } : {}),
    ...(definition.expiredAt !== undefined ? { expiredAt: definition.expiredAt } : {}),
    maxExecution: definition.maxExecution,
    executionCount: 0,
    createdAt: now,
    updatedAt: now,
    consecutiveErrors: 0,
    holdsSlot: true,
  };
  const info = toInfo(record, now);

  // Item 8: the stored document is the Workflow object as created.
  const size = Buffer.byteLength(canonicalJson(info), "utf8");
  if (size > config.limits.maxWorkflowBytes) {
    throw new ApiError(413, "PAYLOAD_TOO_LARGE", `The stored workflow document would be ${size} bytes; at most ${config.limits.maxWorkflowBytes} are allowed.`);
  }
  // Item 9.
  if (!(await isRegisteredWallet(owner, record.smartWalletAddress))) {
    throw new ApiError(400, "WALLET_NOT_OWNED", "smartWalletAddress is not a wallet registered by the caller.", {
      errors: [{ path: "body.smartWalletAddress", message: "is not one of the caller's registered wallets" }],
    });
  }
  // Item 10, with the record in the same transaction.
  const item = {
    ...Keys.workflow(id),
    ...Keys.workflowByOwner(owner, id),
    ...Keys.workflowByWallet(owner, record.smartWalletAddress, id),
    type: ENTITY,
    v: RECORD_VERSION,
    ...toItem(record),
  };
  const expiry =
    record.expiredAt === undefined
      ? []
      : [{ Put: { TableName: table(), Item: { ...Keys.expiry(id), ...Keys.expiryDue(record.expiredAt, id), type: "expiry", v: VERSION, workflowId: id, expiredAt: record.expiredAt } } }];
  await takeSlot(owner, () => ({ Put: { TableName: table(), Item: item, ConditionExpression: "attribute_not_exists(pk)" } }), expiry);
  await startFiring(record, now);
  await Watch.watch(record, now);
  return info;
}

/**
 * Runs `write` (one transaction item) together with +1 on the owner's active counter below the cap. At the cap the
 * owner's expired slot-holders are released once and it is tried again; then 429 WORKFLOWS_LIMIT_REACHED.
 * Returns false when `write`'s own condition failed (the caller re-reads and decides). `also`: more items written
 * in the same transaction, after the counter.
 */
async function takeSlot(owner: Address, write: () => Record<string, unknown>, also: Record<string, unknown>[] = []): Promise<boolean> {
  const max = useRuntime().config.limits.maxActiveWorkflowsPerOwner;
  let released = false;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    try {
      await useRuntime().db.send(new TransactWriteCommand({ TransactItems: [write(), incrementBelow(table(), counterKey(owner), max), ...also] as never }));
      return true;
    } catch (err) {
      if (errorName(err) !== "TransactionCanceledException") throw err;
      const [recordReason, counterReason] = cancellationReasons(err);
      if (recordReason === "ConditionalCheckFailed") return false;
      if (counterReason === "ConditionalCheckFailed") {
        if (released) throw quotaReached("WORKFLOWS_LIMIT_REACHED", "active workflows", max);
        await releaseExpiredSlots(owner, useRuntime().now());
        released = true;
        continue;
      }
      await backoff(attempt); // TransactionConflict
    }
  }
  throw new Error("Workflow write kept conflicting with concurrent writes");
}

/** Gives back the slots of the owner's workflows that expired while holding one; returns how many. */
async function releaseExpiredSlots(owner: Address, now: number): Promise<number> {
  let released = 0;
  for await (const out of queryPages({
    TableName: table(),
    IndexName: Index.gsi1,
    KeyConditionExpression: "gsi1pk = :pk",
    FilterExpression: "holdsSlot = :true AND expiredAt <= :now",
    ExpressionAttributeValues: { ":pk": Keys.workflowByOwner(owner, "").gsi1pk, ":true": true, ":now": now },
    ProjectionExpression: "id",
  })) {
    for (const item of out.Items ?? []) {
      try {
        await useRuntime().db.send(
          new TransactWriteCommand({
            TransactItems: [
              {
                Update: {
                  TableName: table(),
                  Key: Keys.workflow(String(item.id)),
                  UpdateExpression: "SET holdsSlot = :false",
                  ConditionExpression: "holdsSlot = :true AND expiredAt <= :now",
                  ExpressionAttributeValues: { ":true": true, ":false": false, ":now": now },
                },
              },
              decrement(table(), counterKey(owner)),
            ],
          }),
        );
        released += 1;
      } catch (err) {
        if (errorName(err) !== "TransactionCanceledException") throw err; // released meanwhile: fine
      }
    }
  }
  if (released > 0) log.info("released slots of expired workflows", { owner: owner.toLowerCase(), released });
  return released;
}

// ---------------------------------------------------------------------------------------------------------
// List and count (§8.8.2, §8.8.3)

export interface ListFilter {
  /** EIP-55 or any case; none: all of the caller's workflows. */
  smartWalletAddress: string[];
  /** Effective statuses; none: all. `running` matches nothing. */
  status: ListStatus[];
}

interface ScopedQuery {
  index: string;
  pkName: string;
  pk: string;
  skName: string;
  filter?: { expression: string; names: Record<string, string>; values: Record<string, unknown> };
}

/** Which index partition serves the filter, and the FilterExpression for the rest (effective status at `now`). */
function scopedQuery(owner: Address, f: ListFilter, now: number): ScopedQuery {
  const wallets = [...new Set(f.smartWalletAddress.map((a) => a.toLowerCase()))];
  const byWallet = wallets.length === 1;
  const terms: string[] = [];
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = {};

  if (wallets.length > 1) {
    names["#w"] = "gsi2pk";
    const keys = wallets.map((w, i) => {
      values[`:w${i}`] = Keys.workflowByWallet(owner, w, "").gsi2pk;
      return `:w${i}`;
    });
    terms.push(`#w IN (${keys.join(", ")})`);
  }

  const statuses = new Set(f.status);
  if (statuses.size > 0) {
    const alive = "(attribute_not_exists(#exp) OR #exp > :now)";
    const parts: string[] = [];
    if (statuses.has("enabled")) parts.push(`(#st = :enabled AND ${alive})`);
    if (statuses.has("disabled")) parts.push(`(#st = :disabled AND ${alive})`);
    if (statuses.has("completed")) parts.push("(#st = :completed OR ((#st = :enabled OR #st = :disabled) AND #exp <= :now))");
    if (statuses.has("failed")) parts.push("#st = :failed");
    if (parts.length === 0) {
      // Only `running`: reserved, never stored, so nothing matches (every workflow item has an id).
      names["#id"] = "id";
      parts.push("attribute_not_exists(#id)");
    }
    // DynamoDB refuses redundant parentheses: wrap only an OR of several parts.
    const expression = parts.length === 1 ? parts[0]! : `(${parts.join(" OR ")})`;
    // Expression values must all be used: declare exactly the ones the expression names.
    if (expression.includes("#st")) names["#st"] = "status";
    if (expression.includes("#exp")) names["#exp"] = "expiredAt";
    for (const name of ["now", "enabled", "disabled", "completed", "failed"]) {
      if (new RegExp(`:${name}\\b`).test(expression)) values[`:${name}`] = name === "now" ? now : name;
    }
    terms.push(expression);
  }

  const scope = byWallet
    ? { index: Index.gsi2, pkName: "gsi2pk", pk: Keys.workflowByWallet(owner, wallets[0]!, "").gsi2pk, skName: "gsi2sk" }
    : { index: Index.gsi1, pkName: "gsi1pk", pk: Keys.workflowByOwner(owner, "").gsi1pk, skName: "gsi1sk" };
  return terms.length > 0 ? { ...scope, filter: { expression: terms.join(" AND "), names, values } } : scope;
}

/**
 * Reads up to `want` items from position `from` (a workflow id; none: the newest) along the list order (newest
 * first, `forward`) or against it. Sort keys are bare ULIDs, so positions are key conditions (`<`, `<=`, `>`, `>=`)
 * rather than a prefix range.
 */
async function collect(q: ScopedQuery, walk: { from?: string; forward: boolean; inclusive: boolean; want: number }): Promise<Item[]> {
  const op = walk.forward ? (walk.inclusive ? "<=" : "<") : walk.inclusive ? ">=" : ">";
  const input: QueryCommandInput = {
    TableName: table(),
    IndexName: q.index,
    KeyConditionExpression: walk.from === undefined ? "#pk = :pk" : `#pk = :pk AND #sk ${op} :from`,
    ExpressionAttributeNames: { "#pk": q.pkName, ...(walk.from === undefined ? {} : { "#sk": q.skName }), ...q.filter?.names },
    ExpressionAttributeValues: { ":pk": q.pk, ...(walk.from === undefined ? {} : { ":from": walk.from }), ...q.filter?.values },
    FilterExpression: q.filter?.expression,
    ScanIndexForward: !walk.forward,
  };
  const out: Item[] = [];
  let startKey: Item | undefined;
  do {
    const page = await useRuntime().db.send(
      new QueryCommand({ ...input, ExclusiveStartKey: startKey, Limit: q.filter ? Math.max(50, walk.want * 2) : walk.want + 1 }),
    );
    for (const item of page.Items ?? []) {
      out.push(item);
      if (out.length >= walk.want) return out;
    }
    startKey = page.LastEvaluatedKey;
  } while (startKey);
  return out;
}

export interface Page {
  limit: number;
  /** Decoded cursor positions (workflow ids). */
  after?: string;
  before?: string;
}

/** One page of the caller's workflows, newest first, with the §3 page booleans. */
export async function list(filter: ListFilter, page: Page) {
  const owner = useOwner();
  const now = useRuntime().now();
  for (const position of [page.after, page.before]) {
    if (position !== undefined && !ULID_PATTERN.test(position)) throw new ApiError(400, "INVALID_CURSOR", "The cursor is not valid for this list.");
  }
  const q = scopedQuery(owner, filter, now);
  let items: Item[];
  let hasNextPage: boolean;
  let hasPreviousPage: boolean;
  if (page.before !== undefined) {
    const preceding = await collect(q, { from: page.before, forward: false, inclusive: false, want: page.limit + 1 });
    const rest = await collect(q, { from: page.before, forward: true, inclusive: true, want: 1 });
    items = preceding.slice(0, page.limit).reverse();
    hasPreviousPage = preceding.length > page.limit;
    hasNextPage = rest.length > 0;
  } else {
    const following = await collect(q, { from: page.after, forward: true, inclusive: false, want: page.limit + 1 });
    items = following.slice(0, page.limit);
    hasNextPage = following.length > page.limit;
    hasPreviousPage = page.after !== undefined && (await collect(q, { from: page.after, forward: false, inclusive: true, want: 1 })).length > 0;
  }
  return { items: items.map((item) => toInfo(fromItem(item), now)), hasNextPage, hasPreviousPage };
}

/** GET /workflows:count: how many of the caller's workflows match. */
export async function count(filter: ListFilter): Promise<number> {
  const q = scopedQuery(useOwner(), filter, useRuntime().now());
  let total = 0;
  for await (const out of queryPages({
    TableName: table(),
    IndexName: q.index,
    KeyConditionExpression: "#pk = :pk",
    ExpressionAttributeNames: { "#pk": q.pkName, ...q.filter?.names },
    ExpressionAttributeValues: { ":pk": q.pk, ...q.filter?.values },
    FilterExpression: q.filter?.expression,
    Select: "COUNT",
  })) {
    total += out.Count ?? 0;
  }
  return total;
}

// ---------------------------------------------------------------------------------------------------------
// Pause, resume (§8.8.6)

/** POST /workflows/{id}:pause: enabled → disabled (its slot freed); disabled stays; terminal → 409. */
export async function pause(rawId: string): Promise<WorkflowInfo> {
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const record = await requireOwned(rawId);
    const now = useRuntime().now();
    const e = effectiveStatus(record, now);
    if (e.status === "completed" || e.status === "failed") throw terminal();
    if (e.status === "disabled") return toInfo(record, now);
    const slot = slotIs(record.holdsSlot === true);
    const update = {
      Update: {
        TableName: table(),
        Key: Keys.workflow(record.id),
        UpdateExpression: "SET #st = :disabled, holdsSlot = :false, updatedAt = :now",
        ConditionExpression: `#st = :enabled AND (attribute_not_exists(expiredAt) OR expiredAt > :now) AND ${slot.expression}`,
        ExpressionAttributeNames: { "#st": "status" },
        ExpressionAttributeValues: { ":disabled": "disabled", ":enabled": "enabled", ":false": false, ":now": now, ...slot.values },
      },
    };
    const written = await writeReleasingSlot(record.owner, update, record.holdsSlot === true);
    if (written) {
      await stopFiring(record);
      await Watch.unwatch(record.id);
      return toInfo({ ...record, status: "disabled", holdsSlot: false, updatedAt: now }, now);
    }
    await backoff(attempt);
  }
  throw new Error("Workflow pause kept conflicting with concurrent writes");
}

/** POST /workflows/{id}:resume: disabled → enabled under the cap (429); enabled stays (no quota check); terminal → 409. */
export async function resume(rawId: string): Promise<WorkflowInfo> {
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const record = await requireOwned(rawId);
    const now = useRuntime().now();
    const e = effectiveStatus(record, now);
    if (e.status === "completed" || e.status === "failed") throw terminal();
    if (e.status === "enabled") return toInfo(record, now);
    const written = await takeSlot(record.owner, () => ({
      Update: {
        TableName: table(),
        Key: Keys.workflow(record.id),
        UpdateExpression: "SET #st = :enabled, holdsSlot = :true, updatedAt = :now",
        ConditionExpression: "#st = :disabled AND (attribute_not_exists(expiredAt) OR expiredAt > :now) AND holdsSlot <> :true",
        ExpressionAttributeNames: { "#st": "status" },
        ExpressionAttributeValues: { ":disabled": "disabled", ":enabled": "enabled", ":true": true, ":now": now },
      },
    }));
    if (written) {
      await startFiring(record, now);
      await Watch.watch(record, now);
      return toInfo({ ...record, status: "enabled", holdsSlot: true, updatedAt: now }, now);
    }
    await backoff(attempt);
  }
  throw new Error("Workflow resume kept conflicting with concurrent writes");
}

/**
 * Runs `write` (one transaction item on a workflow) with −1 on the owner's counter when `release`. A counter that
 * is already zero (out of step, e.g. records written before the counter existed) never blocks the write: it is
 * then done alone. Returns false when `write`'s condition failed.
 */
async function writeReleasingSlot(owner: Address, write: Record<string, unknown>, release: boolean): Promise<boolean> {
  const { db } = useRuntime();
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const items = release ? [write, decrement(table(), counterKey(owner))] : [write];
    try {
      await db.send(new TransactWriteCommand({ TransactItems: items as never }));
      return true;
    } catch (err) {
      if (errorName(err) !== "TransactionCanceledException") throw err;
      const [recordReason, counterReason] = cancellationReasons(err);
      if (recordReason === "ConditionalCheckFailed") return false;
      if (counterReason === "ConditionalCheckFailed") {
        log.warn("active workflow counter out of step; writing without decrement", { owner: owner.toLowerCase() });
        release = false;
        continue;
      }
      await backoff(attempt);
    }
  }
  throw new Error("Workflow write kept conflicting with concurrent writes");
}

// ---------------------------------------------------------------------------------------------------------
// Cancel (§8.8.5)

/**
 * DELETE /workflows/{id}: always succeeds. For the caller's workflow: the record goes at once (its slot freed),
 * automatic firing stops, and its workflow-scoped secrets are deleted. Executions are untouched (pattern 13 lives
 * in its own partition). Another owner's workflow is left alone; unknown and malformed ids do nothing.
 */
export async function remove(rawId: string): Promise<void> {
  const owner = useOwner();
  const id = normaliseId(rawId);
  if (!id) return;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const record = await read(id);
    if (record && !sameOwner(record.owner, owner)) return;
    if (record) {
      const held = record.holdsSlot === true;
      const slot = slotIs(held);
      const del = {
        Delete: {
          TableName: table(),
          Key: Keys.workflow(id),
          ConditionExpression: `attribute_exists(pk) AND ${slot.expression}`,
          ExpressionAttributeValues: slot.values,
        },
      };
      if (!(await writeReleasingSlot(record.owner, del, held))) {
        await backoff(attempt);
        continue;
      }
      await stopAutomaticFiring(record);
    }
    // Also when the record was already gone: a retried delete finishes what an interrupted one began.
    await removeWorkflowSecrets(id);
    return;
  }
  throw new Error("Workflow delete kept conflicting with concurrent writes");
}

/** The caller's secrets scoped to workflow `id` (store pattern 3), each deleted by the secrets module. */
async function removeWorkflowSecrets(id: string): Promise<void> {
  const owner = useOwner();
  for await (const out of queryPages({
    TableName: table(),
    IndexName: Index.gsi1,
    KeyConditionExpression: "gsi1pk = :pk",
    ExpressionAttributeValues: { ":pk": Keys.secretByWorkflow(owner, id, "").gsi1pk },
    ProjectionExpression: "#name",
    ExpressionAttributeNames: { "#name": "name" },
  })) {
    for (const item of out.Items ?? []) await Secret.remove(String(item.name), { workflowId: id });
  }
}

/**
 * Seam for automatic firing: the scheduler (cron, fixedTime: store pattern 16) and the chain watchers (block,
 * event: pattern 19) remove the workflow's schedule and watch entries here when they exist. Until then there is
 * nothing to remove; a fire that still arrives finds no record (`getForRun` → undefined) and runs nothing.
 */
async function stopAutomaticFiring(record: WorkflowRecord): Promise<void> {
  await stopFiring(record);
  await Watch.unwatch(record.id);
  await forgetExpiry(record.id);
}

/** Deletes the workflow's expiry entry (pattern 21), if any. */
async function forgetExpiry(id: string): Promise<void> {
  await useRuntime().db.send(new DeleteCommand({ TableName: table(), Key: Keys.expiry(id) }));
}

// ---------------------------------------------------------------------------------------------------------
// Claiming an execution (§8.8.7, §8.2, §18.4) and recording its outcome
//
// Concurrent claims of one workflow must neither conflict nor answer 5xx (API.md §18.4), so the one write every
// claim makes to the workflow item is a single conditional UpdateItem: it checks runnable (enabled, started,
// unexpired, `executionCount < maxExecution`) and adds 1 to the count in one step. DynamoDB applies concurrent
// updates of one item one after the other, each against the item as the previous one left it: no version check
// to lose, no transaction to cancel (a TransactWriteItems that includes a contended item is cancelled with
// TransactionConflict on AWS, which DynamoDB Local does not reproduce), so every claim either gets the next index
// at its first attempt or fails its condition (412). The rest of the claim is written around that update:
//
// 1. the intent (pattern 22; for an automatic fire its fire record, pattern 17, whose conditional put is also the
//    at-most-once guard of §8.3.7: a duplicate stops here, before any index is taken), holding the execution item
//    to write and listed on a sparse index while in flight;
// 2. the count update, which also stores the index it gives as an attribute named after the intent
//    (`claim#<intent pk>` = the count before the update, ReturnValues UPDATED_NEW), so the index is recorded
//    atomically with being taken;
// 3. completion when that index is the last (§8.2: `completed` / MAX_EXECUTIONS_REACHED, completedAt = the claim's
//    time, the active slot released with the counter), before the execution is written;
// 4. the execution item with that index (a conditional put: writing it again is a no-op);
// 5. the intent closed (deleted; a fire record keeps guarding its fire, no longer listed as in flight), off the
//    claim's path.
//
// A crash between the steps loses nothing and leaves no gap: the sweeper (`recoverClaims`) reads intents still in
// flight a minute after their claim. An intent whose index attribute exists finishes steps 3-5 with that index and
// its run is handed over; a fire's intent without one (the crash came before step 2) is claimed then (step 2 in a
// transaction with a check that the intent is still in flight, so a claimer that was only slow cannot take a second
// index); a manual trigger's intent without one is dropped (its caller got no answer with an execution). Index
// attributes are removed by a later claim's count update once their intents are closed (when a claim reads 8 or
// more, a strongly consistent BatchGetItem tells which), so a finished claim costs the workflow item no second
// write.

/** Attribute of the workflow item recording the index a claim took: `claim#` + the intent's partition key. */
const MARKER_PREFIX = "claim#";
const markerOf = (intentPk: string) => `${MARKER_PREFIX}${intentPk}`;
const intentKeyOf = (marker: string): { pk: string; sk: string } => {
  const pk = marker.slice(MARKER_PREFIX.length);
  return pk.startsWith("FIRE#") ? Keys.fire(pk.slice("FIRE#".length)) : Keys.claimIntent(pk.slice("CLAIM#".length));
};
/**
 * Index attributes are cleaned up once a claim reads at least `MARKERS_BEFORE_CLEANUP` of them (so most claims
 * make no extra read), at most `MARKERS_PER_CLEANUP` by one count update (a later claim removes the rest).
 */
const MARKERS_BEFORE_CLEANUP = 8;
const MARKERS_PER_CLEANUP = 50;
/** Attempts of the count update: conditional failures answer at once, so only TransactionConflict (a pause,
 *  resume, delete or completion transaction on the item in flight on AWS) and throttling try again. */
const CLAIM_ATTEMPTS = 20;
/** A manual trigger's intent outlives any claim by far (TTL); a fire record keeps the fire's own expiry. */
const INTENT_TTL_S = 24 * 3600;
/** The sweeper takes over an intent still in flight this long after its claim began. */
export const CLAIM_RECOVERY_AFTER_MS = 60_000;
const RETRYABLE = new Set(["TransactionConflictException", "ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded"]);

/** This process's count updates tried and claims made: attempts per execution is the contention measure (bench). */
export const claimStats = { attempts: 0, claimed: 0 };

export interface ClaimOptions {
  now: number;
  /** When given, the workflow must belong to this owner (else 404). */
  owner?: Address;
  /** The execution item to write `pending` (with its keys); its `index` is set by the claim. Called once. */
  execution: (index: number, workflow: WorkflowRecord) => Record<string, unknown>;
  /** At most one execution per fire: its record is the claim's intent; an existing one → DuplicateFire. `expiresAt`: unix seconds (TTL). */
  fire?: { fireId: string; expiresAt: number };
  /** The record as the caller has just read it (strongly consistent): saves the claim its own read. */
  record?: WorkflowRecord;
  /** Tests only: stop as a crash would, after the intent or after the count update. */
  crashAt?: "afterIntent" | "afterCount";
}

/** What a test's `crashAt` throws. */
export class SimulatedCrash extends Error {
  constructor(at: string) {
    super(`simulated crash ${at}`);
    this.name = "SimulatedCrash";
  }
}

interface Intent {
  key: { pk: string; sk: string };
  isFire: boolean;
  workflowId: string;
  /** The execution item to write (its `index` set once known). */
  execution: Record<string, unknown>;
  /** The claim's time: the execution's startAt, and completedAt when it completes the workflow. */
  at: number;
}

/**
 * Claims one execution (module section above): intent, count update, completion at the cap, execution item,
 * intent closed. Throws 404 WORKFLOW_NOT_FOUND (missing or another owner's), 412 WORKFLOW_NOT_RUNNABLE with
 * `reason` (checked on the caller's read first, then atomically by the update), DuplicateFire.
 */
export async function claim(id: string, opts: ClaimOptions): Promise<{ workflow: WorkflowRecord; index: number }> {
  const { now } = opts;
  const record = opts.record ?? (await getForRun(id));
  if (!record || (opts.owner !== undefined && !sameOwner(record.owner, opts.owner))) throw workflowNotFound();
  const reason = notRunnableReason(record, now);
  if (reason) throw notRunnable(reason);

  const execution = opts.execution(-1, record);
  const executionId = String(execution.id);
  const intent: Intent = {
    key: opts.fire ? Keys.fire(opts.fire.fireId) : Keys.claimIntent(executionId),
    isFire: opts.fire !== undefined,
    workflowId: record.id,
    execution,
    at: now,
  };
  const expiresAt = opts.fire ? opts.fire.expiresAt : Math.floor(now / 1000) + INTENT_TTL_S;
  // The cleanup is best effort: its failure must not fail the claim (nor surface unhandled when the intent fails).
  const cleanup = closedMarkers(record).catch(() => [] as string[]);
  const [, closed] = await Promise.all([writeIntent(intent, expiresAt, opts.fire?.fireId), cleanup]);
  if (opts.crashAt === "afterIntent") throw new SimulatedCrash(opts.crashAt);

  let index: number;
  try {
    index = await takeIndex(record.id, markerOf(intent.key.pk), now, closed);
  } catch (err) {
    // 404 or 412: nothing was claimed (a fire stays consumed). Anything else may have landed: the sweeper decides.
    if (err instanceof ApiError) await closeIntent(intent);
    throw err;
  }
  if (opts.crashAt === "afterCount") throw new SimulatedCrash(opts.crashAt);
  return finishClaim(record, intent, index);
}

async function writeIntent(intent: Intent, expiresAt: number, fireId?: string): Promise<void> {
  const executionId = String(intent.execution.id);
  try {
    await useRuntime().db.send(
      new PutCommand({
        TableName: table(),
        Item: {
          ...intent.key,
          ...Keys.claimInFlight(intent.at, executionId),
          type: intent.isFire ? "fire" : "claim",
          v: VERSION,
          workflowId: intent.workflowId,
          executionId,
          claimedAt: intent.at,
          // As a map: the execution item's attributes are DynamoDB values already (as JSON text its strings'
          // escapes could double a 200 KB run input past the item limit).
          execution: intent.execution,
          expiresAt,
        },
        ConditionExpression: "attribute_not_exists(pk)",
      }),
    );
  } catch (err) {
    if (errorName(err) !== "ConditionalCheckFailedException") throw err;
    if (fireId !== undefined) throw new DuplicateFire(fireId);
    throw new Error(`Claim intent for execution ${executionId} already exists`);
  }
}

/**
 * The count update (module section, step 2): +1 below `maxExecution` on a runnable workflow, recording the index
 * it gives under `marker`, and removing the index attributes of closed claims. A failed condition is answered from
 * one strongly consistent read: the index when this claim's own update had already landed (a retried request, or
 * the sweeper finishing it), else the 412 reason; if the read finds the workflow runnable again (resumed in
 * between) the update is tried again.
 */
async function takeIndex(id: string, marker: string, now: number, closed: string[]): Promise<number> {
  const { db } = useRuntime();
  const names: Record<string, string> = { "#st": "status", "#count": "executionCount", "#m": marker };
  closed.forEach((name, i) => (names[`#d${i}`] = name));
  let update = "SET #count = #count + :one, #m = #count, lastRanAt = :now, updatedAt = :now";
  if (closed.length > 0) update += ` REMOVE ${closed.map((_, i) => `#d${i}`).join(", ")}`;
  for (let attempt = 1; attempt <= CLAIM_ATTEMPTS; attempt++) {
    claimStats.attempts += 1;
    try {
      const out = await db.send(
        new UpdateCommand({
          TableName: table(),
          Key: Keys.workflow(id),
          UpdateExpression: update,
          ConditionExpression: RUNNABLE_CONDITION,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: { ":enabled": "enabled", ":one": 1, ":now": now },
          ReturnValues: "UPDATED_NEW",
        }),
      );
      return Number(out.Attributes?.[marker]);
    } catch (err) {
      const name = errorName(err);
      if (name === "ConditionalCheckFailedException") {
        const current = await read(id);
        if (!current) throw workflowNotFound();
        const taken = indexOf(current, marker);
        if (taken !== undefined) return taken;
        const reason = notRunnableReason(current, now);
        if (reason) throw notRunnable(reason);
        continue;
      }
      if (!RETRYABLE.has(name ?? "")) throw err;
      await backoff(attempt);
    }
  }
  throw new Error("Workflow claim kept meeting transactions on the workflow item");
}

/** Runnable (§8.2) at `:now`, and this claim's index not taken yet. */
const RUNNABLE_CONDITION =
  "attribute_exists(pk) AND #st = :enabled AND #count < maxExecution" +
  " AND (attribute_not_exists(expiredAt) OR expiredAt > :now) AND (attribute_not_exists(startAt) OR startAt <= :now)" +
  " AND attribute_not_exists(#m)";

const indexOf = (record: WorkflowRecord, marker: string): number | undefined => {
  const value = (record as unknown as Item)[marker];
  return typeof value === "number" ? value : undefined;
};

/** Steps 3-5 for a claim that holds `index`: completion at the cap, the execution item, the intent closed. */
async function finishClaim(record: WorkflowRecord, intent: Intent, index: number): Promise<{ workflow: WorkflowRecord; index: number }> {
  const completes = index + 1 >= record.maxExecution;
  if (completes) await completeAtCap(record.id, intent.at);
  try {
    await useRuntime().db.send(
      new PutCommand({ TableName: table(), Item: { ...intent.execution, index }, ConditionExpression: "attribute_not_exists(pk)" }),
    );
  } catch (err) {
    if (errorName(err) !== "ConditionalCheckFailedException") throw err; // written already (the sweeper, or a retry)
  }
  // Not awaited: nothing waits on it, and if it never lands the sweeper finds the execution written and closes it.
  closeIntent(intent).catch((err: unknown) => log.warn("could not close a claim intent", { intent: intent.key.pk, error: (err as Error).message }));
  claimStats.claimed += 1;
  const at = intent.at;
  return {
    workflow: {
      ...record,
      executionCount: index + 1,
      lastRanAt: at,
      updatedAt: at,
      ...(completes ? { status: "completed" as const, completionReason: "MAX_EXECUTIONS_REACHED" as const, completedAt: at, holdsSlot: false } : {}),
    },
    index,
  };
}

/** A manual trigger's intent is deleted; a fire record stays (it guards its fire) without the in-flight listing. */
async function closeIntent(intent: Pick<Intent, "key" | "isFire">): Promise<void> {
  const { db } = useRuntime();
  if (!intent.isFire) {
    await db.send(new DeleteCommand({ TableName: table(), Key: intent.key }));
    return;
  }
  try {
    await db.send(
      new UpdateCommand({
        TableName: table(),
        Key: intent.key,
        UpdateExpression: "REMOVE gsi2pk, gsi2sk, #execution",
        ConditionExpression: "attribute_exists(pk)",
        ExpressionAttributeNames: { "#execution": "execution" },
      }),
    );
  } catch (err) {
    if (errorName(err) !== "ConditionalCheckFailedException") throw err; // expired and removed: nothing to close
  }
}

/**
 * Index attributes on `record` whose intents are closed (strongly consistent BatchGetItem of the intents' keys):
 * safe to remove, since an intent is closed only after its execution is written. Unanswered keys count as open.
 */
async function closedMarkers(record: WorkflowRecord): Promise<string[]> {
  const markers = Object.keys(record).filter((k) => k.startsWith(MARKER_PREFIX)).slice(0, MARKERS_PER_CLEANUP);
  if (markers.length < MARKERS_BEFORE_CLEANUP) return [];
  const out = await useRuntime().db.send(
    new BatchGetCommand({
      RequestItems: {
        [table()]: { Keys: markers.map(intentKeyOf), ConsistentRead: true, ProjectionExpression: "pk, gsi2pk" },
      },
    }),
  );
  const open = new Set<string>();
  for (const item of out.Responses?.[table()] ?? []) if (item.gsi2pk !== undefined) open.add(String(item.pk));
  for (const key of (out.UnprocessedKeys?.[table()]?.Keys ?? []) as Item[]) open.add(String(key.pk));
  return markers.filter((m) => !open.has(intentKeyOf(m).pk));
}

/**
 * The write that completes workflow `id` (§8.2): status `completed` with `reason`, `completedAt` set to the update
 * expression's operand `completedAt` (":now", or an attribute such as "expiredAt"), `updatedAt` = `now`, the active
 * slot released; only while the workflow is enabled or disabled, `condition` holds and its slot is as read (`held`).
 */
function completionUpdate(id: string, held: boolean, c: { reason: CompletionReason; completedAt: ":now" | "expiredAt"; condition: string; now: number }) {
  const slot = slotIs(held);
  return {
    Update: {
      TableName: table(),
      Key: Keys.workflow(id),
      UpdateExpression: `SET #st = :completed, completionReason = :reason, completedAt = ${c.completedAt}, holdsSlot = :false, updatedAt = :now`,
      ConditionExpression: `#st IN (:enabled, :disabled) AND ${c.condition} AND ${slot.expression}`,
      ExpressionAttributeNames: { "#st": "status" },
      ExpressionAttributeValues: {
        ":completed": "completed",
        ":reason": c.reason,
        ":false": false,
        ":now": c.now,
        ":enabled": "enabled",
        ":disabled": "disabled",
        ...slot.values,
      },
    },
  };
}

/**
 * §8.2: the claim that took the last index stores `completed` / MAX_EXECUTIONS_REACHED with `completedAt` = its
 * time and releases the active slot with the counter, then removes schedules, watch entry and expiry entry.
 * Idempotent (the sweeper may finish the same claim); a workflow paused since the claim completes all the same.
 */
async function completeAtCap(id: string, at: number): Promise<void> {
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const record = await read(id);
    if (!record || (record.status !== "enabled" && record.status !== "disabled") || record.executionCount < record.maxExecution) return;
    const held = record.holdsSlot === true;
    const write = completionUpdate(id, held, { reason: "MAX_EXECUTIONS_REACHED", completedAt: ":now", condition: "executionCount >= maxExecution", now: at });
    if (await writeReleasingSlot(record.owner, write, held)) {
      await Promise.all([stopFiring(record), Watch.unwatch(id), forgetExpiry(id)]);
      return;
    }
    await backoff(attempt);
  }
  throw new Error("Workflow completion kept conflicting with concurrent writes");
}

/** An execution the sweeper's recovery claimed or finished: its run must be handed to a runner. */
export interface RecoveredClaim {
  workflowId: string;
  executionId: string;
  owner: Address;
}

/**
 * The sweeper's recovery of claims a crash interrupted (module section above): up to `max` intents still in flight
 * `CLAIM_RECOVERY_AFTER_MS` after their claim began, oldest first. Returns the executions written by this pass,
 * whose runs the caller hands over (claim.ts `recoverInterruptedClaims`).
 */
export async function recoverClaims(now: number, max = 100): Promise<RecoveredClaim[]> {
  const { db } = useRuntime();
  const bound = Keys.claimInFlight(now - CLAIM_RECOVERY_AFTER_MS, "");
  const out = await db.send(
    new QueryCommand({
      TableName: table(),
      IndexName: Index.gsi2,
      KeyConditionExpression: "gsi2pk = :pk AND gsi2sk < :bound",
      ExpressionAttributeValues: { ":pk": bound.gsi2pk, ":bound": bound.gsi2sk },
      Limit: max,
    }),
  );
  const recovered: RecoveredClaim[] = [];
  for (const item of out.Items ?? []) {
    const intent: Intent = {
      key: { pk: String(item.pk), sk: String(item.sk) },
      isFire: item.type === "fire",
      workflowId: String(item.workflowId),
      execution: item.execution as Record<string, unknown>,
      at: Number(item.claimedAt),
    };
    const done = await recoverClaim(intent, now).catch((err: unknown) => {
      log.warn("claim recovery failed; tried again on the next pass", { intent: intent.key.pk, error: (err as Error).message });
      return undefined;
    });
    if (done) recovered.push(done);
  }
  if (out.Items?.length) log.info("recovered interrupted claims", { intents: out.Items.length, executions: recovered.length });
  return recovered;
}

async function recoverClaim(intent: Intent, now: number): Promise<RecoveredClaim | undefined> {
  const { db } = useRuntime();
  const executionId = String(intent.execution.id);
  const written = await db.send(
    new GetCommand({ TableName: table(), Key: Keys.execution(intent.workflowId, executionId), ConsistentRead: true, ProjectionExpression: "pk" }),
  );
  if (written.Item) return void (await closeIntent(intent)); // only the close was missing
  const marker = markerOf(intent.key.pk);
  let record = await read(intent.workflowId);
  if (!record) return void (await closeIntent(intent)); // deleted: nothing to run
  let index = indexOf(record, marker);
  if (index === undefined) {
    // The crash came before the count update. A manual trigger's caller got no execution: drop it. A fire is
    // claimed now, in a transaction with the check that its intent is still in flight.
    if (!intent.isFire) return void (await closeIntent(intent));
    const claimed = await claimForIntent(intent, marker, now);
    if (claimed === "closed") return undefined;
    if (claimed === "busy") return undefined; // the next pass tries again
    record = await read(intent.workflowId);
    index = record ? indexOf(record, marker) : undefined;
    if (!record || index === undefined) return void (await closeIntent(intent)); // not runnable, or deleted meanwhile
  }
  await finishClaim(record, intent, index);
  return { workflowId: record.id, executionId, owner: record.owner };
}

/** Step 2 for the sweeper: the count update together with a check that the intent is still in flight. */
async function claimForIntent(intent: Intent, marker: string, now: number): Promise<"claimed" | "closed" | "refused" | "busy"> {
  try {
    await useRuntime().db.send(
      new TransactWriteCommand({
        TransactItems: [
          { ConditionCheck: { TableName: table(), Key: intent.key, ConditionExpression: "attribute_exists(gsi2pk)" } },
          {
            Update: {
              TableName: table(),
              Key: Keys.workflow(intent.workflowId),
              UpdateExpression: "SET #count = #count + :one, #m = #count, lastRanAt = :now, updatedAt = :now",
              ConditionExpression: RUNNABLE_CONDITION,
              ExpressionAttributeNames: { "#st": "status", "#count": "executionCount", "#m": marker },
              ExpressionAttributeValues: { ":enabled": "enabled", ":one": 1, ":now": now },
            },
          },
        ] as never,
      }),
    );
    return "claimed";
  } catch (err) {
    if (errorName(err) !== "TransactionCanceledException") throw err;
    const [intentReason, workflowReason] = cancellationReasons(err);
    if (intentReason === "ConditionalCheckFailed") return "closed";
    if (workflowReason === "ConditionalCheckFailed") return "refused"; // the caller reads: taken meanwhile, or not runnable
    return "busy";
  }
}

/**
 * The end of a run (§8.2). An `error` adds one to the consecutive errors; the one that reaches
 * `consecutive_error_limit` turns an enabled or disabled (unexpired) workflow `failed` / CONSECUTIVE_ERRORS with
 * `completedAt = endAt`, freeing its slot. `success` and `failed` reset the count, written only when it is not
 * already 0 (one strongly consistent read decides), so a workflow whose runs succeed gets no write per run. A
 * deleted workflow is ignored.
 */
export async function recordOutcome(id: string, status: "success" | "failed" | "error", endAt: number): Promise<void> {
  const { db, config } = useRuntime();
  const key = Keys.workflow(id);
  if (status !== "error") {
    const { Item } = await db.send(new GetCommand({ TableName: table(), Key: key, ConsistentRead: true, ProjectionExpression: "consecutiveErrors" }));
    if (!Item || !(Number(Item.consecutiveErrors) > 0)) return;
    try {
      await db.send(
        new UpdateCommand({
          TableName: table(),
          Key: key,
          UpdateExpression: "SET consecutiveErrors = :zero",
          ConditionExpression: "attribute_exists(pk) AND consecutiveErrors > :zero",
          ExpressionAttributeValues: { ":zero": 0 },
        }),
      );
    } catch (err) {
      if (errorName(err) !== "ConditionalCheckFailedException") throw err;
    }
    return;
  }
  let updated: WorkflowRecord;
  try {
    const out = await db.send(
      new UpdateCommand({
        TableName: table(),
        Key: key,
        UpdateExpression: "SET consecutiveErrors = if_not_exists(consecutiveErrors, :zero) + :one",
        ConditionExpression: "attribute_exists(pk)",
        ExpressionAttributeValues: { ":zero": 0, ":one": 1 },
        ReturnValues: "ALL_NEW",
      }),
    );
    updated = fromItem(out.Attributes ?? {});
  } catch (err) {
    if (errorName(err) === "ConditionalCheckFailedException") return;
    throw err;
  }
  const limit = config.limits.consecutiveErrorLimit;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    if (updated.consecutiveErrors < limit) return;
    if (updated.status !== "enabled" && updated.status !== "disabled") return;
    if (updated.expiredAt !== undefined && updated.expiredAt <= endAt) return; // already completed (EXPIRED)
    const held = updated.holdsSlot === true;
    const slot = slotIs(held);
    const write = {
      Update: {
        TableName: table(),
        Key: key,
        UpdateExpression: "SET #st = :failed, completionReason = :reason, completedAt = :endAt, holdsSlot = :false, updatedAt = :endAt",
        ConditionExpression:
          `#st IN (:enabled, :disabled) AND consecutiveErrors >= :limit AND (attribute_not_exists(expiredAt) OR expiredAt > :endAt) AND ${slot.expression}`,
        ExpressionAttributeNames: { "#st": "status" },
        ExpressionAttributeValues: {
          ":failed": "failed",
          ":reason": "CONSECUTIVE_ERRORS",
          ":endAt": endAt,
          ":false": false,
          ":enabled": "enabled",
          ":disabled": "disabled",
          ":limit": limit,
          ...slot.values,
        },
      },
    };
    if (await writeReleasingSlot(updated.owner, write, held)) return void (await Promise.all([stopFiring(updated), Watch.unwatch(id), forgetExpiry(id)]));
    const again = await read(id);
    if (!again) return;
    updated = again;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Expiry in the background (§8.2)

/**
 * The sweeper's pass: up to `max` workflows whose `expiredAt` is at or before `now` (pattern 21, oldest first) are
 * stored `completed` / EXPIRED with `completedAt = expiredAt`, their slot freed with the counter in the same
 * transaction, their schedules and watch entry removed, then their expiry entry deleted. An entry whose workflow
 * is gone or already terminal is only cleaned up. Returns the ids stored expired by this pass.
 */
export async function expireDue(now: number, max: number): Promise<string[]> {
  const { db } = useRuntime();
  const out = await db.send(
    new QueryCommand({
      TableName: table(),
      IndexName: Index.gsi2,
      KeyConditionExpression: "gsi2pk = :pk AND gsi2sk < :bound",
      ExpressionAttributeValues: { ":pk": Keys.expiryDue(0, "").gsi2pk, ":bound": Keys.expiryDue(now + 1, "").gsi2sk.slice(0, -1) },
      ProjectionExpression: "workflowId",
      Limit: max,
    }),
  );
  const expired: string[] = [];
  for (const entry of out.Items ?? []) {
    const id = String(entry.workflowId);
    let record = await read(id);
    for (let attempt = 1; record && isExpired(record, now) && attempt <= MAX_ATTEMPTS; attempt++) {
      const held = record.holdsSlot === true;
      const write = completionUpdate(id, held, { reason: "EXPIRED", completedAt: "expiredAt", condition: "expiredAt <= :now", now });
      if (await writeReleasingSlot(record.owner, write, held)) {
        expired.push(id);
        break;
      }
      record = await read(id);
    }
    if (record && (record.status === "enabled" || record.status === "disabled") && !expired.includes(id)) {
      if (!isExpired(record, now)) continue; // not due after all (kept for a later pass)
      throw new Error(`Workflow ${id} expiry kept conflicting with concurrent writes`);
    }
    if (record) await Promise.all([stopFiring(record), Watch.unwatch(id)]);
    await forgetExpiry(id);
  }
  if (expired.length > 0) log.info("stored expired workflows", { expired: expired.length });
  return expired;
}
