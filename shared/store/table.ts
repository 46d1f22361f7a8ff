/**
 * The one DynamoDB table (access patterns and key design: ./README.md).
 * Generic key attributes; every item also carries `type` (its entity) and `v` (its schema version).
 */
import {
  CreateTableCommand,
  DescribeTableCommand,
  UpdateTableCommand,
  UpdateTimeToLiveCommand,
  type CreateTableCommandInput,
} from "@aws-sdk/client-dynamodb";
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";

export const TTL_ATTRIBUTE = "expiresAt";

/**
 * Index names say which pattern family they serve (README: GSI1 "by parent, newest first", GSI2 "by second
 * parent", GSI3 the sparse due keys of executions, keys only, so a write that leaves its keys alone costs it nothing).
 */
export const Index = { gsi1: "gsi1", gsi2: "gsi2", gsi3: "gsi3" } as const;
/** Indexes whose entries hold keys only: a write that keeps an item's keys costs them nothing (README "Write cost"). */
export const KEYS_ONLY_INDEXES: ReadonlySet<string> = new Set([Index.gsi1, Index.gsi3]);

const keyAttribute = (name: string) => ({ AttributeName: name, AttributeType: "S" as const });
const indexKeys = (name: string) => [keyAttribute(`${name}pk`), keyAttribute(`${name}sk`)];
const indexDefinition = (name: string) => ({
  IndexName: name,
  KeySchema: [
    { AttributeName: `${name}pk`, KeyType: "HASH" as const },
    { AttributeName: `${name}sk`, KeyType: "RANGE" as const },
  ],
  Projection: { ProjectionType: KEYS_ONLY_INDEXES.has(name) ? ("KEYS_ONLY" as const) : ("ALL" as const) },
});

function tableDefinition(tableName: string): CreateTableCommandInput {
  const indexes = Object.values(Index);
  return {
    TableName: tableName,
    BillingMode: "PAY_PER_REQUEST",
    AttributeDefinitions: [keyAttribute("pk"), keyAttribute("sk"), ...indexes.flatMap(indexKeys)],
    KeySchema: [
      { AttributeName: "pk", KeyType: "HASH" },
      { AttributeName: "sk", KeyType: "RANGE" },
    ],
    GlobalSecondaryIndexes: indexes.map(indexDefinition),
  };
}

type IndexDescription = { IndexName?: string; IndexStatus?: string; Projection?: { ProjectionType?: string } };

async function describeIndexes(db: DynamoDBDocumentClient, tableName: string): Promise<IndexDescription[]> {
  const { Table } = await db.send(new DescribeTableCommand({ TableName: tableName }));
  return Table?.GlobalSecondaryIndexes ?? [];
}

/** How long a start waits for a local table's index to be built or dropped (a large table's rebuild takes a while). */
const INDEX_SETTLE_MS = 10 * 60_000;

/** Waits until `ready` holds for the table's indexes (DynamoDB Local builds and drops an index in moments). */
async function untilIndexes(db: DynamoDBDocumentClient, tableName: string, ready: (indexes: IndexDescription[]) => boolean) {
  for (let waited = 0; ; waited += 200) {
    const indexes = await describeIndexes(db, tableName);
    if (ready(indexes)) return;
    if (waited > INDEX_SETTLE_MS) {
      const states = indexes.map((g) => `${g.IndexName} ${g.IndexStatus} ${g.Projection?.ProjectionType}`).join(", ");
      throw new Error(`table ${tableName}: its indexes did not settle in ${INDEX_SETTLE_MS / 60_000} minutes (${states})`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * Brings a table made by an earlier version to today's indexes (a local table kept across versions; SST owns the
 * table on AWS): adds the missing ones and rebuilds, from the items' own key attributes, those whose projection
 * changed (gsi1 held every attribute before it held keys only), one at a time.
 */
async function upgradeIndexes(db: DynamoDBDocumentClient, tableName: string, existing: readonly IndexDescription[]) {
  for (const name of Object.values(Index)) {
    const wanted = indexDefinition(name);
    const found = existing.find((g) => g.IndexName === name);
    const ready = (indexes: IndexDescription[]) =>
      indexes.some(
        (g) =>
          g.IndexName === name &&
          g.Projection?.ProjectionType === wanted.Projection.ProjectionType &&
          (g.IndexStatus ?? "ACTIVE") === "ACTIVE",
      );
    if (found?.Projection?.ProjectionType === wanted.Projection.ProjectionType) {
      // Another process starting on the same table may still be building it.
      if (!ready([found])) await untilIndexes(db, tableName, ready);
      continue;
    }
    if (found) {
      await db
        .send(new UpdateTableCommand({ TableName: tableName, GlobalSecondaryIndexUpdates: [{ Delete: { IndexName: name } }] }))
        .catch(() => undefined); // another process starting on the same table may be dropping it already
      await untilIndexes(
        db,
        tableName,
        (indexes) => !indexes.some((g) => g.IndexName === name && g.Projection?.ProjectionType !== wanted.Projection.ProjectionType),
      );
    }
    const create = { AttributeDefinitions: indexKeys(name), GlobalSecondaryIndexUpdates: [{ Create: wanted }] };
    await db.send(new UpdateTableCommand({ TableName: tableName, ...create })).catch(async (err: unknown) => {
      // Another process starting on the same table may have added it first (as this version defines it).
      const added = (await describeIndexes(db, tableName)).find((g) => g.IndexName === name);
      if (added?.Projection?.ProjectionType !== wanted.Projection.ProjectionType) throw err;
    });
    await untilIndexes(db, tableName, ready);
  }
}

/** Creates the table when it does not exist yet (local runtime and tests; SST owns it in AWS). */
export async function ensureTable(db: DynamoDBDocumentClient, tableName: string) {
  try {
    await upgradeIndexes(db, tableName, await describeIndexes(db, tableName));
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

/**
 * What a failed write means. A transaction is cancelled for more than failed conditions (on AWS also for a
 * conflict with another transaction, throttling, or a validation error, which DynamoDB Local never produces),
 * so its reasons decide: "condition" when one item's condition failed, "retry" when every reason is transient
 * (a conflict or throttling: nothing was written, the same request may go again), else "error".
 */
export type WriteFailure = "condition" | "retry" | "error";

/** Plain writes: a conflict with a transaction in flight, and throttling once the SDK's own retries are spent. */
const RETRYABLE_ERRORS = new Set([
  "TransactionConflictException",
  "ThrottlingException",
  "ProvisionedThroughputExceededException",
  "RequestLimitExceeded",
]);
/** The same causes as a transaction's cancellation reason codes. */
const RETRYABLE_REASONS = new Set(["TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"]);
const KNOWN_REASONS = new Set(["None", "ConditionalCheckFailed", ...RETRYABLE_REASONS]);

export function classifyWriteFailure(err: unknown): WriteFailure {
  const name = (err as { name?: string }).name ?? "";
  if (name === "ConditionalCheckFailedException") return "condition";
  if (RETRYABLE_ERRORS.has(name)) return "retry";
  if (name !== "TransactionCanceledException") return "error";
  const reasons = cancellationReasons(err);
  if (reasons.length === 0 || reasons.some((r) => !KNOWN_REASONS.has(r))) return "error";
  if (reasons.includes("ConditionalCheckFailed")) return "condition";
  return reasons.some((r) => RETRYABLE_REASONS.has(r)) ? "retry" : "error";
}

/** True when a DynamoDB error is a failed condition (a plain write's, or one item's inside a transaction). */
export function isConditionFailure(err: unknown): boolean {
  return classifyWriteFailure(err) === "condition";
}

/** Attempts of one write whose failures are transient (./entity.ts sends every write through `retryTransient`). */
export const WRITE_ATTEMPTS = 8;
const BACKOFF_BASE_MS = 20;
const BACKOFF_CAP_MS = 1_000;

/**
 * Sends a write again while it fails for a transient reason (`classifyWriteFailure` says "retry"), with capped
 * exponential backoff and full jitter, at most `WRITE_ATTEMPTS` times; then, or on any other failure, throws.
 * Safe to repeat: a cancelled transaction or a refused write changed nothing.
 */
export async function retryTransient<T>(send: () => Promise<T>, attempts = WRITE_ATTEMPTS): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await send();
    } catch (err) {
      if (attempt >= attempts || classifyWriteFailure(err) !== "retry") throw err;
      const ceiling = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt);
      await new Promise((resolve) => setTimeout(resolve, Math.random() * ceiling));
    }
  }
}

/**
 * Whether a conditional write landed: false only when its condition failed; a transient failure was already
 * retried (`retryTransient`), so what is left throws.
 */
export async function landed(write: Promise<unknown>): Promise<boolean> {
  try {
    await write;
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

/**
 * For a transaction cancelled because an item's condition failed, or for a transient cause its retries did not
 * outlast: the reason code of each item, in request order (`ConditionalCheckFailed`, `None`, ...). Any other
 * failure (a validation error, a plain write's error) is thrown again, so a caller reads a transaction's
 * outcome in one way and never mistakes an error for a refusal.
 */
export function refusalReasons(err: unknown): string[] {
  if ((err as { name?: string }).name !== "TransactionCanceledException" || classifyWriteFailure(err) === "error") throw err;
  return cancellationReasons(err);
}

/**
 * For a transaction refused as `refusalReasons` reads it: whether each item's condition failed, in request order
 * (`const [recordFailed, counterFailed] = failedConditions(err)`); any other failure is thrown again.
 */
export function failedConditions(err: unknown): boolean[] {
  return refusalReasons(err).map((reason) => reason === "ConditionalCheckFailed");
}

/** For a cancelled transaction: the reason code of each item, in request order. */
function cancellationReasons(err: unknown): string[] {
  const reasons = (err as { CancellationReasons?: { Code?: string }[] }).CancellationReasons ?? [];
  return reasons.map((r) => r.Code ?? "None");
}
