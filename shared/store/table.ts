/**
 * The one DynamoDB table (access patterns and key design: ./README.md).
 * Generic key attributes; every item also carries `type` (its entity) and `v` (its schema version).
 */
import { CreateTableCommand, DescribeTableCommand, UpdateTimeToLiveCommand, type CreateTableCommandInput } from "@aws-sdk/client-dynamodb";
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";

export const TTL_ATTRIBUTE = "expiresAt";

/** Index names say which pattern family they serve (README: GSI1 "by parent, newest first", GSI2 "by second parent"). */
export const Index = { gsi1: "gsi1", gsi2: "gsi2" } as const;

function tableDefinition(tableName: string): CreateTableCommandInput {
  const s = (name: string) => ({ AttributeName: name, AttributeType: "S" as const });
  const gsi = (name: string) => ({
    IndexName: name,
    KeySchema: [
      { AttributeName: `${name}pk`, KeyType: "HASH" as const },
      { AttributeName: `${name}sk`, KeyType: "RANGE" as const },
    ],
    Projection: { ProjectionType: "ALL" as const },
  });
  return {
    TableName: tableName,
    BillingMode: "PAY_PER_REQUEST",
    AttributeDefinitions: [s("pk"), s("sk"), s("gsi1pk"), s("gsi1sk"), s("gsi2pk"), s("gsi2sk")],
    KeySchema: [
      { AttributeName: "pk", KeyType: "HASH" },
      { AttributeName: "sk", KeyType: "RANGE" },
    ],
    GlobalSecondaryIndexes: [gsi(Index.gsi1), gsi(Index.gsi2)],
  };
}

/** Creates the table when it does not exist yet (local runtime and tests; SST owns it in AWS). */
export async function ensureTable(db: DynamoDBDocumentClient, tableName: string) {
  try {
    await db.send(new DescribeTableCommand({ TableName: tableName }));
    return;
  } catch (err) {
    if ((err as { name?: string }).name !== "ResourceNotFoundException") throw err;
  }
  try {
    await db.send(new CreateTableCommand(tableDefinition(tableName)));
  } catch (err) {
    if ((err as { name?: string }).name !== "ResourceInUseException") throw err;
  }
  await db
    .send(new UpdateTimeToLiveCommand({ TableName: tableName, TimeToLiveSpecification: { AttributeName: TTL_ATTRIBUTE, Enabled: true } }))
    .catch(() => undefined); // TTL is advisory; reads treat expired items as absent anyway
}

/** True when a DynamoDB error is a failed condition (plain write or inside a transaction). */
export function isConditionFailure(err: unknown): boolean {
  const name = (err as { name?: string }).name;
  return name === "ConditionalCheckFailedException" || name === "TransactionCanceledException";
}

/** Whether a conditional write landed: false when its condition failed (or its transaction was cancelled), else its error. */
export async function landed(write: Promise<unknown>): Promise<boolean> {
  try {
    await write;
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

/** For a cancelled transaction: the reason code of each item, in request order. */
export function cancellationReasons(err: unknown): string[] {
  const reasons = (err as { CancellationReasons?: { Code?: string }[] }).CancellationReasons ?? [];
  return reasons.map((r) => r.Code ?? "None");
}
