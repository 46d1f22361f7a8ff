/**
 * Baseline for functions/stream.ts: the same libraries as bench/baselines/executions.ts behind Hono's
 * response-streaming Lambda adapter, writing one frame per status read.
 */
import { Hono } from "hono";
import { streamHandle } from "hono/aws-lambda";
import { streamSSE } from "hono/streaming";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, GetCommand } from "@aws-sdk/lib-dynamodb";
import { importSPKI, jwtVerify } from "jose";
import * as v from "valibot";

const db = DynamoDBDocumentClient.from(new DynamoDBClient({}), { marshallOptions: { removeUndefinedValues: true } });
const Id = v.pipe(v.string(), v.regex(/^[0-9A-HJKMNP-TV-Z]{26}$/));

const app = new Hono();
app.get("/executions/:id", async (c) => {
  await jwtVerify((c.req.header("authorization") ?? "").slice(7), await importSPKI(process.env.PUBLIC_KEY ?? "", "ES256"));
  const id = v.parse(Id, c.req.param("id"));
  return streamSSE(c, async (stream) => {
    const execution = await db.send(new GetCommand({ TableName: "t", Key: { pk: id, sk: "EXECUTION" } }));
    await stream.writeSSE({ event: "status", data: JSON.stringify(execution.Item ?? {}) });
  });
});

export const handler = streamHandle(app);
