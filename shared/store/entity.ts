/**
 * The thin typed layer every record type is built on (README "Storage through entities"). An entity names its
 * record type and version, owns its key function, and issues its reads and writes with conditions and updates
 * given as values (./expression.ts): the modules in ./entities/ define one entity per record type with the
 * operations and invariants it owns, and domain code calls those, never a command, a key string or an expression.
 *
 * Why ours and not a library: the table's keys are hand-tuned (overloaded sparse indexes, sort tricks, padded
 * times, binary step parts, transactions across record types) and items already stored must read as they are.
 * This layer adds no attribute and changes no item or request count; it is the part of an entity library the
 * table needs (typed items and keys, typed conditions and updates, transaction items), in about 200 lines:
 * `defineEntity<Item, Id>({ type, version, key })` gives get/put/update/delete, the queries of ./query.ts
 * (`query`, `pages`, `list`, `batchGet`) answering `Item`, and `tx` items.
 */
import {
  DeleteCommand,
  GetCommand,
  PutCommand,
  TransactWriteCommand,
  UpdateCommand,
  type TransactWriteCommandInput,
} from "@aws-sdk/lib-dynamodb";
import { Placeholders, renderUpdate, type Condition, type UpdateAction } from "./expression";
import {
  batchGetOnce,
  listPage,
  queryOnce,
  queryPages,
  runtimeStore,
  type Attributes,
  type EntityStore,
  type ListPage,
  type ListQuery,
  type Page,
  type Query,
  type ReadOptions,
  type TableKey,
} from "./query";
import { retryTransient } from "./table";
import { useRuntime } from "../current-runtime";

/** What the table adds to every item an entity writes: its keys, index keys when it is on an index, `type`, `v`. */
export interface ItemKeys extends TableKey {
  gsi1pk?: string;
  gsi1sk?: string;
  gsi2pk?: string;
  gsi2sk?: string;
  gsi3pk?: string;
  gsi3sk?: string;
  type: string;
  v: number;
}

/** An item of an entity whose attributes are `T`, as the table holds it. */
export type Stored<T> = T & ItemKeys;

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

/**
 * An entity of items with attributes `T` (besides keys, `type` and `v`), stored under the key `key(id)` builds for
 * an id `K` (ElectroDB's `Entity`, with the item's type given instead of a schema). Its reads answer `Stored<T>`
 * (or, reading some attributes only, those attributes), its writes take `T`: callers never cast an item. Items
 * are trusted to have the type their entity was written with; a reader of an older version (`v`) narrows itself.
 */
export function defineEntity<T extends object = Attributes, K = never>(
  definition: EntityDefinition<K>,
  target: () => EntityStore = runtimeStore,
) {
  type Item = Stored<T>;
  type Name = keyof Item & string;
  const table = () => target().tableName;
  const db = () => target().db;
  /** `type` and `v` first, so an item's own members (e.g. an older `v` being copied) win. */
  const stamped = (item: T | Partial<Item>) => ({ type: definition.type, v: definition.version, ...item });
  /** The attributes `put` takes: the item's, plus the index keys that place it on an index. */
  type Put = T & Partial<ItemKeys>;

  return {
    ...definition,

    async get<A extends Name = Name>(id: K, options: ReadOptions<A> = {}): Promise<Pick<Item, A> | undefined> {
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
      return result.Item as Pick<Item, A> | undefined;
    },

    /** Puts the item under `id`'s key (plus whatever index keys `item` carries). */
    async put(id: K, item: Put, options: WriteOptions = {}): Promise<void> {
      const input = { TableName: table(), Item: { ...definition.key(id), ...stamped(item) }, ...writeFields(options.if) };
      await retryTransient(() => db().send(new PutCommand(input)));
    },

    /** The item after the update (`returnValues: "ALL_NEW"`) or before it (`"ALL_OLD"`), when asked for. */
    async update(id: K, actions: readonly UpdateAction[], options: UpdateOptions = {}): Promise<Item | undefined> {
      const input = {
        TableName: table(),
        Key: definition.key(id),
        ...updateFields(actions, options.if),
        ...(options.returnValues ? { ReturnValues: options.returnValues } : {}),
        ...(options.returnOldOnFailure ? { ReturnValuesOnConditionCheckFailure: "ALL_OLD" as const } : {}),
      };
      const result = await retryTransient(() => db().send(new UpdateCommand(input)));
      return result.Attributes as Item | undefined;
    },

    async delete(id: K, options: WriteOptions & { returnOld?: boolean } = {}): Promise<Item | undefined> {
      const input = {
        TableName: table(),
        Key: definition.key(id),
        ...writeFields(options.if),
        ...(options.returnOld ? { ReturnValues: "ALL_OLD" as const } : {}),
      };
      const result = await retryTransient(() => db().send(new DeleteCommand(input)));
      return result.Attributes as Item | undefined;
    },

    /** One Query request (one page) of this entity's items, from `from` (a page's `next`). */
    query: <A extends Name = Name>(q: Query<A>, from?: Attributes) => queryOnce(q, from, target()) as Promise<Page<Pick<Item, A>>>,

    /** Every page of a Query of this entity's items: `for await (const page of Entity.pages(q))`. */
    pages: <A extends Name = Name>(q: Query<A>) => queryPages(q, target()) as AsyncGenerator<Page<Pick<Item, A>>>,

    /** One page of a list of this entity's items, in list order from a cursor (API.md §3; ./list.ts). */
    list: (q: ListQuery<Name>) => listPage(q, target()) as Promise<ListPage<Item>>,

    /** One BatchGetItem request (at most 100 keys) of this entity's items: those found and the keys left unprocessed. */
    batchGet: <A extends Name = Name>(keys: readonly TableKey[], options: ReadOptions<A> = {}) =>
      batchGetOnce(keys, options, target()) as Promise<{ items: Pick<Item, A>[]; unprocessed: TableKey[] }>,

    /** The same writes as items of one transaction (`transact`). */
    tx: {
      put: (id: K, item: Put, options: WriteOptions = {}): TransactItem => ({
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
