/**
 * Queries and batch reads, in one vocabulary (`Query`): one request (`queryOnce`), every page (`queryPages`), and
 * one page of a list read from a cursor (`listPage`, API.md §3). An entity (./entity.ts) offers the same as its
 * `query`, `pages`, `list` and `batchGet`, typed by its item; the functions here serve a partition that holds
 * items of several entities.
 */
import { BatchGetCommand, QueryCommand, type DynamoDBDocumentClient, type QueryCommandInput } from "@aws-sdk/lib-dynamodb";
import { Placeholders, type Condition } from "./expression";
import { Index, KEYS_ONLY_INDEXES } from "./table";
import { Keys } from "./item-keys";
import { useConfig, useRuntime } from "../current-runtime";

export interface TableKey {
  pk: string;
  sk: string;
}

/** An item as DynamoDB answers it, of no entity in particular. */
export type Attributes = Record<string, unknown>;

/** The table and client a read works on: the runtime's by default; another (a test's second process, an injected store) through `defineEntity(entity, () => store)`. */
export interface EntityStore {
  db: DynamoDBDocumentClient;
  tableName: string;
}

export const runtimeStore = (): EntityStore => ({ db: useRuntime().db, tableName: useConfig().tableName });

/** A read of some attributes only: the item holds those (ProjectionExpression). */
export interface ReadOptions<A extends string = string> {
  consistent?: boolean;
  attributes?: readonly A[];
}

/** A sort-key condition of a Query. */
type SortKey =
  | { beginsWith: string }
  | { between: readonly [string, string] }
  | { eq: string }
  | { lt: string }
  | { le: string }
  | { gt: string }
  | { ge: string };

export interface Query<A extends string = string> extends ReadOptions<A> {
  /** An index (`gsi1`, `gsi2`, `gsi3`): its key attributes are `<index>pk` / `<index>sk`; none: the table's `pk` / `sk`. */
  index?: (typeof Index)[keyof typeof Index];
  /** The partition key's value. */
  pk: string;
  sk?: SortKey;
  filter?: Condition;
  /** Sort-key order (ScanIndexForward); DynamoDB's (ascending) when not given. */
  order?: "asc" | "desc";
  /** Items evaluated per request (Limit). */
  limit?: number;
  /** Select COUNT: pages carry `count` and no items. */
  count?: boolean;
}

export interface Page<I = Attributes> {
  items: I[];
  count: number;
  /** Where the next page starts (LastEvaluatedKey), when there is one. */
  next?: Attributes;
}

/** The name of the sort-key attribute a query's index sorts by. */
const sortKeyOf = (q: Pick<Query, "index">) => `${q.index ?? ""}sk`;

const SORT_OPERATORS = { eq: "=", lt: "<", le: "<=", gt: ">", ge: ">=" } as const;

function sortKeyCondition(p: Placeholders, name: string, sk: SortKey): string {
  if ("beginsWith" in sk) return `begins_with(${p.path(name)}, ${p.value(sk.beginsWith)})`;
  if ("between" in sk) return `${p.path(name)} BETWEEN ${p.value(sk.between[0])} AND ${p.value(sk.between[1])}`;
  const [op, value] = Object.entries(sk)[0] as [keyof typeof SORT_OPERATORS, string];
  return `${p.path(name)} ${SORT_OPERATORS[op]} ${p.value(value)}`;
}

function queryInput(q: Query, tableName: string): QueryCommandInput {
  const p = new Placeholders();
  const key = `${p.path(`${q.index ?? ""}pk`)} = ${p.value(q.pk)}`;
  const KeyConditionExpression = q.sk ? `${key} AND ${sortKeyCondition(p, sortKeyOf(q), q.sk)}` : key;
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
    ...(q.order ? { ScanIndexForward: q.order === "asc" } : {}),
    ...(q.limit !== undefined ? { Limit: q.limit } : {}),
    ...p.fields(),
  };
}

/**
 * One Query request (one page), from `from` (a page's `next`). On a keys-only index (./table.ts), a Query that
 * filters or asks for more than keys reads the page's items by key (`queryByKeys`): the caller sees the same page.
 */
export async function queryOnce(q: Query, from?: Attributes, store = runtimeStore()): Promise<Page> {
  if (readsItems(q)) return queryByKeys(q, from, store);
  const out = await store.db.send(new QueryCommand({ ...queryInput(q, store.tableName), ExclusiveStartKey: from }));
  return { items: out.Items ?? [], count: out.Count ?? 0, ...(out.LastEvaluatedKey ? { next: out.LastEvaluatedKey } : {}) };
}

const indexKeyNames = (index: string) => [`${index}pk`, `${index}sk`];

/** Whether a Query of a keys-only index must read its items: it filters on them, or asks for more than keys. */
function readsItems(q: Query): boolean {
  if (!q.index || !KEYS_ONLY_INDEXES.has(q.index)) return false;
  if (q.filter) return true;
  if (q.count) return false;
  const keys = new Set(["pk", "sk", ...indexKeyNames(q.index)]);
  return !q.attributes || q.attributes.some((name) => !keys.has(name));
}

/**
 * A keys-only index's page with its items: the Query reads keys (same `Limit`, order and start), then the items
 * are read by key (BatchGetItem, eventually consistent; the keys whose item that read does not show where the
 * index put it are read again strongly) and kept in the index's order when they are still there (an item deleted
 * or moved since is left out), and the filter is tested on them in memory (its DynamoDB semantics,
 * ./expression.ts). `Limit` counts keys evaluated, as DynamoDB counts items evaluated before a filter.
 */
async function queryByKeys(q: Query, from: Attributes | undefined, store: EntityStore): Promise<Page> {
  const { filter, attributes, count: _count, ...rest } = q;
  // A page of keys unbounded by the caller is cut at KEYS_PER_PAGE, so that reading its items takes at most
  // KEYS_PER_PAGE / 100 BatchGetItems at once (an owner's :stats over a long window reads page by page).
  const keysQuery = { ...rest, limit: rest.limit ?? KEYS_PER_PAGE };
  const out = await store.db.send(new QueryCommand({ ...queryInput(keysQuery, store.tableName), ExclusiveStartKey: from }));
  const listed = out.Items ?? [];
  const [indexPk, indexSk] = indexKeyNames(q.index!) as [string, string];
  const projection = attributes && [...new Set([...attributes, ...(filter?.names ?? []), "pk", "sk", indexPk, indexSk])];
  const tableKey = (key: Attributes) => ({ pk: String(key.pk), sk: String(key.sk) });
  const inPlace = (key: Attributes, item: Attributes | undefined): item is Attributes =>
    item !== undefined && item[indexPk] === key[indexPk] && item[indexSk] === key[indexSk];
  const found = await readByKeys(listed.map(tableKey), projection, store);
  // An eventually consistent read may not show yet what the index already does (an item just written, or just
  // moved on the index): those keys are read again strongly, so the page holds exactly what the index lists.
  const behind = listed.filter((key) => !inPlace(key, found.get(keyId(key))));
  if (behind.length > 0) for (const [id, item] of await readByKeys(behind.map(tableKey), projection, store, true)) found.set(id, item);
  const items = listed.flatMap((key) => {
    const item = found.get(keyId(key));
    return inPlace(key, item) && (!filter || filter.test(item)) ? [item] : [];
  });
  return { items: q.count ? [] : items, count: items.length, ...(out.LastEvaluatedKey ? { next: out.LastEvaluatedKey } : {}) };
}

const keyId = (key: Attributes) => `${String(key.pk)}\u0000${String(key.sk)}`;
const BATCH_GET_KEYS = 100;
const KEYS_PER_PAGE = 800;
const BATCH_GET_ATTEMPTS = 8;

/** The items at `keys` that exist (BatchGetItems of 100 keys in parallel, unprocessed keys asked again), by key. */
async function readByKeys(keys: readonly TableKey[], attributes: readonly string[] | undefined, store: EntityStore, consistent = false) {
  const found = new Map<string, Attributes>();
  let left = [...keys];
  for (let attempt = 1; left.length > 0; attempt++) {
    if (attempt > BATCH_GET_ATTEMPTS) throw new Error(`BatchGetItem left ${left.length} keys unprocessed ${BATCH_GET_ATTEMPTS} times`);
    if (attempt > 1) await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(1_000, 20 * 2 ** attempt)));
    const batches = [];
    for (let i = 0; i < left.length; i += BATCH_GET_KEYS)
      batches.push(batchGetOnce(left.slice(i, i + BATCH_GET_KEYS), { attributes, consistent }, store));
    left = [];
    for (const { items, unprocessed } of await Promise.all(batches)) {
      for (const item of items) found.set(keyId(item), item);
      left.push(...unprocessed);
    }
  }
  return found;
}

/** Every page of a Query, following LastEvaluatedKey: `for await (const page of queryPages(q))`. */
export async function* queryPages(q: Query, store = runtimeStore()): AsyncGenerator<Page> {
  let from: Attributes | undefined;
  do {
    const page = await queryOnce(q, from, store);
    yield page;
    from = page.next;
  } while (from);
}

/**
 * Up to `max` items of a sharded partition (`partitions`: item-keys.ts `Keys.dueShards`), each shard read by
 * `read` (in parallel, each in its own order) and taken in turn, so that a full shard crowds out no other.
 */
export async function fromShards<I, P = string>(partitions: readonly P[], max: number, read: (partition: P) => Promise<I[]>): Promise<I[]> {
  const shards = await Promise.all(partitions.map(read));
  const out: I[] = [];
  for (let i = 0; out.length < max && shards.some((items) => i < items.length); i++)
    for (const items of shards) if (i < items.length && out.length < max) out.push(items[i]!);
  return out;
}

/**
 * Where a sharded due partition's items lie: its shards on gsi3 (keys only), and, for items written before their
 * due keys moved there, the shards and the unsharded partition on gsi2 (the same key values).
 */
export const dueTargets = (partition: string): { index: (typeof Index)[keyof typeof Index]; pk: string }[] => {
  const shards = Keys.dueShards(partition);
  return [...shards.slice(0, -1).map((pk) => ({ index: Index.gsi3, pk })), ...shards.map((pk) => ({ index: Index.gsi2, pk }))];
};

/**
 * One BatchGetItem request (at most 100 keys), optionally of some attributes only: the items found and the keys
 * DynamoDB left unprocessed.
 */
export async function batchGetOnce(
  keys: readonly TableKey[],
  options: ReadOptions = {},
  store = runtimeStore(),
): Promise<{ items: Attributes[]; unprocessed: TableKey[] }> {
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

// ---------------------------------------------------------------------------------------------------------
// Lists read from a cursor (API.md §3): positions are sort-key values, so a cursor stays usable after its item
// is deleted and never repeats an item.

/** A list: the items of one partition whose sort keys start with `sk.beginsWith`, in `order`, `limit` a page. */
export interface ListQuery<A extends string = string> extends Omit<Query<A>, "sk" | "order" | "limit" | "count"> {
  sk: { beginsWith: string };
  order: "asc" | "desc";
  limit: number;
  /** The page after this position (a sort-key value) in list order. */
  after?: string;
  /** The page before this position. */
  before?: string;
  /**
   * Partitions listed as one with this one (the same sort keys, merged in list order): where items written before
   * their key moved to another index still lie.
   */
  alsoFrom?: readonly Pick<Query, "index" | "pk">[];
}

export interface ListPage<I = Attributes> {
  items: I[];
  hasNextPage: boolean;
  hasPreviousPage: boolean;
  /**
   * A `before` page (read against list order from its cursor): when the page is cut to its byte limit
   * (shared/http/paging.ts) it keeps the items nearest the cursor.
   */
  backward?: boolean;
}

const HIGHEST = "\uffff";

export async function listPage(q: ListQuery, store = runtimeStore()): Promise<ListPage> {
  if (q.before !== undefined) {
    const preceding = await collectAll(q, store, { from: q.before, forward: false, inclusive: false, want: q.limit + 1 });
    const exists = await collectAll(q, store, { from: q.before, forward: true, inclusive: true, want: 1 });
    return {
      items: preceding.slice(0, q.limit).reverse(),
      hasPreviousPage: preceding.length > q.limit,
      hasNextPage: exists.length > 0,
      backward: true,
    };
  }
  const items = await collectAll(q, store, { from: q.after, forward: true, inclusive: false, want: q.limit + 1 });
  const hasPreviousPage =
    q.after !== undefined && (await collectAll(q, store, { from: q.after, forward: false, inclusive: true, want: 1 })).length > 0;
  return { items: items.slice(0, q.limit), hasNextPage: items.length > q.limit, hasPreviousPage };
}

type Walk = { from?: string; forward: boolean; inclusive: boolean; want: number };

/** `collect` over the list's partition and those it is `alsoFrom`, merged by sort key along the walk. */
async function collectAll(list: ListQuery, store: EntityStore, walk: Walk): Promise<Attributes[]> {
  const { alsoFrom = [], ...first } = list;
  if (alsoFrom.length === 0) return collect(first, store, walk);
  const sources: ListQuery[] = [first, ...alsoFrom.map((partition) => ({ ...first, ...partition }))];
  const found = await Promise.all(sources.map((source) => collect(source, store, walk)));
  const ascending = (list.order === "asc") === walk.forward;
  const keyed = new Map<string, Attributes>();
  found.forEach((items, i) => {
    for (const item of items) keyed.set(String(item[sortKeyOf(sources[i]!)]), item);
  });
  const keys = [...keyed.keys()].sort();
  if (!ascending) keys.reverse();
  return keys.slice(0, walk.want).map((key) => keyed.get(key)!);
}

/** Reads up to `want` items from position `from` (or the start) along (forward) or against list order. */
async function collect(list: ListQuery, store: EntityStore, walk: Walk): Promise<Attributes[]> {
  const { sk, after: _after, before: _before, alsoFrom: _alsoFrom, ...q } = list;
  const ascending = (q.order === "asc") === walk.forward;
  let lo = sk.beginsWith;
  let hi = sk.beginsWith + HIGHEST;
  if (walk.from !== undefined) {
    // A cursor position outside the list's key range (a crafted cursor) must neither reach other entities of
    // the partition nor make an inverted BETWEEN, which DynamoDB rejects.
    if (ascending) lo = walk.from > lo ? walk.from : lo;
    else hi = walk.from < hi ? walk.from : hi;
    if (lo > hi) return [];
  }
  const skName = sortKeyOf(q);
  const query: Query = {
    ...q,
    sk: { between: [lo, hi] },
    order: ascending ? "asc" : "desc",
    limit: q.filter ? Math.max(50, walk.want * 2) : walk.want + 1,
  };
  const out: Attributes[] = [];
  let from: Attributes | undefined;
  do {
    const page = await queryOnce(query, from, store);
    for (const item of page.items) {
      if (!walk.inclusive && walk.from !== undefined && item[skName] === walk.from) continue;
      out.push(item);
      if (out.length >= walk.want) return out;
    }
    from = page.next;
  } while (from);
  return out;
}
