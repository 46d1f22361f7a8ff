/**
 * The table's indexes (shared/store/table.ts): a new table gets all three, gsi1 and gsi3 keys only; a table made
 * before (a local table kept across versions) gets gsi3 added and gsi1 rebuilt keys only, its entries kept.
 */
import { describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import { CreateTableCommand, DescribeTableCommand } from "@aws-sdk/client-dynamodb";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, PutCommand, QueryCommand } from "@aws-sdk/lib-dynamodb";
import { startDynamoLocal } from "../../local/dynamodb";
import { ensureTable } from "../../shared/store/table";
import { useTestRuntime } from "../support/runtime";

const rt = await useTestRuntime();

const projections = async (tableName: string) => {
  const { Table } = await rt.db.send(new DescribeTableCommand({ TableName: tableName }));
  return Object.fromEntries((Table?.GlobalSecondaryIndexes ?? []).map((g) => [g.IndexName, g.Projection?.ProjectionType]));
};

describe("ensureTable", () => {
  it("creates gsi2 projecting all attributes, gsi1 and gsi3 keys only", async () => {
    expect(await projections(rt.config.tableName)).toEqual({ gsi1: "KEYS_ONLY", gsi2: "ALL", gsi3: "KEYS_ONLY" });
  });

  // On a DynamoDB Local of its own: one that the rest of the suite keeps busy leaves a new index CREATING for minutes.
  it("adds gsi3 to a table made before it, rebuilds gsi1 keys only with its entries, and leaves a complete table as it is", async () => {
    const local = await startDynamoLocal();
    const db = DynamoDBDocumentClient.from(
      new DynamoDBClient({
        endpoint: local.endpoint,
        region: "us-east-1",
        credentials: { accessKeyId: "local", secretAccessKey: "local" },
      }),
    );
    try {
      await rebuildsAnOldTable(db);
    } finally {
      db.destroy();
      await local.stop();
    }
  }, 180_000);
});

async function rebuildsAnOldTable(db: DynamoDBDocumentClient) {
  const projections = async (tableName: string) => {
    const { Table } = await db.send(new DescribeTableCommand({ TableName: tableName }));
    return Object.fromEntries((Table?.GlobalSecondaryIndexes ?? []).map((g) => [g.IndexName, g.Projection?.ProjectionType]));
  };
  const tableName = `test-${randomUUID()}`;
  const key = (name: string) => ({ AttributeName: name, AttributeType: "S" as const });
  const gsi = (name: string) => ({
    IndexName: name,
    KeySchema: [
      { AttributeName: `${name}pk`, KeyType: "HASH" as const },
      { AttributeName: `${name}sk`, KeyType: "RANGE" as const },
    ],
    Projection: { ProjectionType: "ALL" as const },
  });
  await db.send(
    new CreateTableCommand({
      TableName: tableName,
      BillingMode: "PAY_PER_REQUEST",
      AttributeDefinitions: ["pk", "sk", "gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk"].map(key),
      KeySchema: [
        { AttributeName: "pk", KeyType: "HASH" },
        { AttributeName: "sk", KeyType: "RANGE" },
      ],
      GlobalSecondaryIndexes: [gsi("gsi1"), gsi("gsi2")],
    }),
  );
  const listed = { pk: "WF#01", sk: "WORKFLOW", gsi1pk: "OWNER#0xa#WF", gsi1sk: "01", status: "enabled" };
  await db.send(new PutCommand({ TableName: tableName, Item: listed }));
  const gsi1Entries = async () =>
    (
      await db.send(
        new QueryCommand({
          TableName: tableName,
          IndexName: "gsi1",
          KeyConditionExpression: "gsi1pk = :pk",
          ExpressionAttributeValues: { ":pk": listed.gsi1pk },
        }),
      )
    ).Items;

  await ensureTable(db, tableName);
  expect(await projections(tableName)).toEqual({ gsi1: "KEYS_ONLY", gsi2: "ALL", gsi3: "KEYS_ONLY" });
  expect(await gsi1Entries()).toEqual([{ pk: listed.pk, sk: listed.sk, gsi1pk: listed.gsi1pk, gsi1sk: listed.gsi1sk }]);
  await Promise.all([ensureTable(db, tableName), ensureTable(db, tableName)]);
  expect(await projections(tableName)).toEqual({ gsi1: "KEYS_ONLY", gsi2: "ALL", gsi3: "KEYS_ONLY" });
}
