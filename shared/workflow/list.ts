/** List and count (§8.8.2, §8.8.3): the caller's workflows through the owner or wallet index, effective status. */
import { useOwner } from "../context";
import { ApiError } from "../errors";
import { listCount, listQuery, listWorkflows } from "../store/entities/workflow";
import { type Address } from "../address";
import { ULID_PATTERN, type ListStatus, toInfo, fromItems } from "./stored";
import { useRuntime } from "../current-runtime";

// ---------------------------------------------------------------------------------------------------------
// List and count (§8.8.2, §8.8.3)

export interface ListFilter {
  /** EIP-55 or any case; none: all of the caller's workflows. */
  smartWalletAddress: string[];
  /** Effective statuses; none: all. `running` matches nothing. */
  status: ListStatus[];
}

/** Which index partition serves the filter, and the filter for the rest (effective status at `now`). */
const scopedQuery = (owner: Address, f: ListFilter, now: number) =>
  listQuery(owner, { wallets: [...new Set(f.smartWalletAddress.map((a) => a.toLowerCase()))], statuses: f.status, now });

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
  const { items, hasNextPage, hasPreviousPage } = await listWorkflows(scopedQuery(owner, filter, now), page);
  return { items: (await fromItems(items)).map((record) => toInfo(record, now)), hasNextPage, hasPreviousPage };
}

/** GET /workflows:count: how many of the caller's workflows match. */
export async function count(filter: ListFilter): Promise<number> {
  return listCount(scopedQuery(useOwner(), filter, useRuntime().now()));
}
