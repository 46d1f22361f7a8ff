/** Following pending withdrawals: on a read (refresh) and in the background (followUpPending); withdraw.ts re-exports them. */
import { QueryCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { UserOperationReceiptNotFoundError } from "viem/account-abstraction";
import { useConfig, useRuntime } from "../runtime";
import { Keys } from "../store/keys";
import { bundlerClient, chainSettings } from "../chain/chains";
import type { ChainSettings } from "../config";
import type { Result, StoredWithdrawal } from "./withdraw-request";
import { settle, table, toResult } from "./withdraw-records";

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
  if (now - w.submittedAt > useConfig().limits.withdrawPendingTimeoutMs) {
    return settle(w, { status: "failed", message: "user operation was not included" });
  }
  await useRuntime()
    .db.send(
      new UpdateCommand({
        TableName: table(),
        Key: Keys.withdrawal(w.owner, w.chainId, w.smartWalletAddress, w.id),
        UpdateExpression: "SET lastCheckedAt = :now",
        ConditionExpression: "#status = :pending",
        ExpressionAttributeNames: { "#status": "status" },
        ExpressionAttributeValues: { ":now": now, ":pending": "pending" },
      }),
    )
    .catch(() => undefined);
  return toResult(w);
}

/**
 * The background half of the follow-up: refreshes the oldest pending withdrawals of every owner
 * (sparse index gsi2 `WITHDRAWAL#pending`). Run every few seconds locally, every minute in AWS.
 */
export async function followUpPending(max = 100): Promise<{ checked: number; settled: number }> {
  const out = await useRuntime().db.send(
    new QueryCommand({
      TableName: table(),
      IndexName: "gsi2",
      KeyConditionExpression: "gsi2pk = :pk",
      ExpressionAttributeValues: { ":pk": Keys.pendingWithdrawal(0, "").gsi2pk },
      Limit: max,
    }),
  );
  let settled = 0;
  for (const item of (out.Items ?? []) as StoredWithdrawal[]) {
    const chain = useConfig().chains.find((c) => c.chainId === item.chainId);
    if (!chain) continue;
    const after = await refresh(item, chainSettings(chain.chainId));
    if (after.status !== "pending") settled += 1;
  }
  return { checked: out.Items?.length ?? 0, settled };
}
