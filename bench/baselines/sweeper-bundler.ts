/**
 * Second baseline for functions/sweeper.ts: the DynamoDB document client, and viem's bundler client asking
 * for a user operation's receipt, in a plain handler: everything the follow-up of pending withdrawals needs.
 * The client and the first Query are sweeper.ts's.
 */
import { UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { http } from "viem";
import { UserOperationReceiptNotFoundError, createBundlerClient } from "viem/account-abstraction";
import { db, queryDue } from "./sweeper";

export const handler = async () => {
  const out = await queryDue();
  const bundler = createBundlerClient({ transport: http(process.env.BUNDLER_URL) });
  let settled = 0;
  for (const item of out.Items ?? []) {
    try {
      const receipt = await bundler.getUserOperationReceipt({ hash: item.userOpHash });
      await db.send(
        new UpdateCommand({
          TableName: "t",
          Key: { pk: item.pk, sk: item.sk },
          UpdateExpression: "SET #s = :s",
          ExpressionAttributeNames: { "#s": "status" },
          ExpressionAttributeValues: { ":s": receipt.success ? "confirmed" : "failed" },
        }),
      );
      settled += 1;
    } catch (err) {
      if (!(err instanceof UserOperationReceiptNotFoundError)) throw err;
    }
  }
  return { checked: out.Items?.length ?? 0, settled };
};
