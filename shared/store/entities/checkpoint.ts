/**
 * A chain's checkpoint item (store pattern 18, `CHAIN#<chainId>` / `CHECKPOINT`): the watcher's lease
 * (`leaseOwner`, `leaseUntil` ms) and the cursors a pass writes back while holding it (`block`, `behind`, `floors`,
 * `rev`; shared/watch/checkpoint.ts). At most one holder at a time: taking the lease is conditional on it being
 * free, expired or already this holder's, and every write after that on still holding it.
 */
import { defineEntity } from "../entity";
import { remove, set, when } from "../expression";
import { Keys } from "../item-keys";
import { isConditionFailure } from "../table";

const ChainCheckpoint = defineEntity({ type: "chainCheckpoint", version: 2, key: (chainId: number) => Keys.chainCheckpoint(chainId) });

const heldBy = (holder: string) => when.eq("leaseOwner", holder);

/** Takes (or extends) the lease until `until`; the checkpoint item as it now stands, or null when another holds it. */
export async function acquireLease(chainId: number, holder: string, now: number, until: number): Promise<Record<string, unknown> | null> {
  try {
    const item = await ChainCheckpoint.update(
      chainId,
      [set("leaseOwner", holder), set("leaseUntil", until), set("type", ChainCheckpoint.type), set("v", ChainCheckpoint.version)],
      { if: when.or(when.notExists("leaseUntil"), when.lt("leaseUntil", now), heldBy(holder)), returnValues: "ALL_NEW" },
    );
    return item ?? {};
  } catch (err) {
    if (isConditionFailure(err)) return null;
    throw err;
  }
}

export interface Cursors {
  block: number;
  behind: Record<string, number>;
  floors: Record<string, number>;
  rev: string;
}

/** Writes the cursors and extends the lease to `until`, only while `holder` holds it; false when the lease was lost. */
export async function storeCursors(chainId: number, holder: string, cursors: Cursors, until: number): Promise<boolean> {
  const { block, behind, floors, rev } = cursors;
  try {
    await ChainCheckpoint.update(
      chainId,
      [set("block", block), set("behind", behind), set("floors", floors), set("rev", rev), set("leaseUntil", until)],
      { if: heldBy(holder) },
    );
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

/** Gives the lease up (only `holder`'s own). */
export async function releaseLease(chainId: number, holder: string): Promise<void> {
  try {
    await ChainCheckpoint.update(chainId, [remove("leaseOwner"), remove("leaseUntil")], { if: heldBy(holder) });
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
}

/** The checkpoint item (strongly consistent), if any. */
export async function readCheckpoint(chainId: number): Promise<Record<string, unknown> | undefined> {
  return ChainCheckpoint.get(chainId, { consistent: true });
}

export async function deleteCheckpoint(chainId: number): Promise<void> {
  await ChainCheckpoint.delete(chainId);
}
