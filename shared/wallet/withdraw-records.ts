/** Withdrawal records: write, settle (only while pending), read, and the answer's shape (withdraw.ts sends). */
import { GetCommand, PutCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { getAddress, type Address, type Hex } from "viem";
import type { UserOperationReceipt } from "viem/account-abstraction";
import { useOwner } from "../context";
import { useConfig, useRuntime } from "../runtime";
import { Keys } from "../store/keys";
import type { Status } from "./schemas";
import type { Result, StoredWithdrawal } from "./withdraw-request";

export const table = () => useConfig().tableName;

// ---------------------------------------------------------------------------------------------
// Records

export async function record(w: StoredWithdrawal): Promise<Result> {
  await useRuntime().db.send(
    new PutCommand({
      TableName: table(),
      Item: {
        ...Keys.withdrawal(w.owner, w.chainId, w.smartWalletAddress, w.id),
        ...(w.status === "pending" ? Keys.pendingWithdrawal(w.submittedAt, w.id) : {}),
        type: "withdrawal",
        v: 1,
        ...w,
      },
    }),
  );
  return toResult(w);
}

/** Moves a pending withdrawal to its final state (only if it is still pending). */
export async function settle(
  w: Result & { owner?: Address },
  outcome: { status: Status; message?: string; transactionHash?: Hex; userOpHash?: Hex | undefined },
): Promise<Result> {
  const owner = w.owner ?? useOwner();
  const sets = ["#status = :status", "lastCheckedAt = :now"];
  const removes = ["gsi2pk", "gsi2sk"];
  const values: Record<string, unknown> = { ":status": outcome.status, ":pending": "pending", ":now": useRuntime().now() };
  if (outcome.message) {
    sets.push("message = :message");
    values[":message"] = outcome.message;
  }
  if (outcome.transactionHash) {
    sets.push("transactionHash = :tx");
    values[":tx"] = outcome.transactionHash;
  }
  if ("userOpHash" in outcome && outcome.userOpHash === undefined) removes.push("userOpHash");
  if (outcome.status === "pending") removes.length = 0;
  try {
    const out = await useRuntime().db.send(
      new UpdateCommand({
        TableName: table(),
        Key: Keys.withdrawal(owner, w.chainId, w.smartWalletAddress, w.id),
        UpdateExpression: `SET ${sets.join(", ")}${removes.length ? ` REMOVE ${removes.join(", ")}` : ""}`,
        ConditionExpression: "#status = :pending",
        ExpressionAttributeNames: { "#status": "status" },
        ExpressionAttributeValues: values,
        ReturnValues: "ALL_NEW",
      }),
    );
    return toResult(out.Attributes as StoredWithdrawal);
  } catch (err) {
    if ((err as { name?: string }).name !== "ConditionalCheckFailedException") throw err;
    const current = await getStored(owner, w.chainId, w.smartWalletAddress, w.id);
    return toResult(current ?? (w as StoredWithdrawal));
  }
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
  const out = await useRuntime().db.send(
    new GetCommand({ TableName: table(), Key: Keys.withdrawal(owner, chainId, wallet, id), ConsistentRead: true }),
  );
  return out.Item as StoredWithdrawal | undefined;
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
