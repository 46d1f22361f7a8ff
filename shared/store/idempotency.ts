/**
 * Idempotency-Key records (API.md §8.8.7, §11.5): one per (owner, scope, key), kept idempotency_ttl_s.
 * A conditional put claims the key before any side effect; the outcome is stored on the record so a
 * repeat answers with it. Expired records count as absent even before DynamoDB's TTL removes them. The header
 * itself is declared and checked with the route (shared/http/schemas.ts IdempotencyKey).
 */
import { createHash } from "node:crypto";
import { DeleteCommand, GetCommand, PutCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { ApiError } from "../errors";
import { useConfig, useRuntime } from "../runtime";
import { Keys } from "./keys";
import { isConditionFailure } from "./table";

/** Canonical JSON (sorted keys) hash of a request body. */
export function bodyFingerprint(body: unknown): string {
  const canonical = (value: unknown): unknown =>
    Array.isArray(value)
      ? value.map(canonical)
      : value && typeof value === "object"
        ? Object.fromEntries(
            Object.keys(value)
              .sort()
              .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
          )
        : value;
  return createHash("sha256")
    .update(JSON.stringify(canonical(body)))
    .digest("hex");
}

export type Claim = { kind: "claimed" } | { kind: "replay"; outcome: Record<string, unknown> };

export async function claim(owner: string, scope: string, key: string, fingerprint: string): Promise<Claim> {
  const { db, now } = useRuntime();
  const { tableName, limits } = useConfig();
  const itemKey = Keys.idempotency(owner, scope, key);
  const nowSeconds = Math.floor(now() / 1000);
  try {
    await db.send(
      new PutCommand({
        TableName: tableName,
        Item: { ...itemKey, type: "idempotency", v: 1, fingerprint, state: "in_progress", expiresAt: nowSeconds + limits.idempotencyTtlS },
        ConditionExpression: "attribute_not_exists(pk) OR expiresAt < :now",
        ExpressionAttributeValues: { ":now": nowSeconds },
      }),
    );
    return { kind: "claimed" };
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
  const existing = (await db.send(new GetCommand({ TableName: tableName, Key: itemKey, ConsistentRead: true }))).Item;
  if (!existing) return claim(owner, scope, key, fingerprint); // released meanwhile
  if (existing.fingerprint !== fingerprint) {
    throw new ApiError(422, "IDEMPOTENCY_KEY_MISMATCH", "This Idempotency-Key was used with a different request body.");
  }
  if (existing.state !== "done") {
    throw new ApiError(409, "IDEMPOTENCY_IN_PROGRESS", "A request with this Idempotency-Key is still being processed; retry shortly.");
  }
  return { kind: "replay", outcome: existing.outcome as Record<string, unknown> };
}

/** Stores the outcome that repeats will be answered with. */
export async function complete(owner: string, scope: string, key: string, outcome: Record<string, unknown>) {
  await useRuntime().db.send(
    new UpdateCommand({
      TableName: useConfig().tableName,
      Key: Keys.idempotency(owner, scope, key),
      UpdateExpression: "SET #state = :done, outcome = :outcome",
      ExpressionAttributeNames: { "#state": "state" },
      ExpressionAttributeValues: { ":done": "done", ":outcome": outcome },
    }),
  );
}

/** Forgets a claim whose request failed before any side effect (e.g. a preflight 400). */
export async function release(owner: string, scope: string, key: string) {
  await useRuntime().db.send(new DeleteCommand({ TableName: useConfig().tableName, Key: Keys.idempotency(owner, scope, key) }));
}
