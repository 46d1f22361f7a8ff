/**
 * Open-stream slots (API.md §17.5; shared/execution/stream-slots.ts explains the leases): slot items
 * `STREAMSLOT#0000` … in the owner's partition, each held by at most one open stream's lease (`streamId`,
 * `leaseUntil` ms). The lease invariants are owned here: a slot is taken only when absent or expired, and renewed
 * or deleted only by the stream that holds it.
 */
import { defineEntity } from "../entity";
import { set, when } from "../expression";
import { Keys } from "../item-keys";
import { isConditionFailure, TTL_ATTRIBUTE } from "../table";

interface SlotItem {
  streamId: string;
  leaseUntil: number;
  expiresAt: number;
}

const StreamSlot = defineEntity<SlotItem, { owner: string; slot: number }>({
  type: "streamSlot",
  version: 1,
  key: ({ owner, slot }) => Keys.streamSlot(owner, slot),
});

export interface SlotLease {
  slot: number;
  streamId?: string;
  leaseUntil?: number;
}

/** Every slot item of the owner, live or expired (one strongly consistent Query, all pages). */
export async function readSlots(owner: string): Promise<SlotLease[]> {
  const slots: SlotLease[] = [];
  const query = {
    pk: Keys.owner(owner),
    sk: { beginsWith: Keys.streamSlotPrefix },
    attributes: ["sk", "streamId", "leaseUntil"] as const,
    consistent: true,
  };
  for await (const page of StreamSlot.pages(query)) {
    for (const item of page.items) {
      slots.push({ slot: Number(item.sk.slice(Keys.streamSlotPrefix.length)), streamId: item.streamId, leaseUntil: item.leaseUntil });
    }
  }
  return slots;
}

/** Takes `slot` for `streamId` until `leaseUntil` if it is free at `now` (absent or expired); false when it is not. */
export async function takeSlot(
  owner: string,
  slot: number,
  lease: { streamId: string; now: number; leaseUntil: number; expiresAt: number },
) {
  try {
    await StreamSlot.put(
      { owner, slot },
      { streamId: lease.streamId, leaseUntil: lease.leaseUntil, expiresAt: lease.expiresAt },
      { if: when.or(when.notExists(), when.le("leaseUntil", lease.now)) },
    );
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

/** Extends `streamId`'s lease on `slot`; false when another stream holds the slot (or none does). */
export async function renewSlot(owner: string, slot: number, lease: { streamId: string; leaseUntil: number; expiresAt: number }) {
  try {
    await StreamSlot.update({ owner, slot }, [set("leaseUntil", lease.leaseUntil), set(TTL_ATTRIBUTE, lease.expiresAt)], {
      if: when.eq("streamId", lease.streamId),
    });
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

/** Deletes `streamId`'s lease on `slot`; false when the slot is no longer that stream's. */
export async function freeSlot(owner: string, slot: number, streamId: string) {
  try {
    await StreamSlot.delete({ owner, slot }, { if: when.eq("streamId", streamId) });
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}
