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
 * | claim (trigger, scheduler, watcher)| GetItem + 1 TransactWriteItems (record, execution, fire)| Keys.workflow, Keys.execution, Keys.fire     |
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
import { DeleteCommand, GetCommand, QueryCommand, TransactWriteCommand, UpdateCommand, type QueryCommandInput } from "@aws-sdk/lib-dynamodb";
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
import { startFiring, stopFiring } from "../schedule/port";
import * as Watch from "../watch/registry";
import type { COMPLETION_REASONS, Edge, Node, Trigger, Workflow } from "./schemas";

export const ENTITY = "workflow";
const VERSION = 1;
/** Version of the workflow item: 2 keeps the client's document as JSON text (module header). */
const RECORD_VERSION = 2;
const COUNTER = "activeWorkflows";
const MAX_ATTEMPTS = 60;
const ULID_PATTERN = /^[0-9A-HJKMNP-TV-Z]{26}$/;

export type StoredStatus = "enabled" | "disabled" | "completed" | "failed";
export type CompletionReason = (typeof COMPLETION_REASONS)[number];
/** The Workflow object of API.md §8.1, as answered. */
export type WorkflowInfo = Workflow;
export type ListStatus = StoredStatus | "running";

/** The stored record (item attributes besides the keys, `type` and `v`). */
export interface WorkflowRecord {
  id: string;
  /** EIP-55. */
  owner: Address;
  name?: string;
  smartWalletAddress: Address;
  chainId: number;
  trigger: Trigger & { id: string };
  nodes: Node[];
  edges: Edge[];
  inputVariables: Record<string, unknown>;
  /** Stored status; read it through `effectiveStatus`. */
  status: StoredStatus;
  startAt?: number;
  expiredAt?: number;
  maxExecution: number;
  executionCount: number;
  lastRanAt?: number;
  createdAt: number;
  updatedAt: number;
  completionReason?: CompletionReason;
  completedAt?: number;
  /** Executions ended `error` in a row (reset by `success` or `failed`). */
  consecutiveErrors: number;
  /** Counted in the owner's active-workflow counter (see the module header). */
  holdsSlot: boolean;
}

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
// Claiming an execution (§8.8.7, §8.2) and recording its outcome

export interface ClaimOptions {
  now: number;
  /** When given, the workflow must belong to this owner (else 404). */
  owner?: Address;
  /** The execution item to write `pending` (with its keys), for `index` = executionCount before the claim. */
  execution: (index: number, workflow: WorkflowRecord) => Record<string, unknown>;
  /** At most one execution per fire: written with the claim; an existing one → DuplicateFire. `expiresAt`: unix seconds (TTL). */
  fire?: { fireId: string; expiresAt: number };
}

/**
 * Claims one execution in one transaction: the workflow's count (+1, `lastRanAt`), the execution item, and the
 * fire record. The claim that reaches `maxExecution` completes the workflow (MAX_EXECUTIONS_REACHED) and frees its
 * slot in the same transaction. The workflow is read first for the expected count; a concurrent claim changes it,
 * fails this condition, and this claim re-reads and tries again, so claims never exceed `maxExecution`.
 * Throws 404 WORKFLOW_NOT_FOUND (missing or another owner's), 412 WORKFLOW_NOT_RUNNABLE with `reason`, DuplicateFire.
 */
export async function claim(id: string, opts: ClaimOptions): Promise<{ workflow: WorkflowRecord; index: number }> {
  const { db } = useRuntime();
  const now = opts.now;
  let release = true;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const record = await getForRun(id);
    if (!record || (opts.owner !== undefined && !sameOwner(record.owner, opts.owner))) throw workflowNotFound();
    const reason = notRunnableReason(record, now);
    if (reason) throw notRunnable(reason);

    const index = record.executionCount;
    const completes = index + 1 >= record.maxExecution;
    const held = record.holdsSlot === true;
    const names: Record<string, string> = { "#st": "status", "#count": "executionCount" };
    const values: Record<string, unknown> = { ":enabled": "enabled", ":expected": index, ":next": index + 1, ":now": now };
    let set = "SET #count = :next, lastRanAt = :now, updatedAt = :now";
    if (completes) {
      set += ", #st = :completed, completionReason = :reason, completedAt = :now, holdsSlot = :false";
      Object.assign(values, { ":completed": "completed", ":reason": "MAX_EXECUTIONS_REACHED", ":false": false });
    }
    let condition =
      "attribute_exists(pk) AND #st = :enabled AND #count = :expected AND #count < maxExecution" +
      " AND (attribute_not_exists(expiredAt) OR expiredAt > :now) AND (attribute_not_exists(startAt) OR startAt <= :now)";
    if (opts.owner !== undefined) {
      condition += " AND #owner = :owner";
      names["#owner"] = "owner";
      values[":owner"] = record.owner;
    }
    const releasing = completes && held && release;
    if (releasing) {
      condition += " AND holdsSlot = :slotHeld";
      values[":slotHeld"] = true;
    }
    const executionItem = opts.execution(index, record);
    const items: Record<string, unknown>[] = [
      { Update: { TableName: table(), Key: Keys.workflow(record.id), UpdateExpression: set, ConditionExpression: condition, ExpressionAttributeNames: names, ExpressionAttributeValues: values } },
      { Put: { TableName: table(), Item: executionItem, ConditionExpression: "attribute_not_exists(pk)" } },
    ];
    const fireAt = opts.fire ? items.length : -1;
    if (opts.fire) {
      items.push({
        Put: {
          TableName: table(),
          Item: { ...Keys.fire(opts.fire.fireId), type: "fire", v: VERSION, workflowId: record.id, executionId: executionItem.id, expiresAt: opts.fire.expiresAt },
          ConditionExpression: "attribute_not_exists(pk)",
        },
      });
    }
    const counterAt = releasing ? items.length : -1;
    if (releasing) items.push(decrement(table(), counterKey(record.owner)));

    try {
      await db.send(new TransactWriteCommand({ TransactItems: items as never }));
      const claimed: WorkflowRecord = {
        ...record,
        executionCount: index + 1,
        lastRanAt: now,
        updatedAt: now,
        ...(completes ? { status: "completed" as const, completionReason: "MAX_EXECUTIONS_REACHED" as const, completedAt: now, holdsSlot: false } : {}),
      };
      if (completes) await Promise.all([stopFiring(record), Watch.unwatch(record.id), forgetExpiry(record.id)]);
      return { workflow: claimed, index };
    } catch (err) {
      if (errorName(err) !== "TransactionCanceledException") throw err;
      const reasons = cancellationReasons(err);
      if (fireAt >= 0 && reasons[fireAt] === "ConditionalCheckFailed") throw new DuplicateFire(opts.fire!.fireId);
      if (reasons[1] === "ConditionalCheckFailed") throw new Error("Execution id already exists");
      if (counterAt >= 0 && reasons[counterAt] === "ConditionalCheckFailed" && reasons[0] !== "ConditionalCheckFailed") {
        log.warn("active workflow counter out of step; completing without decrement", { owner: record.owner.toLowerCase() });
        release = false;
        continue;
      }
      // The workflow changed (another claim, a pause, a delete) or the items conflicted: read again and decide.
      await backoff(attempt);
    }
  }
  throw new Error("Workflow claim kept conflicting with concurrent claims");
}

/**
 * Counts consecutive executions ending `error` (`success` and `failed` reset it). The one that reaches
 * `consecutive_error_limit` turns an enabled or disabled (unexpired) workflow `failed` / CONSECUTIVE_ERRORS with
 * `completedAt = endAt`, freeing its slot. A deleted workflow is ignored.
 */
export async function recordOutcome(id: string, status: "success" | "failed" | "error", endAt: number): Promise<void> {
  const { db, config } = useRuntime();
  const key = Keys.workflow(id);
  let updated: WorkflowRecord;
  try {
    const out = await db.send(
      new UpdateCommand({
        TableName: table(),
        Key: key,
        UpdateExpression: status === "error" ? "SET consecutiveErrors = if_not_exists(consecutiveErrors, :zero) + :one" : "SET consecutiveErrors = :zero",
        ConditionExpression: "attribute_exists(pk)",
        ExpressionAttributeValues: status === "error" ? { ":zero": 0, ":one": 1 } : { ":zero": 0 },
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
    if (status !== "error" || updated.consecutiveErrors < limit) return;
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
      const slot = slotIs(held);
      const write = {
        Update: {
          TableName: table(),
          Key: Keys.workflow(id),
          UpdateExpression: "SET #st = :completed, completionReason = :reason, completedAt = expiredAt, holdsSlot = :false, updatedAt = :now",
          ConditionExpression: `#st IN (:enabled, :disabled) AND expiredAt <= :now AND ${slot.expression}`,
          ExpressionAttributeNames: { "#st": "status" },
          ExpressionAttributeValues: {
            ":completed": "completed",
            ":reason": "EXPIRED",
            ":false": false,
            ":now": now,
            ":enabled": "enabled",
            ":disabled": "disabled",
            ...slot.values,
          },
        },
      };
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
