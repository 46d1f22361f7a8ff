/**
 * Idempotency-Key records (API.md §8.8.7, §11.5, §17.1.4): one per (owner, scope, key), kept idempotency_ttl_s.
 * A conditional put claims the key before any side effect; the outcome is stored on the record so a repeat answers
 * with it. Expired records count as absent even before DynamoDB's TTL removes them. The header itself is declared
 * and checked with the route (shared/http/schemas.ts IdempotencyKey).
 *
 * A crash must not lock a key (README, isolation table: "a client's Idempotency-Key, after a crash"). The claim records, before any side effect, the
 * id of the operation it will perform (`operationId`: the execution id, the withdrawal id) and a lease
 * (`leaseUntil`, ms, idempotency_lease_ms). The operation's first durable side effect is keyed by that id and
 * conditional on it being new, so performing it twice under the same id does it once. A repeat that finds the key
 * still in progress after the lease asks the caller's `recover` for the operation's outcome by its id (finishing
 * what the crash left half-done, e.g. a claim's execution); found: the key is completed with it and replayed. Not
 * found: the repeat takes the claim over (a conditional update on the lease it read, so of several repeats on
 * several instances exactly one does) and performs the operation with the SAME id. Before the lease ends: 409 with
 * Retry-After. So a retry is answered, replayed or performed once, at most one lease after the crashed claim.
 */
import { createHash } from "node:crypto";
import { ApiError } from "../errors";
import { defineEntity } from "./entity";
import { set, when } from "./expression";
import { Keys } from "./item-keys";
import { isConditionFailure, landed } from "./table";
import { useConfig, useRuntime } from "../current-runtime";

/** One record per (owner, scope, key) (pattern 9). */
const IdempotencyRecord = defineEntity({
  type: "idempotency",
  version: 2, // 2: operationId and leaseUntil (records of v 1 have neither)
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

/** The key as one request holds it: its id and the lease it holds (a release is refused once another took over). */
export interface KeyId {
  owner: string;
  scope: string;
  key: string;
}

/**
 * `claimed`: perform the operation with `operationId` (a fresh one, or the crashed request's when `takenOver`), and
 * make the first side effect before `leaseUntil`. `replay`: the outcome stored (or recovered) for the key.
 */
export type Claim =
  { kind: "claimed"; operationId: string; leaseUntil: number; takenOver: boolean } | { kind: "replay"; outcome: Record<string, unknown> };

export interface ClaimRequest {
  fingerprint: string;
  /** The id the operation will be performed under, chosen before any side effect. */
  operationId: string;
  /**
   * The outcome of the operation performed under `operationId`, found by that id, or undefined when it has left no
   * durable outcome (then it is performed again with the same id). Asked only once the lease has passed.
   */
  recover(operationId: string): Promise<Record<string, unknown> | undefined>;
}

export async function claim(id: KeyId, request: ClaimRequest): Promise<Claim> {
  for (let attempt = 1; attempt <= CLAIM_ATTEMPTS; attempt++) {
    const now = useRuntime().now();
    const leaseUntil = now + useConfig().limits.idempotencyLeaseMs;
    if (await putClaim(id, request, now, leaseUntil))
      return { kind: "claimed", operationId: request.operationId, leaseUntil, takenOver: false };
    const existing = await IdempotencyRecord.get(id, { consistent: true });
    if (!existing) continue; // released meanwhile
    if (existing.fingerprint !== request.fingerprint) {
      throw new ApiError(422, "IDEMPOTENCY_KEY_MISMATCH", "This Idempotency-Key was used with a different request body.");
    }
    if (existing.state === "done") return { kind: "replay", outcome: existing.outcome as Record<string, unknown> };
    const operationId = existing.operationId as string | undefined;
    const heldUntil = existing.leaseUntil as number | undefined;
    // A record of v 1 (written before leases) names no operation: nothing can be recovered or performed safely.
    if (operationId === undefined || heldUntil === undefined || now < heldUntil) throw inProgress(heldUntil, now);
    const outcome = await request.recover(operationId);
    if (outcome) {
      await complete(id, operationId, outcome);
      return { kind: "replay", outcome };
    }
    if (await takeOver(id, heldUntil, leaseUntil)) return { kind: "claimed", operationId, leaseUntil, takenOver: true };
    // another repeat took it over (or completed it) meanwhile: read again
  }
  throw inProgress(undefined, 0);
}

const CLAIM_ATTEMPTS = 5;

function inProgress(heldUntil: number | undefined, now: number): ApiError {
  const seconds = heldUntil === undefined ? 1 : Math.max(1, Math.ceil((heldUntil - now) / 1000));
  return new ApiError(409, "IDEMPOTENCY_IN_PROGRESS", "A request with this Idempotency-Key is still being processed; retry shortly.", {
    headers: { "Retry-After": String(seconds) },
  });
}

/** The conditional put of a new claim; expired records count as absent (DynamoDB's TTL deletion is late). */
async function putClaim(id: KeyId, request: ClaimRequest, now: number, leaseUntil: number): Promise<boolean> {
  const nowSeconds = Math.floor(now / 1000);
  const item = {
    fingerprint: request.fingerprint,
    state: "in_progress",
    operationId: request.operationId,
    leaseUntil,
    expiresAt: nowSeconds + useConfig().limits.idempotencyTtlS,
  };
  return landed(IdempotencyRecord.put(id, item, { if: when.or(when.notExists(), when.lt("expiresAt", nowSeconds)) }));
}

/** Takes over a claim whose lease `heldUntil` has passed: only if nobody renewed or completed it since it was read. */
const takeOver = (id: KeyId, heldUntil: number, leaseUntil: number) =>
  landed(
    IdempotencyRecord.update(id, [set("leaseUntil", leaseUntil)], {
      if: when.and(when.eq("state", "in_progress"), when.eq("leaseUntil", heldUntil)),
    }),
  );

/**
 * Stores the outcome that repeats will be answered with: only on the key's record for this operation (a record
 * released and claimed again meanwhile belongs to another request, and a missing one is not written back).
 */
export async function complete(id: KeyId, operationId: string, outcome: Record<string, unknown>) {
  try {
    await IdempotencyRecord.update(id, [set("state", "done"), set("outcome", outcome)], { if: when.eq("operationId", operationId) });
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
}

/**
 * Forgets a claim whose request failed before any side effect (e.g. a preflight 400): only while this request
 * still holds it (its lease as claimed), so a request taken over never frees the key under the one performing it.
 */
export async function release(id: KeyId, leaseUntil: number) {
  await landed(IdempotencyRecord.delete(id, { if: when.and(when.eq("state", "in_progress"), when.eq("leaseUntil", leaseUntil)) }));
}
