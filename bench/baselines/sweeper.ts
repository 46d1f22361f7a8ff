/**
 * Baseline for functions/sweeper.ts, a scheduled worker: the DynamoDB document client and a plain handler
 * that runs the one Query the sweeper starts with. (The sweeper also asks the bundler for receipts through
 * viem: bench/baselines/sweeper-bundler.ts adds that.)
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, QueryCommand } from "@aws-sdk/lib-dynamodb";

export const db = DynamoDBDocumentClient.from(new DynamoDBClient({}), { marshallOptions: { removeUndefinedValues: true } });

/** The Query the sweeper starts with. */
export const queryDue = () =>
  db.send(
    new QueryCommand({
      TableName: "t",
      IndexName: "gsi2",
      KeyConditionExpression: "gsi2pk = :p",
      ExpressionAttributeValues: { ":p": "x" },
    }),
  );

export const handler = async () => {
  const out = await queryDue();
  return { checked: out.Items?.length ?? 0 };
};
