/** A pass over one chain (watcher.ts, "A pass"). */
import { ulid } from "ulid";
import { log } from "../log";
import { chainSettings, publicClient } from "../chain/chains";
import { chainWatchersOf, unwatch, upgrade, type WatchEntry } from "../workflow/watch-registry";
import { acquire, cursorOf, cursorOfWait, store } from "./checkpoint";
import { stateOf, type ChainWatch } from "./chain-watch";
import { waitOf } from "./chain-waits";
import type { PassRun } from "./pass-state";
import { brief } from "./provider";
import { DEFAULT_LIMITS, type PassOptions, type PassResult, type WatchLimits } from "./types";
import { useRuntime } from "../current-runtime";

/** One pass over `chainId`: requests dealt fairly, fires claimed once, every workflow's cursor written back. */
export async function watchChain(chainId: number, options: PassOptions): Promise<PassResult> {
  const { now, config } = useRuntime();
  const limits: WatchLimits = { ...DEFAULT_LIMITS, ...options.limits };
  const result: PassResult = { chainId, status: "idle", fired: [], waitsEnded: [], duplicates: [], requests: [], carried: 0, waiting: 0 };
  const persisted = await acquire(chainId, options.holder, now());
  if (persisted === null) return { ...result, status: "leased" };
  const state = stateOf(chainId, options.holder);
  state.reader.client = options.client ?? publicClient(chainSettings(chainId));

  const watchers = await liveWatchers(chainId, now(), state);
  const head = Number(await state.reader.client.getBlockNumber({ cacheTime: 0 }));
  if (persisted.block === undefined || watchers.length === 0) {
    state.reset();
    const moved =
      persisted.block === undefined ||
      head > persisted.block ||
      Object.keys(persisted.behind).length + Object.keys(persisted.floors).length > 0;
    if (moved && (await store(chainId, options.holder, head, {}, {}, ulid()))) state.written = undefined;
    return { ...result, status: persisted.block === undefined ? "started" : "idle" };
  }
  // Progress known in memory holds only while the checkpoint is as this holder last wrote it.
  if (!state.written || state.written.rev !== persisted.rev || state.written.block !== persisted.block) state.reset();
  await state.plans.plan(watchers, limits, state.epoch);

  // Every member's progress, at most max_catchup_blocks behind the head.
  const epoch = state.epoch;
  const floor = head - config.limits.maxCatchupBlocks;
  let from = Infinity;
  let skipped = 0;
  let skippedEntries = 0;
  const settle = (key: string, entry: WatchEntry) => {
    const wait = waitOf(entry);
    let done = epoch.progress.get(key) ?? (wait ? cursorOfWait(persisted, wait) : cursorOf(persisted, entry));
    // A wait is not cut at max_catchup_blocks: its first log after afterBlock is the one that ends it.
    if (!wait && done < floor) {
      skipped = Math.max(skipped, floor - done);
      skippedEntries++;
      done = floor;
    }
    epoch.progress.set(key, done);
    if (done < head) from = Math.min(from, done + 1);
  };
  for (const entry of watchers) for (const key of state.plans.progressKeys(entry)) settle(key, entry);
  if (skipped > 0) {
    result.skippedBlocks = skipped;
    log.warn("watcher skipped blocks beyond max_catchup_blocks", {
      chainId,
      workflows: skippedEntries,
      blocks: skipped,
      before: floor + 1,
    });
  }
  const waitingBefore = [...epoch.queues.values()].some((q) => q.length > 0) || epoch.waitMatches.size > 0;
  if (from === Infinity && !waitingBefore) {
    await state.persist(options.holder, head, watchers, limits);
    return result;
  }
  result.status = "processed";
  if (from !== Infinity) {
    result.from = from;
    result.to = head;
  }

  const run: PassRun = {
    head,
    limits,
    result,
    ...(options.deadline !== undefined ? { deadline: options.deadline } : {}),
    requestsLeft: limits.requestsPerPass,
    firesLeft: new Map(),
    blocked: new Set(),
    notStarted: new Set(),
    waitsFailed: new Set(),
    running: 0,
    closed: false,
    rotation: state.rotation++,
  };
  state.fires.blockBatches(watchers, run);
  state.pump(run);
  const waitMs = Math.max(0, Math.min(options.waitMs ?? 30_000, options.deadline !== undefined ? options.deadline - now() : Infinity));
  await new Promise<void>((resolve) => {
    if (run.running === 0) return resolve();
    const timer = setTimeout(resolve, waitMs);
    run.idle = () => {
      clearTimeout(timer);
      resolve();
    };
  });
  run.closed = true;

  for (const queue of epoch.queues.values()) for (const batch of queue) result.carried += batch.candidates.filter((c) => !c.done).length;
  for (const g of epoch.groups.values()) if (g.busy || g.retryAt > now()) result.waiting++;
  if (!(await state.persist(options.holder, head, watchers, limits))) state.reset();
  return result;
}

/**
 * The chain's watch entries, minus expired ones (whose entries go); entries of older versions upgraded once. Then
 * its chain-event waits, as stand-in entries (chain-waits.ts).
 */
async function liveWatchers(chainId: number, now: number, state: ChainWatch): Promise<WatchEntry[]> {
  const { entries, awaits } = await chainWatchersOf(chainId);
  const live: WatchEntry[] = [];
  for (const entry of entries) {
    if (entry.expiredAt !== undefined && entry.expiredAt <= now) await unwatch(entry.workflowId, entry.since);
    else live.push(entry);
  }
  const legacy = live
    .map((entry, i) => ({ entry, i }))
    .filter(({ entry }) => entry.v < 3 && !state.upgraded.has(`${entry.workflowId}:${entry.since}`));
  let next = 0;
  const upgradeOne = async () => {
    while (next < legacy.length) {
      const { entry, i } = legacy[next++]!;
      state.upgraded.add(`${entry.workflowId}:${entry.since}`);
      try {
        live[i] = await upgrade(entry);
      } catch (err) {
        log.warn("watcher could not upgrade a watch entry", { chainId, workflowId: entry.workflowId, error: brief(err) });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(16, legacy.length) }, upgradeOne));
  return [...live, ...(await state.waits.live(awaits, now))];
}
