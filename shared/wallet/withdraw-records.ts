/** Withdrawal records: write, settle (only while pending), read, and the answer's shape (withdraw.ts sends). */
import { getAddress, type Address, type Hex } from "viem";
import type { UserOperationReceipt } from "viem/account-abstraction";
import { useOwner } from "../context";
import { useRuntime } from "../runtime";
import { getWithdrawal, recordWithdrawal, settleWithdrawal } from "../store/entities/withdrawal";
import type { Status } from "./schemas";
import type { Result, StoredWithdrawal } from "./withdraw-request";

// ---------------------------------------------------------------------------------------------
// Records

export async function record(w: StoredWithdrawal): Promise<Result> {
  await recordWithdrawal({ owner: w.owner, chainId: w.chainId, wallet: w.smartWalletAddress, id: w.id }, { ...w });
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
  if (after) return toResult(after as unknown as StoredWithdrawal);
  const current = await getStored(owner, w.chainId, w.smartWalletAddress, w.id);
  return toResult(current ?? (w as StoredWithdrawal));
}

/** The answer after at most `waitMs`: confirmed or failed once the receipt is in, else still pending. */
export async function awaitReceipt(w: Result, receipt: Promise<UserOperationReceipt | undefined>, waitMs: number): Promise<Result> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, waitMs, undefined)));
  const outcome = await Promise.race([receipt, timeout]);
  clearTimeout(timer);
  if (!outcome) return w;
  return outcome.success
    ? settle(w, { status: "confirmed", transactionHash: outcome.receipt.transactionHash })
    : settle(w, { status: "failed", message: "user operation reverted", transactionHash: outcome.receipt.transactionHash });
}

export async function getStored(owner: Address, chainId: number, wallet: Address, id: string): Promise<StoredWithdrawal | undefined> {
  return (await getWithdrawal({ owner, chainId, wallet, id })) as StoredWithdrawal | undefined;
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
