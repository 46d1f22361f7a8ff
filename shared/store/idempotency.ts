/**
 * Idempotency-Key records (API.md §8.8.7, §11.5): one per (owner, scope, key), kept idempotency_ttl_s.
 * A conditional put claims the key before any side effect; the outcome is stored on the record so a
 * repeat answers with it. Expired records count as absent even before DynamoDB's TTL removes them. The header
 * itself is declared and checked with the route (shared/http/schemas.ts IdempotencyKey).
 */
import { createHash } from "node:crypto";
import { ApiError } from "../errors";
import { useConfig, useRuntime } from "../runtime";
import { defineEntity } from "./entity";
import { set, when } from "./expression";
import { Keys } from "./keys";
import { isConditionFailure } from "./table";

/** One record per (owner, scope, key) (pattern 9). */
const IdempotencyRecord = defineEntity({
  type: "idempotency",
  version: 1,
  key: ({ owner, scope, key }: { owner: string; scope: string; key: string }) => Keys.idempotency(owner, scope, key),
});

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
  const id = { owner, scope, key };
  const nowSeconds = Math.floor(useRuntime().now() / 1000);
  try {
    const item = { fingerprint, state: "in_progress", expiresAt: nowSeconds + useConfig().limits.idempotencyTtlS };
    // Expired records count as absent: DynamoDB's TTL deletion is late.
    await IdempotencyRecord.put(id, item, { if: when.or(when.notExists(), when.lt("expiresAt", nowSeconds)) });
    return { kind: "claimed" };
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
  const existing = await IdempotencyRecord.get(id, { consistent: true });
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
  await IdempotencyRecord.update({ owner, scope, key }, [set("state", "done"), set("outcome", outcome)]);
}

/** Forgets a claim whose request failed before any side effect (e.g. a preflight 400). */
export async function release(owner: string, scope: string, key: string) {
  await IdempotencyRecord.delete({ owner, scope, key });
}
