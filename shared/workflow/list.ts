/** List and count (§8.8.2, §8.8.3): the caller's workflows through the owner or wallet index, effective status. */
import { QueryCommand, type QueryCommandInput } from "@aws-sdk/lib-dynamodb";
import { useOwner } from "../context";
import { ApiError } from "../errors";
import { useRuntime } from "../runtime";
import { Keys } from "../store/keys";
import { queryPages } from "../store/query";
import { Index } from "../store/table";
import { type Address } from "../address";
import { ULID_PATTERN, type Item, table, type ListStatus, toInfo, fromItem } from "./stored";

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
    if (position !== undefined && !ULID_PATTERN.test(position))
      throw new ApiError(400, "INVALID_CURSOR", "The cursor is not valid for this list.");
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
    hasPreviousPage =
      page.after !== undefined && (await collect(q, { from: page.after, forward: false, inclusive: true, want: 1 })).length > 0;
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
