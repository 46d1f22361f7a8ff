/**
 * Baseline for functions/runner.ts, the runner queue's consumer that runs executions: the DynamoDB document client,
 * KMS (secrets, the controller key) and EventBridge Scheduler (a completed workflow's schedules are removed),
 * plus what the engine cannot run without (bench/baselines/engine.ts), in a plain handler.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, GetCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { DecryptCommand, KMSClient } from "@aws-sdk/client-kms";
import { DeleteScheduleCommand, SchedulerClient } from "@aws-sdk/client-scheduler";
import { runEngineParts } from "./engine";

const db = DynamoDBDocumentClient.from(new DynamoDBClient({}), { marshallOptions: { removeUndefinedValues: true } });
const kms = new KMSClient({});
const scheduler = new SchedulerClient({});

export const handler = async (event: { detail: { executionId: string } }) => {
  const execution = await db.send(new GetCommand({ TableName: "t", Key: { pk: event.detail.executionId, sk: "EXECUTION" } }));
  await kms.send(new DecryptCommand({ CiphertextBlob: new Uint8Array() }));
  const result = await runEngineParts(process.env.RPC_URL ?? "");
  await db.send(
    new UpdateCommand({
      TableName: "t",
      Key: { pk: event.detail.executionId, sk: "EXECUTION" },
      UpdateExpression: "SET r = :r",
      ExpressionAttributeValues: { ":r": String(result.sum) },
    }),
  );
  if (execution.Item?.last) await scheduler.send(new DeleteScheduleCommand({ Name: event.detail.executionId }));
};
