/** Withdrawal records: write, settle (only while pending), read, and the answer's shape (withdraw.ts sends). */
import { getAddress, type Address, type Hex } from "viem";
import { useOwner } from "../context";
import { getWithdrawal, recordWithdrawal, settleWithdrawal, type WithdrawalItem } from "../store/entities/withdrawal";
import type { Status } from "./schemas";
import type { Result, StoredWithdrawal } from "./withdraw-request";
import type { Followed } from "./delivery";
import { useRuntime } from "../current-runtime";

// ---------------------------------------------------------------------------------------------
// Records

/** A stored withdrawal as this module wrote it (its strings are the addresses, hashes and status it was given). */
export const fromItem = (item: WithdrawalItem) => item as StoredWithdrawal;

/** Another request recorded this withdrawal (its id) first: that one sends it, this one answers with it. */
export class AlreadyRecorded extends Error {
  constructor(readonly id: string) {
    super(`withdrawal ${id} was recorded by another request`);
    this.name = "AlreadyRecorded";
  }
}

/** Records a new withdrawal; AlreadyRecorded when its id is taken. */
export async function record(w: StoredWithdrawal): Promise<Result> {
  if (!(await recordWithdrawal({ owner: w.owner, chainId: w.chainId, wallet: w.smartWalletAddress, id: w.id }, { ...w })))
    throw new AlreadyRecorded(w.id);
  return toResult(w);
}

/** Moves a pending withdrawal to its final state (only if it is still pending). */
export async function settle(
  w: Result & { owner?: Address },
  outcome: { status: Status; message?: string; transactionHash?: Hex; userOpHash?: Hex | undefined },
): Promise<Result> {
  const owner = w.owner ?? useOwner();
  const id = { owner, chainId: w.chainId, wallet: w.smartWalletAddress, id: w.id };
  const after = await settleWithdrawal(
    id,
    {
      status: outcome.status,
      message: outcome.message,
      transactionHash: outcome.transactionHash,
      removeUserOpHash: "userOpHash" in outcome && outcome.userOpHash === undefined,
    },
    useRuntime().now(),
  );
  if (after) return toResult(fromItem(after));
  const current = await getStored(owner, w.chainId, w.smartWalletAddress, w.id);
  return toResult(current ?? (w as StoredWithdrawal));
}

/** Stores what following the operation found: confirmed or reverted with a receipt, failed when it was never in; else unchanged (pending). */
export async function settleFollowed(w: Result, followed: Followed): Promise<Result> {
  if ("receipt" in followed) {
    const { receipt } = followed;
    return receipt.success
      ? settle(w, { status: "confirmed", transactionHash: receipt.receipt.transactionHash })
      : settle(w, { status: "failed", message: "user operation reverted", transactionHash: receipt.receipt.transactionHash });
  }
  if ("refused" in followed) return settle(w, { status: "failed", message: followed.refused, userOpHash: undefined });
  return w;
}

export async function getStored(owner: Address, chainId: number, wallet: Address, id: string): Promise<StoredWithdrawal | undefined> {
  const item = await getWithdrawal({ owner, chainId, wallet, id });
  return item && fromItem(item);
}

export function toResult(w: StoredWithdrawal | Result): Result {
  return {
    id: w.id,
    chainId: w.chainId,
    status: w.status,
    ...(w.message && w.status === "failed" ? { message: w.message } : {}),
    ...(w.userOpHash ? { userOpHash: w.userOpHash } : {}),
    ...(w.transactionHash ? { transactionHash: w.transactionHash } : {}),
    submittedAt: w.submittedAt,
    smartWalletAddress: getAddress(w.smartWalletAddress),
    recipientAddress: getAddress(w.recipientAddress),
    amount: w.amount,
    token: w.token,
  };
}
