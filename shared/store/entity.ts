/**
 * The thin typed layer every record type is built on (README "Storage through entities"). An entity names its
 * record type and version, owns its key function, and issues its reads and writes with conditions and updates
 * given as values (./expression.ts): the modules in ./entities/ define one entity per record type with the
 * operations and invariants it owns, and domain code calls those, never a command, a key string or an expression.
 *
 * Why ours and not a library: the table's keys are hand-tuned (overloaded sparse indexes, sort tricks, padded
 * times, binary step parts, transactions across record types) and items already stored must read as they are.
 * This layer adds no attribute and changes no item or request count; it is the part of an entity library the
 * table needs (typed keys, typed conditions and updates, transaction items), in about 150 lines.
 */
import {
  BatchGetCommand,
  DeleteCommand,
  GetCommand,
  PutCommand,
  QueryCommand,
  TransactWriteCommand,
  UpdateCommand,
  type DynamoDBDocumentClient,
  type QueryCommandInput,
  type TransactWriteCommandInput,
} from "@aws-sdk/lib-dynamodb";
import { useConfig, useRuntime } from "../runtime";
import { Placeholders, renderUpdate, type Condition, type UpdateAction } from "./expression";
import { retryTransient } from "./table";

export interface TableKey {
  pk: string;
  sk: string;
}

type Item = Record<string, unknown>;
export type TransactItem = NonNullable<TransactWriteCommandInput["TransactItems"]>[number];
type ReturnValues = "NONE" | "ALL_OLD" | "UPDATED_OLD" | "ALL_NEW" | "UPDATED_NEW";

export interface EntityDefinition<K> {
  /** The item's `type` attribute. */
  type: string;
  /** The `v` attribute written by `put` (readers handle older versions themselves). */
  version: number;
  key(id: K): TableKey;
}

export interface WriteOptions {
  if?: Condition;
}

export interface UpdateOptions extends WriteOptions {
  returnValues?: ReturnValues;
  /** On a failed condition the error carries the stored item (raw AttributeValues) as `Item`. */
  returnOldOnFailure?: boolean;
}

/** The table and client an entity works on: the runtime's by default; another (a test's second process, an injected store) through `defineEntity(entity, () => store)`. */
export interface EntityStore {
  db: DynamoDBDocumentClient;
  tableName: string;
}

const runtimeStore = (): EntityStore => ({ db: useRuntime().db, tableName: useConfig().tableName });

function conditionFields(p: Placeholders, condition: Condition | undefined) {
  return condition ? { ConditionExpression: condition.render(p) } : {};
}

function updateFields(actions: readonly UpdateAction[], condition: Condition | undefined) {
  const p = new Placeholders();
  const UpdateExpression = renderUpdate(p, actions);
  const withCondition = conditionFields(p, condition);
  return { UpdateExpression, ...withCondition, ...p.fields() };
}

function writeFields(condition: Condition | undefined) {
  const p = new Placeholders();
  const withCondition = conditionFields(p, condition);
  return { ...withCondition, ...p.fields() };
}

export function defineEntity<K>(definition: EntityDefinition<K>, target: () => EntityStore = runtimeStore) {
  const table = () => target().tableName;
  const db = () => target().db;
  /** `type` and `v` first, so an item's own members (e.g. an older `v` being copied) win. */
  const stamped = (item: Item): Item => ({ type: definition.type, v: definition.version, ...item });

  return {
    ...definition,

    async get(id: K, options: { consistent?: boolean; attributes?: readonly string[] } = {}): Promise<Item | undefined> {
      const p = new Placeholders();
      const projection = options.attributes?.map((a) => p.path(a)).join(", ");
      const result = await db().send(
        new GetCommand({
          TableName: table(),
          Key: definition.key(id),
          ...(options.consistent ? { ConsistentRead: true } : {}),
          ...(projection ? { ProjectionExpression: projection, ExpressionAttributeNames: p.names } : {}),
        }),
      );
      return result.Item;
    },

    /** Puts the item under `id`'s key (plus whatever index keys `item` carries). */
    async put(id: K, item: Item, options: WriteOptions = {}): Promise<void> {
      const input = { TableName: table(), Item: { ...definition.key(id), ...stamped(item) }, ...writeFields(options.if) };
      await retryTransient(() => db().send(new PutCommand(input)));
    },

    async update(id: K, actions: readonly UpdateAction[], options: UpdateOptions = {}): Promise<Item | undefined> {
      const input = {
        TableName: table(),
        Key: definition.key(id),
        ...updateFields(actions, options.if),
        ...(options.returnValues ? { ReturnValues: options.returnValues } : {}),
        ...(options.returnOldOnFailure ? { ReturnValuesOnConditionCheckFailure: "ALL_OLD" as const } : {}),
      };
      const result = await retryTransient(() => db().send(new UpdateCommand(input)));
      return result.Attributes;
    },

    async delete(id: K, options: WriteOptions & { returnOld?: boolean } = {}): Promise<Item | undefined> {
      const input = {
        TableName: table(),
        Key: definition.key(id),
        ...writeFields(options.if),
        ...(options.returnOld ? { ReturnValues: "ALL_OLD" as const } : {}),
      };
      const result = await retryTransient(() => db().send(new DeleteCommand(input)));
      return result.Attributes;
    },

    /** The same writes as items of one transaction (`transact`). */
    tx: {
      put: (id: K, item: Item, options: WriteOptions = {}): TransactItem => ({
        Put: { TableName: table(), Item: { ...definition.key(id), ...stamped(item) }, ...writeFields(options.if) },
      }),
      update: (id: K, actions: readonly UpdateAction[], options: WriteOptions = {}): TransactItem => ({
        Update: { TableName: table(), Key: definition.key(id), ...updateFields(actions, options.if) },
      }),
      delete: (id: K, options: WriteOptions = {}): TransactItem => ({
        Delete: { TableName: table(), Key: definition.key(id), ...writeFields(options.if) },
      }),
      check: (id: K, condition: Condition): TransactItem => {
        const p = new Placeholders();
        const ConditionExpression = condition.render(p);
        return { ConditionCheck: { TableName: table(), Key: definition.key(id), ConditionExpression, ...p.fields() } };
      },
    },
  };
}

/**
 * Writes the items all or none (TransactWriteItems); a failed condition throws TransactionCanceledException. A
 * cancellation for a conflict or throttling only is sent again (./table.ts `retryTransient`).
 */
export async function transact(items: readonly TransactItem[]): Promise<void> {
  await retryTransient(() => useRuntime().db.send(new TransactWriteCommand({ TransactItems: [...items] })));
}

// ---------------------------------------------------------------------------------------------------------
// Queries and batch reads (an entity module's access patterns call these; domain code calls the entity module)

/** A sort-key condition of a Query. */
type SortKey =
  | { beginsWith: string }
  | { between: readonly [string, string] }
  | { eq: string }
  | { lt: string }
  | { le: string }
  | { gt: string }
  | { ge: string };

export interface KeyQuery {
  /** An index name (`gsi1`, `gsi2`): its key attributes are `<index>pk` / `<index>sk`. */
  index?: string;
  /** The partition key's value. */
  pk: string;
  sk?: SortKey;
  filter?: Condition;
  /** ProjectionExpression: only these attributes. */
  attributes?: readonly string[];
  consistent?: boolean;
  /** Descending sort-key order (ScanIndexForward false). */
  descending?: boolean;
  /** Items evaluated per request (Limit). */
  limit?: number;
  /** Select COUNT: pages carry `count` and no items. */
  count?: boolean;
}

const SORT_OPERATORS = { eq: "=", lt: "<", le: "<=", gt: ">", ge: ">=" } as const;

function sortKeyCondition(p: Placeholders, name: string, sk: SortKey): string {
  if ("beginsWith" in sk) return `begins_with(${p.path(name)}, ${p.value(sk.beginsWith)})`;
  if ("between" in sk) return `${p.path(name)} BETWEEN ${p.value(sk.between[0])} AND ${p.value(sk.between[1])}`;
  const [op, value] = Object.entries(sk)[0] as [keyof typeof SORT_OPERATORS, string];
  return `${p.path(name)} ${SORT_OPERATORS[op]} ${p.value(value)}`;
}

function queryInput(q: KeyQuery, tableName: string): QueryCommandInput {
  const p = new Placeholders();
  const prefix = q.index ?? "";
  const key = `${p.path(`${prefix}pk`)} = ${p.value(q.pk)}`;
  const KeyConditionExpression = q.sk ? `${key} AND ${sortKeyCondition(p, `${prefix}sk`, q.sk)}` : key;
  const FilterExpression = q.filter?.render(p);
  const ProjectionExpression = q.attributes?.map((a) => p.path(a)).join(", ");
  return {
    TableName: tableName,
    ...(q.index ? { IndexName: q.index } : {}),
    KeyConditionExpression,
    ...(FilterExpression ? { FilterExpression } : {}),
    ...(ProjectionExpression && !q.count ? { ProjectionExpression } : {}),
    ...(q.count ? { Select: "COUNT" as const } : {}),
    ...(q.consistent ? { ConsistentRead: true } : {}),
    ...(q.descending ? { ScanIndexForward: false } : {}),
    ...(q.limit !== undefined ? { Limit: q.limit } : {}),
    ...p.fields(),
  };
}

export interface QueryPage {
  items: Item[];
  count: number;
  lastKey?: Record<string, unknown>;
}

/** One Query request (one page), from `startKey`. */
export async function queryOnce(q: KeyQuery, startKey?: Record<string, unknown>, store = runtimeStore()): Promise<QueryPage> {
  const out = await store.db.send(new QueryCommand({ ...queryInput(q, store.tableName), ExclusiveStartKey: startKey }));
  return { items: out.Items ?? [], count: out.Count ?? 0, lastKey: out.LastEvaluatedKey };
}

/** Every page of a Query, following LastEvaluatedKey: `for await (const page of queryEach(q))`. */
export async function* queryEach(q: KeyQuery, store = runtimeStore()): AsyncGenerator<QueryPage> {
  let startKey: Record<string, unknown> | undefined;
  do {
    const page = await queryOnce(q, startKey, store);
    yield page;
    startKey = page.lastKey;
  } while (startKey);
}

/**
 * One BatchGetItem request (at most 100 keys), optionally of some attributes only: the items found and the keys
 * DynamoDB left unprocessed.
 */
export async function batchGetOnce(
  keys: readonly TableKey[],
  options: { consistent?: boolean; attributes?: readonly string[] } = {},
  store = runtimeStore(),
): Promise<{ items: Item[]; unprocessed: TableKey[] }> {
  const p = new Placeholders();
  const projection = options.attributes?.map((a) => p.path(a)).join(", ");
  const out = await store.db.send(
    new BatchGetCommand({
      RequestItems: {
        [store.tableName]: {
          Keys: [...keys],
          ...(options.consistent ? { ConsistentRead: true } : {}),
          ...(projection ? { ProjectionExpression: projection, ExpressionAttributeNames: p.names } : {}),
        },
      },
    }),
  );
  return {
    items: out.Responses?.[store.tableName] ?? [],
    unprocessed: (out.UnprocessedKeys?.[store.tableName]?.Keys ?? []) as TableKey[],
  };
}

/**
 * The same Query written with the sort key's condition as a `when` value on a named attribute (the workflow-side
 * entities use this form; KeyQuery above names the index's key attributes by convention).
 */
export interface PartitionQuery {
  index?: string;
  /** The partition key attribute and its value. */
  partition: readonly [name: string, value: string];
  sort?: Condition;
  filter?: Condition;
  attributes?: readonly string[];
  limit?: number;
  /** Sort order (ScanIndexForward); DynamoDB's default (ascending) when not given. */
  ascending?: boolean;
  consistent?: boolean;
  /** Select COUNT: pages answer `count` and no items. */
  count?: boolean;
}

export interface PartitionPage {
  items: Item[];
  count: number;
  /** Where the next page starts (LastEvaluatedKey), when there is one. */
  next?: Item;
}

function partitionQueryInput(q: PartitionQuery, startKey: Item | undefined): QueryCommandInput {
  const p = new Placeholders();
  const [pkName, pkValue] = q.partition;
  const KeyConditionExpression = `${p.path(pkName)} = ${p.value(pkValue)}` + (q.sort ? ` AND ${q.sort.render(p)}` : "");
  const FilterExpression = q.filter?.render(p);
  const ProjectionExpression = q.attributes?.map((a) => p.path(a)).join(", ");
  return {
    TableName: useConfig().tableName,
    ...(q.index ? { IndexName: q.index } : {}),
    KeyConditionExpression,
    ...(FilterExpression ? { FilterExpression } : {}),
    ...(ProjectionExpression ? { ProjectionExpression } : {}),
    ...p.fields(),
    ...(q.limit !== undefined ? { Limit: q.limit } : {}),
    ...(q.ascending !== undefined ? { ScanIndexForward: q.ascending } : {}),
    ...(q.consistent ? { ConsistentRead: true } : {}),
    ...(q.count ? { Select: "COUNT" as const } : {}),
    ...(startKey ? { ExclusiveStartKey: startKey } : {}),
  };
}

/** One Query request (one page), from `startKey` when given. */
export async function queryPartition(q: PartitionQuery, startKey?: Item): Promise<PartitionPage> {
  const out = await useRuntime().db.send(new QueryCommand(partitionQueryInput(q, startKey)));
  return { items: out.Items ?? [], count: out.Count ?? 0, ...(out.LastEvaluatedKey ? { next: out.LastEvaluatedKey } : {}) };
}

/** Every page of a Query, following LastEvaluatedKey: `for await (const page of queryPartitionPages(q))`. */
export async function* queryPartitionPages(q: PartitionQuery): AsyncGenerator<PartitionPage> {
  let startKey: Item | undefined;
  do {
    const page = await queryPartition(q, startKey);
    yield page;
    startKey = page.next;
  } while (startKey);
}
