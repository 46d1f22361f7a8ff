/**
 * The chain's checkpoint item (store pattern 18, `CHAIN#<id>` / `CHECKPOINT`): the lease a pass holds, and the
 * cursors it writes back (watcher.ts, "Progress").
 */
import { acquireLease, releaseLease, storeCursors } from "../store/entities/checkpoint";
import type { WatchEntry } from "../workflow/watch-registry";
import { ownerOf } from "./plan";
import type { Wait } from "./pass-state";
import { useRuntime } from "../current-runtime";

/** How long a lease holds without being extended; every pass extends it. */
const LEASE_MS = 60_000;

// ---------------------------------------------------------------------------------------------------------
// Checkpoint, cursors and lease (pattern 18)

/** Map keys cannot be empty: entries without an owner are kept under this name. */
export const NO_OWNER = "-";

export interface Persisted {
  block?: number;
  rev?: string;
  behind: Record<string, number>;
  floors: Record<string, number>;
}

/** Takes (or extends) the chain's lease; the checkpoint item, or `null` when another holds it. */
export async function acquire(chainId: number, holder: string, now: number): Promise<Persisted | null> {
  const item = await acquireLease(chainId, holder, now, now + LEASE_MS);
  if (!item) return null;
  return {
    ...(typeof item.block === "number" ? { block: item.block } : {}),
    ...(typeof item.rev === "string" ? { rev: item.rev } : {}),
    behind: (item.behind as Record<string, number> | undefined) ?? {},
    floors: (item.floors as Record<string, number> | undefined) ?? {},
  };
}

/** Writes the cursors while still holding the lease (extending it); false when the lease was lost. */
export async function store(
  chainId: number,
  holder: string,
  block: number,
  behind: Record<string, number>,
  floors: Record<string, number>,
  rev: string,
): Promise<boolean> {
  return storeCursors(chainId, holder, { block, behind, floors, rev }, useRuntime().now() + LEASE_MS);
}

/** Gives the lease up so the next invocation starts at once. */
export async function release(chainId: number, holder: string): Promise<void> {
  await releaseLease(chainId, holder);
}

/** Where a workflow stood at the last write: its own cursor, its owner's floor, or the checkpoint's block. */
export function cursorOf(p: Persisted, entry: WatchEntry): number {
  const block = p.block!;
  return Math.min(p.behind[entry.workflowId] ?? p.floors[ownerOf(entry) || NO_OWNER] ?? block, block);
}

/**
 * Where a chain-event wait stood at the last write: its own cursor, never before its `afterBlock`. A wait always
 * listed while it is served, one not listed (new, or folded into an owner's floor) starts from `afterBlock`:
 * blocks done again end nothing twice (the same first match; `endWaitByEvent` answers false for a wait ended).
 */
export function cursorOfWait(p: Persisted, wait: Wait): number {
  return Math.max(wait.watch.afterBlock, p.behind[wait.key] ?? wait.watch.afterBlock);
}
