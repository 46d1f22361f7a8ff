/**
 * Baseline for functions/executions.ts (and functions/stream.ts's reads): hono, the DynamoDB client and
 * document client, jose and valibot wired into one read route. The executions group reads only: no KMS, no
 * chain, so what the function carries beyond this is our own code and any client it need not load.
 */
import { Hono } from "hono";
import { handle } from "hono/aws-lambda";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, GetCommand, QueryCommand } from "@aws-sdk/lib-dynamodb";
import { importSPKI, jwtVerify } from "jose";
import * as v from "valibot";

const db = DynamoDBDocumentClient.from(new DynamoDBClient({}), { marshallOptions: { removeUndefinedValues: true } });
const Query = v.object({ limit: v.optional(v.pipe(v.string(), v.regex(/^\d+$/), v.transform(Number)), "20") });

const app = new Hono();
app.get("/executions/:id", async (c) => {
  await jwtVerify((c.req.header("authorization") ?? "").slice(7), await importSPKI(process.env.PUBLIC_KEY ?? "", "ES256"));
  const { limit } = v.parse(Query, c.req.query());
  const execution = await db.send(new GetCommand({ TableName: "t", Key: { pk: c.req.param("id"), sk: "EXECUTION" } }));
  const steps = await db.send(
    new QueryCommand({
      TableName: "t",
      KeyConditionExpression: "pk = :p",
      ExpressionAttributeValues: { ":p": c.req.param("id") },
      Limit: limit,
    }),
  );
  return c.json({ ...execution.Item, steps: steps.Items ?? [] });
});

export const handler = handle(app);
