/**
 * First baseline for functions/workflows.ts: hono with the AWS SDK clients the workflow routes send requests
 * with (DynamoDB, KMS for secrets and the controller key, EventBridge for asynchronous runs, EventBridge
 * Scheduler for time triggers), jose and valibot. bench/baselines/workflows-engine.ts adds what the engine
 * cannot run without.
 */
import { Hono } from "hono";
import { handle } from "hono/aws-lambda";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, TransactWriteCommand } from "@aws-sdk/lib-dynamodb";
import { DecryptCommand, KMSClient } from "@aws-sdk/client-kms";
import { EventBridgeClient, PutEventsCommand } from "@aws-sdk/client-eventbridge";
import { CreateScheduleCommand, SchedulerClient } from "@aws-sdk/client-scheduler";
import { importSPKI, jwtVerify } from "jose";
import * as v from "valibot";

const db = DynamoDBDocumentClient.from(new DynamoDBClient({}), { marshallOptions: { removeUndefinedValues: true } });
const kms = new KMSClient({});
const bus = new EventBridgeClient({});
const scheduler = new SchedulerClient({});
const Create = v.object({
  name: v.pipe(v.string(), v.maxLength(128)),
  trigger: v.object({ type: v.string() }),
  nodes: v.array(v.unknown()),
});

const app = new Hono();
app.post("/workflows", async (c) => {
  await jwtVerify((c.req.header("authorization") ?? "").slice(7), await importSPKI(process.env.PUBLIC_KEY ?? "", "ES256"));
  const body = v.parse(Create, await c.req.json());
  await db.send(new TransactWriteCommand({ TransactItems: [{ Put: { TableName: "t", Item: { pk: "w", sk: "w", ...body } } }] }));
  if (body.trigger.type === "cron")
    await scheduler.send(
      new CreateScheduleCommand({
        Name: "w",
        ScheduleExpression: "rate(5 minutes)",
        FlexibleTimeWindow: { Mode: "OFF" },
        Target: { Arn: "a", RoleArn: "r" },
      }),
    );
  if (body.trigger.type === "manual") {
    await kms.send(new DecryptCommand({ CiphertextBlob: new Uint8Array() }));
    await bus.send(new PutEventsCommand({ Entries: [{ Source: "w", DetailType: "run", Detail: "{}" }] }));
  }
  return c.json(body, 201);
});

export const handler = handle(app);
