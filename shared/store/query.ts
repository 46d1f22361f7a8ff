/**
 * Cursor-paged queries over one partition (or one index partition) in list order (API.md §3).
 * Positions are sort-key values, so a cursor stays usable after its item is deleted and never repeats an item.
 */
import { QueryCommand, type QueryCommandInput } from "@aws-sdk/lib-dynamodb";
import { useRuntime } from "../runtime";
import { Placeholders, type Condition } from "./expression";

type Item = Record<string, unknown>;

export interface PagedQuery {
  index?: string;
  /** Partition key attribute and value, e.g. `pk` / `OWNER#0xabc`. */
  pkName: string;
  pk: string;
  skName: string;
  /** Only sort keys that start with this prefix belong to the list. */
  skPrefix: string;
  /** List order: ascending or descending sort key. */
  order: "asc" | "desc";
  filter?: { expression: string; names?: Record<string, string>; values?: Record<string, unknown> };
  /** A filter given as a condition value (./expression.ts), instead of `filter`. */
  where?: Condition;
  limit: number;
  after?: string;
  before?: string;
}

export interface PageResult {
  items: Item[];
  hasNextPage: boolean;
  hasPreviousPage: boolean;
  /**
   * A `before` page (read against list order from its cursor): when the page is cut to its byte limit
   * (shared/http/paging.ts) it keeps the items nearest the cursor.
   */
  backward?: boolean;
}

const HIGHEST = "\uffff";

export async function queryPage(q: PagedQuery): Promise<PageResult> {
  if (q.before !== undefined) {
    const preceding = await collect(q, { from: q.before, forward: false, inclusive: false, want: q.limit + 1 });
    const exists = await collect(q, { from: q.before, forward: true, inclusive: true, want: 1 });
    return {
      items: preceding.slice(0, q.limit).reverse(),
      hasPreviousPage: preceding.length > q.limit,
      hasNextPage: exists.length > 0,
      backward: true,
    };
  }
  const items = await collect(q, { from: q.after, forward: true, inclusive: false, want: q.limit + 1 });
  const hasPreviousPage =
    q.after !== undefined && (await collect(q, { from: q.after, forward: false, inclusive: true, want: 1 })).length > 0;
  return { items: items.slice(0, q.limit), hasNextPage: items.length > q.limit, hasPreviousPage };
}

/** Reads up to `want` items from position `from` (or the start) along (forward) or against list order. */
async function collect(query: PagedQuery, walk: { from?: string; forward: boolean; inclusive: boolean; want: number }): Promise<Item[]> {
  const q = withWhere(query);
  const { db, config } = useRuntime();
  const ascending = (q.order === "asc") === walk.forward;
  let lo = q.skPrefix;
  let hi = q.skPrefix + HIGHEST;
  if (walk.from !== undefined) {
    // A cursor position outside the list's key range (a crafted cursor) must neither reach other entities of
    // the partition nor make an inverted BETWEEN, which DynamoDB rejects.
    if (ascending) lo = walk.from > lo ? walk.from : lo;
    else hi = walk.from < hi ? walk.from : hi;
    if (lo > hi) return [];
  }
  const input: QueryCommandInput = {
    TableName: config.tableName,
    IndexName: q.index,
    KeyConditionExpression: "#pk = :pk AND #sk BETWEEN :lo AND :hi",
    ExpressionAttributeNames: { "#pk": q.pkName, "#sk": q.skName, ...q.filter?.names },
    ExpressionAttributeValues: { ":pk": q.pk, ":lo": lo, ":hi": hi, ...q.filter?.values },
    FilterExpression: q.filter?.expression,
    ScanIndexForward: ascending,
  };
  const out: Item[] = [];
  let startKey: Record<string, unknown> | undefined;
  do {
    const page = await db.send(
      new QueryCommand({ ...input, ExclusiveStartKey: startKey, Limit: q.filter ? Math.max(50, walk.want * 2) : walk.want + 1 }),
    );
    for (const item of page.Items ?? []) {
      if (!walk.inclusive && walk.from !== undefined && item[q.skName] === walk.from) continue;
      out.push(item);
      if (out.length >= walk.want) return out;
    }
    startKey = page.LastEvaluatedKey;
  } while (startKey);
  return out;
}

/** `where` as a `filter` (its placeholders `#n…` / `:v…` never meet the query's own `#pk`, `:lo`, …). */
function withWhere(q: PagedQuery): PagedQuery {
  if (!q.where) return q;
  const p = new Placeholders();
  const expression = q.where.render(p);
  return { ...q, where: undefined, filter: { expression, names: p.names, values: p.values } };
}
