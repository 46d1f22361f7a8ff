/**
 * Claim intents (store pattern 22) and fire records (pattern 17): the first write of a claim
 * (shared/workflow/claim.ts, "Claiming"). A manual trigger's intent is `CLAIM#<executionId>` / `CLAIM`, deleted once
 * its execution is written; an automatic fire's intent is its fire record `FIRE#<fireId>` / `FIRE`, kept after (it
 * guards its fire: at most one execution per fire id). Both hold the execution item to write and are listed on
 * the sparse gsi2 `CLAIM#inflight` (`<claimedAt padded>#<executionId>`) while in flight, where the sweeper finds
 * those a crash left. The intent's put is conditional (a second claim of one fire, or of one execution id, fails
 * it); so is the execution's (writing it again is a no-op).
 */
import { batchGetOnce, defineEntity, queryPartition, type TableKey, type TransactItem } from "../entity";
import { remove, when } from "../expression";
import { Keys } from "../keys";
import { Index, isConditionFailure } from "../table";

type Item = Record<string, unknown>;

const FireRecord = defineEntity({ type: "fire", version: 1, key: (fireId: string) => Keys.fire(fireId) });
const ClaimIntent = defineEntity({ type: "claim", version: 1, key: (executionId: string) => Keys.claimIntent(executionId) });

const FIRE_PREFIX = Keys.fire("").pk;
const CLAIM_PREFIX = Keys.claimIntent("").pk;
/** Attribute of the workflow item recording the index a claim took: `claim#` + the intent's partition key. */
const MARKER_PREFIX = "claim#";

/** The key of a claim's intent: its fire record, or a manual trigger's intent. */
export const intentKey = (claim: { fireId?: string; executionId: string }): TableKey =>
  claim.fireId !== undefined ? FireRecord.key(claim.fireId) : ClaimIntent.key(claim.executionId);

/** The entity and id an intent key belongs to. */
const owning = (key: TableKey) =>
  key.pk.startsWith(FIRE_PREFIX)
    ? { entity: FireRecord, id: key.pk.slice(FIRE_PREFIX.length) }
    : { entity: ClaimIntent, id: key.pk.slice(CLAIM_PREFIX.length) };

/** The workflow item's attribute that records the index taken for the intent at `key`. */
export const markerOf = (key: TableKey) => `${MARKER_PREFIX}${key.pk}`;
export const isMarker = (attribute: string) => attribute.startsWith(MARKER_PREFIX);
const intentKeyOfMarker = (marker: string): TableKey => {
  const pk = marker.slice(MARKER_PREFIX.length);
  return pk.startsWith(FIRE_PREFIX) ? FireRecord.key(pk.slice(FIRE_PREFIX.length)) : ClaimIntent.key(pk.slice(CLAIM_PREFIX.length));
};

export interface StoredIntent {
  key: TableKey;
  isFire: boolean;
  workflowId: string;
  executionId: string;
  /** The claim's time (ms). */
  claimedAt: number;
  /** The execution item to write. */
  execution: Item;
  /** Unix seconds (TTL). */
  expiresAt: number;
}

/** Writes the intent, listed in flight; false when one is there already (a fire claimed before, or a repeat). */
export async function putIntent(intent: StoredIntent): Promise<boolean> {
  const { entity, id } = owning(intent.key);
  const { workflowId, executionId, claimedAt, execution, expiresAt } = intent;
  try {
    await entity.put(
      id,
      // The execution as a map: its attributes are DynamoDB values already (as JSON text its strings' escapes
      // could double a 200 KB run input past the item limit).
      { ...Keys.claimInFlight(claimedAt, executionId), workflowId, executionId, claimedAt, execution, expiresAt },
      { if: when.notExists() },
    );
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

/** A manual trigger's intent is deleted; a fire record stays (it guards its fire), no longer listed in flight. */
export async function closeIntent(key: TableKey): Promise<void> {
  const { entity, id } = owning(key);
  if (entity === ClaimIntent) return void (await ClaimIntent.delete(id));
  try {
    await FireRecord.update(id, [remove("gsi2pk"), remove("gsi2sk"), remove("execution")], { if: when.exists() });
  } catch (err) {
    if (!isConditionFailure(err)) throw err; // expired and removed: nothing to close
  }
}

/** Transaction item: the intent at `key` is still in flight (not closed, not expired away). */
export const intentInFlight = (key: TableKey): TransactItem => {
  const { entity, id } = owning(key);
  return entity.tx.check(id, when.exists("gsi2pk"));
};

/** Up to `max` intents in flight whose claim began before `before` (ms), oldest first (one Query). */
export async function intentsInFlightBefore(before: number, max: number): Promise<StoredIntent[]> {
  const bound = Keys.claimInFlight(before, "");
  const page = await queryPartition({
    index: Index.gsi2,
    partition: ["gsi2pk", bound.gsi2pk],
    sort: when.lt("gsi2sk", bound.gsi2sk),
    limit: max,
  });
  return page.items.map((item) => ({
    key: { pk: String(item.pk), sk: String(item.sk) },
    isFire: item.type === FireRecord.type,
    workflowId: String(item.workflowId),
    executionId: String(item.executionId),
    claimedAt: Number(item.claimedAt),
    execution: item.execution as Item,
    expiresAt: Number(item.expiresAt),
  }));
}

/**
 * Of the index attributes `markers`, those whose intents are closed (one strongly consistent BatchGetItem of the
 * intents' keys): an intent is closed only after its execution is written. Unanswered keys count as open.
 */
export async function closedMarkers(markers: readonly string[]): Promise<string[]> {
  const out = await batchGetOnce(markers.map(intentKeyOfMarker), { consistent: true, attributes: ["pk", "gsi2pk"] });
  const open = new Set<string>();
  for (const item of out.items) if (item.gsi2pk !== undefined) open.add(String(item.pk));
  for (const key of out.unprocessed) open.add(key.pk);
  return markers.filter((m) => !open.has(intentKeyOfMarker(m).pk));
}
