/**
 * Baseline for functions/watcher.ts: the DynamoDB document client (checkpoints, watch entries, claims),
 * EventBridge (hand-over to the runner), EventBridge Scheduler (a completed workflow's schedules are removed)
 * and viem's public client reading blocks and logs, in a plain handler.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, QueryCommand } from "@aws-sdk/lib-dynamodb";
import { EventBridgeClient, PutEventsCommand } from "@aws-sdk/client-eventbridge";
import { DeleteScheduleCommand, SchedulerClient } from "@aws-sdk/client-scheduler";
import { createPublicClient, http } from "viem";

const db = DynamoDBDocumentClient.from(new DynamoDBClient({}), { marshallOptions: { removeUndefinedValues: true } });
const bus = new EventBridgeClient({});
const scheduler = new SchedulerClient({});

export const handler = async () => {
  const client = createPublicClient({ transport: http(process.env.RPC_URL ?? "http://127.0.0.1:8545") });
  const watches = await db.send(
    new QueryCommand({ TableName: "t", KeyConditionExpression: "pk = :p", ExpressionAttributeValues: { ":p": "WATCH" } }),
  );
  const head = await client.getBlockNumber();
  const logs = await client.getLogs({ fromBlock: head, toBlock: head });
  for (const log of logs)
    await bus.send(
      new PutEventsCommand({ Entries: [{ Source: "w", DetailType: "run", Detail: JSON.stringify({ tx: log.transactionHash }) }] }),
    );
  if (!watches.Items?.length) await scheduler.send(new DeleteScheduleCommand({ Name: "none" }));
};
