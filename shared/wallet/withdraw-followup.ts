/**
 * Following pending withdrawals: on a read (refresh) and in the background (followUpPending).
 * A pending withdrawal without a receipt whose operation the bundler does not hold (its answer was lost, or the
 * process stopped between recording it and sending it, or the bundler deferred it for the sender's other operations)
 * is sent again, the very same signed operation under the same nonce key (delivery.ts), while it is younger than half
 * of `withdraw_pending_timeout_ms`; it fails only when the bundler refuses it and its nonce is unused (never in).
 */
import { UserOperationReceiptNotFoundError } from "viem/account-abstraction";
import { getAddress } from "viem";
import { pendingWithdrawals, touchWithdrawal } from "../store/entities/withdrawal";
import { bundlerClient, chainSettings, publicClient } from "../chain/chains";
import { loadOperation, resend } from "./delivery";
import type { ChainSettings } from "../config";
import type { Result, StoredWithdrawal } from "./withdraw-request";
import { fromItem, settle, toResult } from "./withdraw-records";
import { useConfig, useRuntime } from "../current-runtime";

const FOLLOW_UP_INTERVAL_MS = 5_000;

/** Asks the bundler about a pending withdrawal (at most once per 5 s) and stores the outcome. */
export async function refresh(w: StoredWithdrawal, chain: ChainSettings): Promise<Result> {
  if (w.status !== "pending") return toResult(w);
  const now = useRuntime().now();
  if (w.lastCheckedAt !== undefined && now - w.lastCheckedAt < FOLLOW_UP_INTERVAL_MS) return toResult(w);
  if (w.userOpHash) {
    try {
      const receipt = await bundlerClient(chain).getUserOperationReceipt({ hash: w.userOpHash });
      return receipt.success
        ? settle(w, { status: "confirmed", transactionHash: receipt.receipt.transactionHash })
        : settle(w, { status: "failed", message: "user operation reverted", transactionHash: receipt.receipt.transactionHash });
    } catch (err) {
      if (!(err instanceof UserOperationReceiptNotFoundError)) return toResult(w); // bundler unreachable: last stored state
    }
  }
  const { withdrawPendingTimeoutMs } = useConfig().limits;
  if (now - w.submittedAt > withdrawPendingTimeoutMs) {
    return settle(w, { status: "failed", message: "user operation was not included" });
  }
  if (w.userOp && now - w.submittedAt < withdrawPendingTimeoutMs / 2) {
    // Not included yet: make sure the bundler holds it (a re-send of the same operation is answered "already known").
    try {
      const again = await resend(publicClient(chain), bundlerClient(chain), getAddress(chain.entryPoint), loadOperation(w.userOp));
      if (typeof again === "object" && "refused" in again)
        return settle(w, { status: "failed", message: again.refused, userOpHash: undefined });
    } catch {
      // the chain or the bundler could not be asked: the next follow-up asks again
    }
  }
  await touchWithdrawal({ owner: w.owner, chainId: w.chainId, wallet: w.smartWalletAddress, id: w.id }, now);
  return toResult(w);
}

/**
 * The background half of the follow-up: refreshes the oldest pending withdrawals of every owner
 * (sparse index gsi3 `WITHDRAWAL#pending#<shard>`). Run every few seconds locally, every minute in AWS.
 */
export async function followUpPending(max = 100): Promise<{ checked: number; settled: number }> {
  const items = (await pendingWithdrawals(max)).map(fromItem);
  let settled = 0;
  for (const item of items) {
    const chain = useConfig().chains.find((c) => c.chainId === item.chainId);
    if (!chain) continue;
    const after = await refresh(item, chainSettings(chain.chainId));
    if (after.status !== "pending") settled += 1;
  }
  return { checked: items.length, settled };
}
