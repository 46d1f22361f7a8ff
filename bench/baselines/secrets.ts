/**
 * Baseline for functions/secrets.ts: the libraries that function cannot do without, wired into one route
 * (hono, the DynamoDB client and document client, the KMS client, jose, valibot), clients built at
 * import time as the function's bootstrap does. What the function carries beyond this is our own cost.
 */
import { Hono } from "hono";
import { handle } from "hono/aws-lambda";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, QueryCommand } from "@aws-sdk/lib-dynamodb";
import { DecryptCommand, KMSClient } from "@aws-sdk/client-kms";
import { importSPKI, jwtVerify } from "jose";
import * as v from "valibot";

const db = DynamoDBDocumentClient.from(new DynamoDBClient({}), { marshallOptions: { removeUndefinedValues: true } });
const kms = new KMSClient({});
const Query = v.object({ limit: v.optional(v.pipe(v.string(), v.regex(/^\d+$/), v.transform(Number)), "20") });

const app = new Hono();
app.get("/secrets", async (c) => {
  const key = await importSPKI(process.env.PUBLIC_KEY ?? "", "ES256");
  await jwtVerify((c.req.header("authorization") ?? "").slice(7), key);
  const { limit } = v.parse(Query, c.req.query());
  const page = await db.send(
    new QueryCommand({ TableName: "t", KeyConditionExpression: "pk = :p", ExpressionAttributeValues: { ":p": "x" }, Limit: limit }),
  );
  if (c.req.query("reveal")) await kms.send(new DecryptCommand({ CiphertextBlob: new Uint8Array() }));
  return c.json({ items: page.Items ?? [] });
});

export const handler = handle(app);
