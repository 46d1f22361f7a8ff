/**
 * This process's claim journal (store pattern 22; ./claim.ts, "Claiming"): what lets a manual claim be one count
 * update and one put, yet lose nothing to a crash between the two.
 *
 * Before a manual claim's count update, the workflow is in this process's journal of the current epoch (a minute):
 * one UpdateItem the first time this process claims on that workflow in the epoch, nothing for the claims after it.
 * Once the epoch is over and every claim it covers wrote its execution, this process removes the markers of those
 * claims still on the workflow items (those a later claim's count update has not removed already) and deletes the
 * journal. A journal still there `JOURNAL_GRACE_MS` after its epoch (its process died, or in AWS its instance was
 * frozen before the epoch ended) is the sweeper's: it writes, from the marker and the run input beside it, every
 * execution a claim left unwritten, and removes the markers (./claim-recovery.ts).
 *
 * Markers of claims whose executions are written are also removed by this process's next count update on the same
 * workflow (`takeClosed`), so a burst of claims leaves about as many markers on the workflow item as it has claims
 * in flight.
 */
import { ulid } from "ulid";
import { log } from "../log";
import { closeJournal, journalWorkflows, type JournalId } from "../store/entities/claim-intent";
import { removeClaimAttributes } from "../store/entities/workflow";
import { useRuntime } from "../current-runtime";

/** A journal covers the manual claims one process starts in one epoch of this length. */
export const JOURNAL_EPOCH_MS = 60_000;
/** The sweeper takes a journal over this long after its epoch ended; then every claim it covers began at least this long ago. */
export const JOURNAL_GRACE_MS = 60_000;
/** The process closes an epoch's journal this long after the epoch ended (claims begun in it have finished by then, usually). */
const CLOSE_DELAY_MS = 2_000;
const CLOSE_RETRY_MS = 5_000;
/** Journals are deleted by their process or the sweeper; the TTL only cleans up after both failed for a week. */
const JOURNAL_TTL_S = 7 * 24 * 3600;
/** At most this many attributes removed by one count update, and remembered per workflow. */
const REMOVALS_PER_UPDATE = 24;
const REMEMBERED_PER_WORKFLOW = 1_000;
/** Attributes removed per UpdateItem when an epoch closes (an update expression is at most 4 KB). */
const FLUSHED_PER_UPDATE = 200;

/** This process's id in its journals' keys. */
const claimer = ulid();

interface Epoch {
  id: JournalId;
  dueAt: number;
  /** The journal write of each workflow claimed on in the epoch (settled, or in flight). */
  written: Map<string, Promise<void>>;
  /** Claims of the epoch that have not written their execution (or been refused) yet. */
  inFlight: number;
  /** Closed (or left to the sweeper): a later claim in the same minute journals in a new epoch object. */
  closed: boolean;
}

const epochs = new Map<number, Epoch>();
/** Per workflow: attributes of this process's claims whose executions are written, still on the workflow item. */
const closed = new Map<string, string[]>();

/**
 * Puts `workflowId` in this process's journal of the current epoch (one UpdateItem the first time in the epoch;
 * concurrent claims share it) before a manual claim's count update. Returns `release`, to call once the claim's
 * execution is written or the claim was refused; a claim that never calls it (a crash) keeps the journal open for
 * the sweeper.
 */
export async function enterJournal(workflowId: string): Promise<() => void> {
  const now = useRuntime().now();
  const start = now - (now % JOURNAL_EPOCH_MS);
  let epoch = epochs.get(start);
  if (!epoch) {
    epoch = {
      id: { claimer, epoch: start },
      dueAt: start + JOURNAL_EPOCH_MS + JOURNAL_GRACE_MS,
      written: new Map(),
      inFlight: 0,
      closed: false,
    };
    epochs.set(start, epoch);
    scheduleClose(epoch, start + JOURNAL_EPOCH_MS + CLOSE_DELAY_MS - now);
  }
  const current = epoch;
  current.inFlight += 1;
  let write = current.written.get(workflowId);
  if (!write) {
    write = journalWorkflows(current.id, [workflowId], current.dueAt, Math.floor(current.dueAt / 1000) + JOURNAL_TTL_S);
    current.written.set(workflowId, write);
    write.catch(() => current.written.delete(workflowId)); // the next claim writes it again
  }
  try {
    await write;
  } catch (err) {
    current.inFlight -= 1;
    throw err;
  }
  let released = false;
  return () => {
    if (released) return;
    released = true;
    current.inFlight -= 1;
  };
}

/** Attributes this process's next count update on `workflowId` removes (the caller gives them back if it fails). */
export function takeClosed(workflowId: string): string[] {
  const names = closed.get(workflowId);
  if (!names) return [];
  const taken = names.splice(0, REMOVALS_PER_UPDATE);
  if (names.length === 0) closed.delete(workflowId);
  return [...new Set(taken)]; // one update may not name an attribute twice
}

/** Remembers attributes of claims whose executions are written, for removal by a later write. */
export function noteClosed(workflowId: string, names: readonly string[]): void {
  if (names.length === 0) return;
  const list = closed.get(workflowId) ?? [];
  list.push(...names);
  // Bounded: the oldest are forgotten (the ">= 8 markers" cleanup of a claim that reads the record, or the sweeper's
  // pass over a journal, removes them).
  if (list.length > REMEMBERED_PER_WORKFLOW) list.splice(0, list.length - REMEMBERED_PER_WORKFLOW);
  closed.set(workflowId, list);
}

function scheduleClose(epoch: Epoch, inMs: number): void {
  const timer = setTimeout(
    () => {
      closeEpoch(epoch).catch((err: unknown) =>
        log.debug("could not close a claim journal; the sweeper will", { epoch: epoch.id.epoch, error: (err as Error).message }),
      );
    },
    Math.max(0, inMs),
  );
  timer.unref();
}

/**
 * The epoch's end: once its claims have all finished, their markers still on the workflow items are removed (one
 * UpdateItem per workflow that has some) and the journal deleted. While a claim is still in flight it waits, until
 * the journal is due: then it is left to the sweeper. `now` (closeJournals): without waiting for the epoch's end.
 */
async function closeEpoch(epoch: Epoch, now = false): Promise<void> {
  if (epoch.closed) return;
  if (epoch.inFlight > 0) {
    if (now) return;
    if (useRuntime().now() + CLOSE_RETRY_MS < epoch.dueAt) return scheduleClose(epoch, CLOSE_RETRY_MS);
    return retire(epoch);
  }
  retire(epoch);
  await Promise.allSettled(epoch.written.values());
  for (const workflowId of epoch.written.keys()) await flushClosed(workflowId);
  await closeJournal(epoch.id);
}

/** No claim joins the epoch any more (one that comes in the same minute starts a new one, journaled again). */
function retire(epoch: Epoch): void {
  epoch.closed = true;
  if (epochs.get(epoch.id.epoch) === epoch) epochs.delete(epoch.id.epoch);
}

/**
 * Closes now every journal of this process whose claims have all finished (a process shutting down, tests): their
 * markers removed and the journals deleted, so the sweeper has nothing to take over. Claims in flight keep theirs.
 */
export async function closeJournals(): Promise<void> {
  for (const epoch of [...epochs.values()]) await closeEpoch(epoch, true);
}

/** Removes the remembered attributes of `workflowId` (one UpdateItem; given back on failure). */
async function flushClosed(workflowId: string): Promise<void> {
  let names = closed.get(workflowId);
  if (!names || names.length === 0) return;
  closed.delete(workflowId);
  names = [...new Set(names)];
  for (let i = 0; i < names.length; i += FLUSHED_PER_UPDATE) {
    const chunk = names.slice(i, i + FLUSHED_PER_UPDATE);
    try {
      await removeClaimAttributes(workflowId, chunk);
    } catch (err) {
      noteClosed(workflowId, names.slice(i));
      throw err;
    }
  }
}
