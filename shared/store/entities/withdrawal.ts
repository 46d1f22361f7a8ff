/**
 * Withdrawals (API.md §11.5, §11.6; shared/wallet/withdraw*.ts): one item per withdrawal in the owner's
 * partition, per (chain, wallet) newest first by ULID; a pending one also on sparse, keys-only GSI3 `WITHDRAWAL#pending#<shard>` (before GSI3: GSI2),
 * oldest first, for the background follow-up. Owned here: a withdrawal is settled (and leaves the pending index)
 * or touched only while it is pending.
 */
import { defineEntity, type Stored } from "../entity";
import { remove, set, when, type UpdateAction } from "../expression";
import { DuePartition, Keys } from "../item-keys";
import { dueTargets, fromShards, type ListPage } from "../query";
import { isConditionFailure, landed } from "../table";

export interface WithdrawalId {
  owner: string;
  chainId: number;
  wallet: string;
  id: string;
}

/** A withdrawal's attributes (shared/wallet/withdraw-request.ts StoredWithdrawal narrows the strings it answers). */
export interface WithdrawalItem {
  id: string;
  owner: string;
  chainId: number;
  status: string;
  message?: string;
  userOpHash?: string;
  transactionHash?: string;
  submittedAt: number;
  smartWalletAddress: string;
  recipientAddress: string;
  amount: string;
  token: string;
  lastCheckedAt?: number;
  nonceKey?: string;
  userOp?: string;
}

const Withdrawal = defineEntity<WithdrawalItem, WithdrawalId>({
  type: "withdrawal",
  version: 1,
  key: ({ owner, chainId, wallet, id }) => Keys.withdrawal(owner, chainId, wallet, id),
});

const isPending = when.eq("status", "pending");
/** Off the pending index (gsi3, and gsi2 where a withdrawal written before gsi3 held its key). */
const offPendingIndex = [remove("gsi3pk"), remove("gsi3sk"), remove("gsi2pk"), remove("gsi2sk")];

/**
 * Writes a new withdrawal (`record` holds the API fields and `owner`), on the pending index while pending: only if
 * no withdrawal has its id yet (false then). One id is one operation: of two requests performing the same withdrawal
 * (an Idempotency-Key taken over after a crash), only the one whose record lands sends.
 */
export async function recordWithdrawal(id: WithdrawalId, record: WithdrawalItem): Promise<boolean> {
  const item = { ...(record.status === "pending" ? Keys.pendingWithdrawal(record.submittedAt, id.id) : {}), ...record };
  return landed(Withdrawal.put(id, item, { if: when.notExists() }));
}

export const getWithdrawal = (id: WithdrawalId) => Withdrawal.get(id, { consistent: true });

/**
 * Moves a pending withdrawal to `outcome.status` (leaving the pending index unless it stays pending), recording
 * when it was checked; `removeUserOpHash` drops a hash that named no operation. Answers the item after, or
 * undefined when it was not pending (nothing written).
 */
export async function settleWithdrawal(
  id: WithdrawalId,
  outcome: { status: string; message?: string; transactionHash?: string; removeUserOpHash?: boolean },
  now: number,
): Promise<Stored<WithdrawalItem> | undefined> {
  const actions: UpdateAction[] = [set("status", outcome.status), set("lastCheckedAt", now)];
  if (outcome.message) actions.push(set("message", outcome.message));
  if (outcome.transactionHash) actions.push(set("transactionHash", outcome.transactionHash));
  if (outcome.status !== "pending") {
    // final: off the pending index, and the stored operation (kept for sending it again) is no longer needed
    actions.push(...offPendingIndex, remove("userOp"));
    if (outcome.removeUserOpHash) actions.push(remove("userOpHash"));
  }
  try {
    return await Withdrawal.update(id, actions, { if: isPending, returnValues: "ALL_NEW" });
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
    return undefined;
  }
}

/** Records that a pending withdrawal was checked at `now` (a failure is ignored: it is only a rate hint). */
export async function touchWithdrawal(id: WithdrawalId, now: number): Promise<void> {
  await Withdrawal.update(id, [set("lastCheckedAt", now)], { if: isPending }).catch(() => undefined);
}

/**
 * The oldest pending withdrawals of every owner, at most `max` (one Query per shard of the sparse index). A
 * settled one still listed (settled by a version that removed only its gsi2 keys, while a deploy rolled out) is
 * taken off the index here instead of being read again every pass.
 */
export async function pendingWithdrawals(max: number): Promise<Stored<WithdrawalItem>[]> {
  const listed = await fromShards(
    dueTargets(DuePartition.pendingWithdrawal),
    max,
    async ({ index, pk }) => (await Withdrawal.query({ index, pk, limit: max })).items,
  );
  const settled = listed.filter((item) => item.status !== "pending");
  await Promise.all(
    settled.map(
      (item) =>
        Withdrawal.update({ owner: item.owner, chainId: item.chainId, wallet: item.smartWalletAddress, id: item.id }, offPendingIndex, {
          if: when.ne("status", "pending"),
        }).catch(() => undefined), // pending again, or gone: the next pass sees
    ),
  );
  return listed.filter((item) => item.status === "pending");
}

/** Sort-key position of a withdrawal in its wallet's list, for cursors. */
export const withdrawalPosition = (chainId: number, wallet: string, id: string) => `${Keys.withdrawalPrefix(chainId, wallet)}${id}`;

/** One page of a wallet's withdrawals, newest first, only those of `statuses` when given (API.md §3, §11.6). */
export function listWithdrawals(
  owner: string,
  chainId: number,
  wallet: string,
  statuses: readonly string[],
  page: { limit: number; after?: string; before?: string },
): Promise<ListPage<Stored<WithdrawalItem>>> {
  return Withdrawal.list({
    pk: Keys.owner(owner),
    sk: { beginsWith: Keys.withdrawalPrefix(chainId, wallet) },
    order: "desc",
    limit: page.limit,
    after: page.after,
    before: page.before,
    ...(statuses.length ? { filter: when.in("status", statuses) } : {}),
  });
}
