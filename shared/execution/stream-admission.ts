/**
 * What one owner's streams may ask of this process's table connections (API.md §18): the DynamoDB client has one
 * connection pool for every owner (50 sockets), so a burst of one owner's stream opens, or many of its streams
 * polling, must queue behind that owner's own work, never the pool.
 *
 * - Every table request of an owner's stream opens and polls runs in one of the owner's `STREAM_LANES` lanes;
 *   the rest wait in the owner's queue, oldest first. Another owner's requests never wait behind them.
 * - At most `max_open_streams_per_owner` opens of one owner wait or run here at once: one more could not be
 *   admitted unless one of those fails, so it is answered 429 TOO_MANY_STREAMS at once, before any table
 *   request (the one place the quota comes before the execution's lookup: only while a burst is in flight).
 * - An open whose client went away while it waits leaves the queue without a request.
 * Lease renewals and releases are not queued: a release must never wait behind the owner's opens.
 */
import { tooManyStreams } from "./stream-slots";
import { OwnerLanes } from "../owner-lanes";
import { useConfig } from "../current-runtime";

/** Table requests one owner's streams have in flight in a process, of the pool's 50. */
const STREAM_LANES = 4;

const lanes = new OwnerLanes(STREAM_LANES);
/** Opens of each owner waiting or running in this process. */
const opening = new Map<string, number>();

/**
 * Runs one stream open of `owner` (its lookup and slot reservation) in the owner's lanes, or refuses it at once
 * with 429 TOO_MANY_STREAMS when `max_open_streams_per_owner` of the owner's opens are already in progress here.
 */
export async function admitStreamOpen<T>(owner: string, open: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const key = owner.toLowerCase();
  const max = useConfig().limits.maxOpenStreamsPerOwner;
  const inProgress = opening.get(key) ?? 0;
  if (inProgress >= max) throw tooManyStreams(max);
  opening.set(key, inProgress + 1);
  // An open whose client went away no longer counts, even while its work is still finishing.
  let counted = true;
  const uncount = () => {
    if (!counted) return;
    counted = false;
    const left = (opening.get(key) ?? 1) - 1;
    if (left === 0) opening.delete(key);
    else opening.set(key, left);
  };
  signal?.addEventListener("abort", uncount, { once: true });
  try {
    return await lanes.run(key, open, signal);
  } finally {
    signal?.removeEventListener("abort", uncount);
    uncount();
  }
}

/** One poll read of an open stream of `owner`, in the owner's lanes. */
export const streamRead = <T>(owner: string, read: () => Promise<T>): Promise<T> => lanes.run(owner, read);
