/**
 * Page envelope and opaque cursors (API.md §3). A cursor names a position (a sort-key value) and is bound
 * to the endpoint and caller that issued it; anything else is 400 INVALID_CURSOR.
 */
import * as v from "valibot";
import { createHash } from "node:crypto";
import { ApiError, validationFailed } from "../errors";
import { parse } from "./validate";
import { asInteger, component, parameter } from "./endpoint";
import type { ListPage } from "../store/query";
import { answerBytes } from "./answer-bytes";
import { useRuntime } from "../current-runtime";

const PageInfo = component(
  "PageInfo",
  v.pipe(
    v.object({
      hasNextPage: v.boolean(),
      hasPreviousPage: v.boolean(),
      startCursor: v.optional(
        v.pipe(v.string(), v.maxLength(512), v.description("Opaque cursor; pass as `before` to get the preceding page.")),
      ),
      endCursor: v.optional(
        v.pipe(v.string(), v.maxLength(512), v.description("Opaque cursor; pass as `after` to get the following page.")),
      ),
    }),
    v.description(
      "`startCursor`/`endCursor` are the cursors of the first and last item of `data`, absent when `data` is empty. `hasNextPage` is true iff at least one item of the (filtered) list comes after the last item of `data`; `hasPreviousPage` iff at least one comes before the first. With an empty page the reference point is the cursor's position. A page is at most 5 MiB serialized: one that would pass it ends early after the last whole item that fits (a `before` page keeps the items nearest its cursor), with `hasNextPage` (`hasPreviousPage`) true, so `limit` is a maximum and following the cursors still visits every item once.",
    ),
  ),
);
type PageInfo = v.InferOutput<typeof PageInfo>;

/** The page envelope `{data, pageInfo}` of a list of `item`, as a named component. */
export const page = <S extends v.GenericSchema>(name: string, item: S) =>
  component(name, v.object({ data: v.array(item), pageInfo: PageInfo }));

const cursor = (description: string) =>
  v.optional(v.pipe(v.string(), v.maxLength(512, "is not a valid cursor"), v.description(description)));

/** limit, after and before (API.md §3): spread into a route's query schema. */
export const PageQuery = {
  limit: parameter(
    "Limit",
    v.optional(
      v.pipe(
        v.string(),
        v.regex(/^\d{1,4}$/, "must be an integer from 1 to 200"),
        v.transform(Number),
        v.minValue(1, "must be at least 1"),
        v.maxValue(200, "must be at most 200"),
        asInteger(1, 200),
        v.description("Page size, 1 to 200 (decimal digits only). `0`, negative, above 200 or not an integer → 400 `VALIDATION_FAILED`."),
      ),
      "20",
    ),
  ),
  after: parameter(
    "After",
    cursor(
      "Cursor: return the items that come after this cursor's item in list order. Not together with `before` (400 `VALIDATION_FAILED`). A cursor that cannot be decoded, or was issued by another endpoint or for another caller → 400 `INVALID_CURSOR`.",
    ),
  ),
  before: parameter(
    "Before",
    cursor(
      "Cursor: return the `limit` items immediately before this cursor's item, in list order. Not together with `after` (400 `VALIDATION_FAILED`). Undecodable or foreign cursor → 400 `INVALID_CURSOR`.",
    ),
  ),
};

const callerTag = (owner: string) => createHash("sha256").update(owner.toLowerCase()).digest("base64url").slice(0, 10);

export function encodeCursor(endpoint: string, owner: string, position: string): string {
  return Buffer.from(JSON.stringify({ e: endpoint, o: callerTag(owner), p: position })).toString("base64url");
}

function decodeCursor(endpoint: string, owner: string, cursor: string): string {
  const invalid = new ApiError(400, "INVALID_CURSOR", "The cursor is not valid for this list.");
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw invalid;
  }
  // Any JSON decodes, `null` and arrays included: only an object with our three members is a cursor.
  if (typeof decoded !== "object" || decoded === null || Array.isArray(decoded)) throw invalid;
  const c = decoded as { e?: unknown; o?: unknown; p?: unknown };
  if (c.e !== endpoint || c.o !== callerTag(owner) || typeof c.p !== "string") throw invalid;
  return c.p;
}

/** Validates limit/after/before and decodes the cursor into a position. */
export function readPageParams(query: Record<string, string | undefined>, endpoint: string, owner: string) {
  const p = parse(v.object(PageQuery), { limit: query.limit, after: query.after, before: query.before }, "query");
  return decodePage(p, endpoint, owner);
}

/** Paging parameters already validated with the other query fields (PageQuery): cursors decoded to positions. */
export function decodePage(p: { limit: number; after?: string; before?: string }, endpoint: string, owner: string) {
  if (p.after !== undefined && p.before !== undefined) {
    throw validationFailed([{ path: "query.before", message: "before and after cannot be used together" }]);
  }
  return {
    limit: p.limit,
    after: p.after === undefined ? undefined : decodeCursor(endpoint, owner, p.after),
    before: p.before === undefined ? undefined : decodeCursor(endpoint, owner, p.before),
  };
}

/**
 * The most the envelope around the items can take: `{"data":[`, `],"pageInfo":`, a pageInfo with both booleans
 * and two cursors of the greatest length §3 allows, and `}`.
 */
const ENVELOPE_BYTES = Buffer.byteLength(
  JSON.stringify({
    data: [],
    pageInfo: { hasNextPage: false, hasPreviousPage: false, startCursor: "x".repeat(512), endCursor: "x".repeat(512) },
  }),
);

/**
 * The byte budget of one list page (API.md §18.2: `max_list_page_bytes`, 5 MiB, as the bytes of the JSON body,
 * counted as the Lambda envelope escapes them when answering there: ./answer-bytes.ts):
 * items are offered in the order the page keeps them and taken while the page, envelope included, stays within
 * it. The first item is always taken (every item the service answers is far below the budget, and a page must
 * make progress whatever the settings).
 */
export class PageBudget {
  private used = ENVELOPE_BYTES;
  private taken = 0;

  constructor(readonly max: number = useRuntime().config.limits.maxListPageBytes) {}

  /** Bytes still free for items (commas included). */
  get remaining(): number {
    return Math.max(0, this.max - this.used);
  }

  /** Takes an item of `bytes` serialized bytes when it fits (with the comma before it); false when it does not. */
  take(bytes: number): boolean {
    const cost = bytes + (this.taken > 0 ? 1 : 0);
    if (this.taken > 0 && this.used + cost > this.max) return false;
    this.used += cost;
    this.taken += 1;
    return true;
  }
}

/**
 * The longest run of `sizes` (serialized bytes, in list order) that fits one page: from the start for a page
 * read forward, from the end for a `before` page (it keeps the items nearest its cursor, so travel backward
 * skips nothing). Returns the index range [from, to) kept.
 */
function fitPage(sizes: number[], backward = false, budget = new PageBudget()): { from: number; to: number } {
  const n = sizes.length;
  let kept = 0;
  while (kept < n && budget.take(sizes[backward ? n - 1 - kept : kept]!)) kept += 1;
  return backward ? { from: n - kept, to: n } : { from: 0, to: kept };
}

/**
 * Builds `{data, pageInfo}` from a queried page; `position` gives each item's cursor position. A page whose body
 * would pass the list page limit (API.md §18.2) ends early after the last whole item that fits, with
 * `hasNextPage` true and `endCursor` at that item (a `before` page, `result.backward`, drops its far end instead
 * and has `hasPreviousPage` true), so the next page starts right after it.
 */
export function pageEnvelope<I, T>(
  result: ListPage<I>,
  toData: (item: I) => T,
  position: (item: I) => string,
  endpoint: string,
  owner: string,
) {
  const all = result.items.map(toData);
  const { from, to } = fitPage(
    all.map((item) => answerBytes(JSON.stringify(item) ?? "null")),
    result.backward,
  );
  const items = result.items.slice(from, to);
  const first = items[0];
  const last = items[items.length - 1];
  const pageInfo: PageInfo = {
    hasNextPage: result.hasNextPage || to < result.items.length,
    hasPreviousPage: result.hasPreviousPage || from > 0,
    ...(first ? { startCursor: encodeCursor(endpoint, owner, position(first)) } : {}),
    ...(last ? { endCursor: encodeCursor(endpoint, owner, position(last)) } : {}),
  };
  return { data: all.slice(from, to), pageInfo };
}
