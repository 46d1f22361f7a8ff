/**
 * Baseline for functions/schedule.ts, the EventBridge Scheduler target: the DynamoDB document client (the
 * claim), EventBridge (hand-over to the runner), EventBridge Scheduler (the next one-time schedules) and
 * croner (the next instants), in a plain handler.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, TransactWriteCommand } from "@aws-sdk/lib-dynamodb";
import { EventBridgeClient, PutEventsCommand } from "@aws-sdk/client-eventbridge";
import { CreateScheduleCommand, SchedulerClient } from "@aws-sdk/client-scheduler";
import { Cron } from "croner";

const db = DynamoDBDocumentClient.from(new DynamoDBClient({}), { marshallOptions: { removeUndefinedValues: true } });
const bus = new EventBridgeClient({});
const scheduler = new SchedulerClient({});

export const handler = async (event: { workflowId: string; instant: string; cron?: string }) => {
  await db.send(
    new TransactWriteCommand({ TransactItems: [{ Put: { TableName: "t", Item: { pk: event.workflowId, sk: event.instant } } }] }),
  );
  await bus.send(new PutEventsCommand({ Entries: [{ Source: "w", DetailType: "run", Detail: JSON.stringify(event) }] }));
  const next = event.cron ? new Cron(event.cron).nextRun() : null;
  if (next)
    await scheduler.send(
      new CreateScheduleCommand({
        Name: event.workflowId,
        ScheduleExpression: `at(${next.toISOString().slice(0, 19)})`,
        FlexibleTimeWindow: { Mode: "OFF" },
        Target: { Arn: "a", RoleArn: "r" },
      }),
    );
};
