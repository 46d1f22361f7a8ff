/**
 * The table's indexes (shared/store/table.ts): a new table gets all three, gsi3 keys only; a table made before gsi3
 * (a local table kept across versions) gets it added.
 */
import { describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import { CreateTableCommand, DescribeTableCommand } from "@aws-sdk/client-dynamodb";
import { ensureTable } from "../../shared/store/table";
import { useTestRuntime } from "../support/runtime";

const rt = await useTestRuntime();

const projections = async (tableName: string) => {
  const { Table } = await rt.db.send(new DescribeTableCommand({ TableName: tableName }));
  return Object.fromEntries((Table?.GlobalSecondaryIndexes ?? []).map((g) => [g.IndexName, g.Projection?.ProjectionType]));
};

describe("ensureTable", () => {
  it("creates gsi1 and gsi2 projecting all attributes, gsi3 keys only", async () => {
    expect(await projections(rt.config.tableName)).toEqual({ gsi1: "ALL", gsi2: "ALL", gsi3: "KEYS_ONLY" });
  });

  it("adds gsi3 to a table made before it, and leaves a complete table as it is", async () => {
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
    await rt.db.send(
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
    await ensureTable(rt.db, tableName);
    expect(await projections(tableName)).toEqual({ gsi1: "ALL", gsi2: "ALL", gsi3: "KEYS_ONLY" });
    await Promise.all([ensureTable(rt.db, tableName), ensureTable(rt.db, tableName)]);
    expect(await projections(tableName)).toEqual({ gsi1: "ALL", gsi2: "ALL", gsi3: "KEYS_ONLY" });
  });
});
