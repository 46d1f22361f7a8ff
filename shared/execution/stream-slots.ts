/**
 * Open streams per owner (API.md §17.5): at most `max_open_streams_per_owner`, counted in the table so that every
 * process (Lambda instances, several local servers on one table) shares one count.
 *
 * Each owner has a fixed set of slot items, `STREAMSLOT#0000` … `max − 1`, in the owner's partition (Keys.streamSlot).
 * An open stream holds one slot through a lease: the item carries the stream's id and
 * `leaseUntil` (ms). Opening a stream claims a free slot with a conditional put, `attribute_not_exists(pk) OR
 * leaseUntil <= now`: two processes can never both hold a slot, so the owner's open streams never pass the cap,
 * and there is no hot counter to keep right. The process knows the slots it holds or is claiming itself, so an
 * open first tries one of the others without reading (one request when no other process holds that slot); only
 * when that fails does it read the owner's slots (one strongly consistent Query) and claim one shown free. With
 * all `max` held here it is refused without a request.
 * A lease is renewed by a heartbeat while its stream is read (UpdateItem, `streamId = mine`) and deleted when the
 * stream ends, whichever side ends it. A lease whose process vanished is not renewed and is free once
 * `leaseUntil` has passed: every read compares `leaseUntil` with now (DynamoDB's TTL deletes the item later,
 * when it gets to it; `expiresAt` is only that clean-up).
 *
 * How soon a slot is free again (defaults):
 * - closed by the server (terminal status, stream_max_ms, unreadable execution, a lost lease): deleted before
 *   the connection closes, so a client that sees the end can open another at once;
 * - closed by the client: deleted as soon as this process sees the connection close, also when that was before
 *   the answer (the open frees the slot it took); a request the rate limiter refused has its body cancelled,
 *   which deletes it at once too;
 * - the process crashed, was killed or frozen (a Lambda instance): the lease was renewed at most `heartbeatMs`
 *   (15 s) before and lasts `leaseMs` (45 s) from its last renewal, so the slot is free ≤ 45 s later;
 * - the process lives but nothing reads the body any more (a response dropped after the handler ran by a host
 *   that tells nobody; a host that stopped reading after the client went away): released
 *   `startWithinMs` (5 s) after opening when never read, else at the first heartbeat `idleMs` (30 s) after the
 *   last read, so ≤ 45 s.
 * Clock differences between processes shift these by the difference; 15 s are left before API.md's 60 s.
 */
import { ulid } from "ulid";
import { quotaReached } from "../errors";
import { log } from "../log";
import { freeSlot, readSlots, renewSlot, takeSlot } from "../store/entities/stream-slot";
import { useRuntime } from "../current-runtime";

export interface StreamLeaseSettings {
  /** A lease lasts this long after it was taken or last renewed (ms). */
  leaseMs: number;
  /** Renewal period while the stream is read (ms). */
  heartbeatMs: number;
  /** A lease whose body nobody started reading within this long is released (ms). */
  startWithinMs: number;
  /** A lease whose body nobody read for this long is released at the next heartbeat (ms). */
  idleMs: number;
}

/** Production defaults: a vanished holder's slot is free within 45 s (API.md §17.5 allows 60). */
export const STREAM_LEASE_DEFAULTS: Readonly<StreamLeaseSettings> = Object.freeze({
  leaseMs: 45_000,
  heartbeatMs: 15_000,
  startWithinMs: 5_000,
  idleMs: 30_000,
});

let settings: StreamLeaseSettings = { ...STREAM_LEASE_DEFAULTS };

/** Changes the lease timing of this process (tests run it in seconds); no argument restores the defaults. */
export function configureStreamLeases(overrides: Partial<StreamLeaseSettings> = {}): StreamLeaseSettings {
  const next = { ...STREAM_LEASE_DEFAULTS, ...overrides };
  if (!(next.heartbeatMs > 0 && next.heartbeatMs < next.leaseMs))
    throw new Error("stream leases: heartbeatMs must be positive and below leaseMs");
  settings = next;
  return { ...settings };
}

/** Query, then claim what it showed free; a round is lost only to other claims, so rounds are few. */
const MAX_ROUNDS = 8;
/** A server-side close waits this long at most for its slot's deletion before closing the connection. */
export const RELEASE_WAIT_MS = 1_000;

/** Releases in flight in this process, per owner: an open that finds the owner full waits for them first. */
const releasing = new Map<string, Set<Promise<void>>>();
/** Slots this process holds (until their deletion has landed) or is claiming, per owner. */
const mine = new Map<string, Set<number>>();

const ownerKey = (owner: string) => owner.toLowerCase();

const NONE: ReadonlySet<number> = new Set();
/** The owner's slots this process holds or is claiming. */
const claimedHere = (owner: string): ReadonlySet<number> => mine.get(ownerKey(owner)) ?? NONE;

function remember(owner: string, slot: number) {
  const key = ownerKey(owner);
  mine.set(key, (mine.get(key) ?? new Set<number>()).add(slot));
}

function forget(owner: string, slot: number) {
  const key = ownerKey(owner);
  const set = mine.get(key);
  set?.delete(slot);
  if (set?.size === 0) mine.delete(key);
}

/** The owner's slots holding a live lease at `now`, by slot number (expired ones are absent: TTL is late). */
export async function liveSlots(owner: string, now = useRuntime().now()): Promise<Map<number, string>> {
  const live = new Map<number, string>();
  for (const { slot, streamId, leaseUntil } of await readSlots(owner)) {
    if (typeof leaseUntil === "number" && leaseUntil > now) live.set(slot, String(streamId));
  }
  return live;
}

/** The number of the owner's open streams, in every process (live leases). */
export const openStreamCount = async (owner: string): Promise<number> => (await liveSlots(owner)).size;

/**
 * Writes a lease on `slot` for `streamId` until `now + leaseMs` if the slot is free at `now` (absent or expired).
 * The storage step of `acquireStreamSlot`; exported so tests can write a lease the way a process that then
 * vanished would have.
 */
export async function claimSlot(owner: string, slot: number, streamId: string, now: number, leaseMs = settings.leaseMs): Promise<boolean> {
  const leaseUntil = now + leaseMs;
  return takeSlot(owner, slot, { streamId, now, leaseUntil, expiresAt: expiresAt(leaseUntil) });
}

/** TTL clean-up an hour after the lease ends: reads never rely on it, and a late renewal never races it. */
const expiresAt = (leaseUntil: number) => Math.ceil(leaseUntil / 1000) + 3600;

/** How the stream that holds a lease tells it whether its body is still read, and hears that it lost it. */
export interface LeaseWatcher {
  /** Now when a read is pending, else when the last read ended; undefined before the first read. */
  lastReadAt(): number | undefined;
  /** The lease is gone (released for want of reads, or taken over after missed renewals): close the stream. */
  lost(): void;
}

/** One open stream's hold on one of its owner's slots. */
export class StreamLease {
  private released: Promise<void> | undefined;
  private heldUntil: number;
  private watcher: LeaseWatcher = { lastReadAt: () => undefined, lost: () => {} };
  private readonly timers: ReturnType<typeof setTimeout>[] = [];

  constructor(
    readonly owner: string,
    readonly slot: number,
    readonly streamId: string,
    takenAt: number,
  ) {
    this.heldUntil = takenAt + settings.leaseMs;
    const { heartbeatMs, startWithinMs } = settings;
    this.timers.push(
      setTimeout(() => {
        if (this.watcher.lastReadAt() === undefined) this.drop("never read");
      }, startWithinMs),
      setInterval(() => void this.heartbeat(), heartbeatMs),
    );
    for (const timer of this.timers) timer.unref?.();
  }

  /** Binds the stream that holds this lease (before its body is handed out). */
  watch(watcher: LeaseWatcher) {
    this.watcher = watcher;
  }

  get isReleased() {
    return this.released !== undefined;
  }

  /** Frees the slot (idempotent): deletes the lease if it is still this stream's. */
  release(): Promise<void> {
    if (this.released) return this.released;
    this.stopTimers();
    const key = ownerKey(this.owner);
    const done = this.remove().finally(() => {
      forget(this.owner, this.slot);
      const set = releasing.get(key);
      set?.delete(done);
      if (set?.size === 0) releasing.delete(key);
    });
    this.released = done;
    const set = releasing.get(key) ?? new Set<Promise<void>>();
    set.add(done);
    releasing.set(key, set);
    return done;
  }

  private async remove() {
    try {
      await freeSlot(this.owner, this.slot, this.streamId);
    } catch (err) {
      // The table is unreachable: then the lease ends by itself at `leaseUntil` (as when it was taken over).
      log.warn("stream slot release failed; it expires instead", { slot: this.slot, error: err });
    }
  }

  private async heartbeat() {
    if (this.released) return;
    const lastRead = this.watcher.lastReadAt();
    if (lastRead === undefined || Date.now() - lastRead >= settings.idleMs) return this.drop("not read");
    const { now } = useRuntime();
    const leaseUntil = now() + settings.leaseMs;
    let renewed: boolean;
    try {
      renewed = await renewSlot(this.owner, this.slot, { streamId: this.streamId, leaseUntil, expiresAt: expiresAt(leaseUntil) });
    } catch (err) {
      if (this.released) return;
      log.warn("stream slot renewal failed", { slot: this.slot, error: err });
      // Unsure whether it still holds the slot by the next heartbeat: end rather than pass the cap.
      if (now() + settings.heartbeatMs >= this.heldUntil) this.drop("renewal failed");
      return;
    }
    if (renewed) {
      this.heldUntil = Math.max(this.heldUntil, leaseUntil);
      return;
    }
    if (this.released) return;
    // Another stream holds the slot now: this one no longer counts, so it must end.
    return this.lose();
  }

  /** The stream is not being read (or cannot keep its lease): free the slot and close the stream. */
  private drop(why: string) {
    if (this.released) return;
    log.debug("stream slot dropped", { slot: this.slot, why });
    void this.release();
    this.watcher.lost();
  }

  /** The slot is someone else's: nothing to delete. */
  private lose() {
    if (this.released) return;
    this.stopTimers();
    this.released = Promise.resolve();
    forget(this.owner, this.slot);
    this.watcher.lost();
  }

  private stopTimers() {
    for (const timer of this.timers) clearTimeout(timer);
  }
}

/** Waits for this process's releases of the owner's slots in flight; false when there were none. */
async function settleReleases(owner: string): Promise<boolean> {
  const pending = releasing.get(ownerKey(owner));
  if (!pending || pending.size === 0) return false;
  await Promise.allSettled([...pending]);
  return true;
}

/** 429 TOO_MANY_STREAMS (API.md §17.5): a quota, so no Retry-After. */
export const tooManyStreams = (max: number) => quotaReached("TOO_MANY_STREAMS", "open streams", max);

/**
 * Takes one of the owner's slots for a new stream, or throws 429 `TOO_MANY_STREAMS` when all
 * `max_open_streams_per_owner` are held. Costs 1 conditional PutItem when a slot this process does not hold is
 * free; else 1 Query plus 1 conditional PutItem per slot tried; nothing when this process holds them all.
 */
export async function acquireStreamSlot(owner: string): Promise<StreamLease> {
  const max = useRuntime().config.limits.maxOpenStreamsPerOwner;
  const streamId = ulid();
  // A stream of this owner that this process is closing counts as closed: its deletion is on its way.
  if (claimedHere(owner).size >= max && !(await settleReleases(owner))) throw tooManyStreams(max);
  const claimed = claimedHere(owner);
  const guess = shuffled([...Array(max).keys()].filter((slot) => !claimed.has(slot)))[0];
  const lease = guess === undefined ? undefined : await tryClaim(owner, guess, streamId);
  return lease ?? (await acquireAfterReading(owner, streamId, max));
}

/** Claims `slot` if it is free, marking it this process's meanwhile; undefined when it is not free. */
async function tryClaim(owner: string, slot: number, streamId: string): Promise<StreamLease | undefined> {
  if (claimedHere(owner).has(slot)) return undefined; // another open here is claiming it, or holds it
  remember(owner, slot);
  const now = useRuntime().now();
  try {
    if (await claimSlot(owner, slot, streamId, now)) return new StreamLease(owner, slot, streamId, now);
  } catch (err) {
    forget(owner, slot);
    throw err;
  }
  forget(owner, slot);
  return undefined;
}

/** The owner's slots read (Query), then those shown free and not this process's claimed, a round at a time. */
async function acquireAfterReading(owner: string, streamId: string, max: number): Promise<StreamLease> {
  let waited = false;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const live = await liveSlots(owner);
    const claimed = claimedHere(owner);
    const free = [...Array(max).keys()].filter((slot) => !live.has(slot) && !claimed.has(slot));
    if (free.length === 0) {
      if (!waited && (await settleReleases(owner))) {
        waited = true;
        continue;
      }
      throw tooManyStreams(max);
    }
    for (const slot of shuffled(free)) {
      const lease = await tryClaim(owner, slot, streamId);
      if (lease) return lease;
    }
    // Every slot seen free was taken meanwhile: read again.
  }
  throw tooManyStreams(max);
}

/** Random order: concurrent opens of one owner (here or in other processes) mostly try different slots. */
function shuffled(slots: number[]): number[] {
  for (let i = slots.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [slots[i], slots[j]] = [slots[j]!, slots[i]!];
  }
  return slots;
}

/** For HEAD, which opens no stream: 429 when a GET would get it, else nothing. */
export async function checkStreamSlot(owner: string): Promise<void> {
  const max = useRuntime().config.limits.maxOpenStreamsPerOwner;
  if ((await liveSlots(owner)).size < max) return;
  if ((await settleReleases(owner)) && (await liveSlots(owner)).size < max) return;
  throw tooManyStreams(max);
}
