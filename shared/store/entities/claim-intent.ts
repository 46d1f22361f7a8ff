/**
 * What a claim writes besides the workflow's count and the execution (shared/workflow/claim.ts, "Claiming"), and the
 * index attributes ("markers") its count update leaves on the workflow item:
 *
 * - fire records (pattern 17): an automatic fire's intent `FIRE#<fireId>` / `FIRE`, put conditionally before the
 *   workflow's count is taken (a second claim of one fire fails it), holding the execution item to write and listed
 *   on the sparse, keys-only gsi3 `CLAIM#inflight#<shard>` while in flight; kept after (it guards its fire);
 * - claim journals (pattern 22): per process and minute, the workflows whose manual executions that process
 *   claimed, written before the first of those count updates, deleted once all of them wrote their executions; the
 *   sweeper takes over the journals still there when due (gsi3 `CLAIM#journal#<shard>`);
 * - items written before gsi3 held these due keys carry them as `gsi2pk`/`gsi2sk`: readers read both, and closing an
 *   intent removes both;
 * - manual claim intents `CLAIM#<executionId>` / `CLAIM` (pattern 22, written by claims before the journals; only
 *   read, finished and deleted now, by the sweeper's recovery of those still in flight).
 *
 * Markers: a fire's claim records its index as `claim#FIRE#<fireId>` (an old manual intent's as `claim#CLAIM#<id>`);
 * a manual claim as `claim#EXEC#<executionId>`, beside `claimInput#<executionId>` (its run input, or the number of
 * run-input parts written before it), from which the sweeper writes the execution a crash left unwritten.
 */
import { defineEntity, type TransactItem } from "../entity";
import { batchGetOnce, dueTargets, fromShards, queryOnce, type TableKey } from "../query";
import { addTo, remove, set, when } from "../expression";
import { DuePartition, Keys } from "../item-keys";
import { isConditionFailure, TTL_ATTRIBUTE } from "../table";

type Item = Record<string, unknown>;

const FireRecord = defineEntity({ type: "fire", version: 1, key: (fireId: string) => Keys.fire(fireId) });
const ClaimIntent = defineEntity({ type: "claim", version: 1, key: (executionId: string) => Keys.claimIntent(executionId) });
const ClaimJournal = defineEntity({
  type: "claimJournal",
  version: 1,
  key: ({ claimer, epoch }: { claimer: string; epoch: number }) => Keys.claimJournal(claimer, epoch),
});

const FIRE_PREFIX = Keys.fire("").pk;
const CLAIM_PREFIX = Keys.claimIntent("").pk;
/** Attributes of the workflow item recording the index a claim took start with this. */
const MARKER_PREFIX = "claim#";
/** A manual claim's marker: `claim#EXEC#<executionId>`. */
const RUN_MARKER_PREFIX = `${MARKER_PREFIX}EXEC#`;
/** A manual claim's run input beside its marker: `claimInput#<executionId>`. */
const RUN_INPUT_PREFIX = "claimInput#";

/** The key of a fire's intent (its record), or of an old manual trigger's intent. */
export const intentKey = (claim: { fireId?: string; executionId: string }): TableKey =>
  claim.fireId !== undefined ? FireRecord.key(claim.fireId) : ClaimIntent.key(claim.executionId);

/** The entity and id an intent key belongs to. */
const owning = (key: TableKey) =>
  key.pk.startsWith(FIRE_PREFIX)
    ? { entity: FireRecord, id: key.pk.slice(FIRE_PREFIX.length) }
    : { entity: ClaimIntent, id: key.pk.slice(CLAIM_PREFIX.length) };

/** The workflow item's attribute that records the index taken for the intent at `key`. */
export const markerOf = (key: TableKey) => `${MARKER_PREFIX}${key.pk}`;
/** The marker of a manual claim (no intent): `claim#EXEC#<executionId>`. */
export const runMarkerOf = (executionId: string) => `${RUN_MARKER_PREFIX}${executionId}`;
/** The attribute holding a manual claim's run input (or its parts count) beside its marker. */
export const runInputAttributeOf = (executionId: string) => `${RUN_INPUT_PREFIX}${executionId}`;
export const isMarker = (attribute: string) => attribute.startsWith(MARKER_PREFIX);
/** The execution id of a manual claim's marker, or undefined for a fire's (or an old intent's) marker. */
export const runMarkerExecution = (attribute: string): string | undefined =>
  attribute.startsWith(RUN_MARKER_PREFIX) ? attribute.slice(RUN_MARKER_PREFIX.length) : undefined;
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

/** Writes a fire's intent, listed in flight; false when one is there already (the fire was claimed before). */
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
    await FireRecord.update(id, [...offInFlightIndex, remove("execution")], { if: when.exists() });
  } catch (err) {
    if (!isConditionFailure(err)) throw err; // expired and removed: nothing to close
  }
}

const offInFlightIndex = [remove("gsi3pk"), remove("gsi3sk"), remove("gsi2pk"), remove("gsi2sk")];
/** An intent is in flight while it is listed (on gsi3, or on gsi2 when written before gsi3). */
const listedInFlight = when.or(when.exists("gsi3pk"), when.exists("gsi2pk"));

/** Transaction item: the intent at `key` is still in flight (not closed, not expired away). */
export const intentInFlight = (key: TableKey): TransactItem => {
  const { entity, id } = owning(key);
  return entity.tx.check(id, listedInFlight);
};

/**
 * Up to `max` items of a sparse due partition sorting before `bound`'s sort key, oldest first (one Query per
 * shard; gsi3 holds keys, so its pages' items are read by key).
 */
const sparseBefore = (partition: string, bound: { gsi3sk: string }, max: number) =>
  fromShards(
    dueTargets(partition),
    max,
    async ({ index, pk }) => (await queryOnce({ index, pk, sk: { lt: bound.gsi3sk }, limit: max })).items,
  );

/** Up to `max` intents in flight whose claim began before `before` (ms), oldest first (one Query). */
export async function intentsInFlightBefore(before: number, max: number): Promise<StoredIntent[]> {
  const items = await sparseBefore(DuePartition.claimInFlight, Keys.claimInFlight(before, ""), max);
  return items.map((item) => ({
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
 * Of the intent markers `markers` (fires' and old manual intents'), those whose intents are closed (one strongly
 * consistent BatchGetItem of the intents' keys): an intent is closed only after its execution is written.
 * Unanswered keys count as open.
 */
export async function closedMarkers(markers: readonly string[]): Promise<string[]> {
  const out = await batchGetOnce(markers.map(intentKeyOfMarker), { consistent: true, attributes: ["pk", "gsi3pk", "gsi2pk"] });
  const open = new Set<string>();
  for (const item of out.items) if (listedInFlight.test(item)) open.add(String(item.pk));
  for (const key of out.unprocessed) open.add(key.pk);
  return markers.filter((m) => !open.has(intentKeyOfMarker(m).pk));
}

// ---------------------------------------------------------------------------------------------------------
// Claim journals (pattern 22)

export interface JournalId {
  /** The process's claimer id. */
  claimer: string;
  /** The epoch's start (ms). */
  epoch: number;
}

/**
 * Adds `workflowIds` to the journal (one UpdateItem, creating it listed for the sweeper from `dueAt`); `expiresAt`
 * (unix seconds) only cleans up.
 */
export async function journalWorkflows(
  journal: JournalId,
  workflowIds: readonly string[],
  dueAt: number,
  expiresAt: number,
): Promise<void> {
  await ClaimJournal.update(journal, [
    addTo("workflows", new Set(workflowIds)),
    set("type", ClaimJournal.type),
    set("v", ClaimJournal.version),
    set("claimer", journal.claimer),
    set("epoch", journal.epoch),
    ...Object.entries(Keys.claimJournalDue(dueAt, journal.claimer)).map(([name, value]) => set(name, value)),
    remove("gsi2pk"), // a journal written before gsi3 held its due key, listed once
    remove("gsi2sk"),
    set(TTL_ATTRIBUTE, expiresAt),
  ]);
}

/** Deletes the journal (every claim it lists wrote its execution, or the sweeper finished them). */
export async function closeJournal(journal: JournalId): Promise<void> {
  await ClaimJournal.delete(journal);
}

/** Up to `max` journals due at `now` (their process did not close them), oldest first (one Query per shard). */
export async function journalsDue(now: number, max: number): Promise<(JournalId & { workflows: string[] })[]> {
  const items = await sparseBefore(DuePartition.claimJournal, Keys.claimJournalDue(now, ""), max);
  return items.map((item) => ({
    claimer: String(item.claimer),
    epoch: Number(item.epoch),
    workflows: [...((item.workflows as Set<string> | undefined) ?? [])],
  }));
}
