/**
 * Chain-event waits (API.md §17.1: an `await` node with `chainEvent`; watcher.ts, "Waits"). When such a wait
 * begins, the run records an await watch entry (store pattern 19b: its owner, chain, queries, `afterBlock` = the
 * head then, `deadline`), listed with the chain's watch entries. The watcher serves each wait as one more event
 * watcher of its owner: a stand-in watch entry keyed `await:<executionId>:<nodeId>` whose queries are packed into
 * that owner's request groups (plan.ts), so a wait rides the same bounded, fair `eth_getLogs` as the owner's event
 * workflows and never costs another owner anything. Its members start after `afterBlock` (not at the checkpoint's
 * block, and not cut at `max_catchup_blocks`: a wait's scan is bounded by its deadline).
 *
 * A wait ends with ONE log: the first that matches one of its queries in (block, log index) order. Its queries may
 * lie in several groups answering different ranges, so a match is held (`Epoch.waitMatches`, the earliest so far)
 * until every member of the wait has passed its block; then `endWaitByEvent` (shared/execution/waits.ts) gets the
 * output an event trigger's fire would carry for that log (§8.3.6, `methodResults` included), and the entry is
 * deleted (also when that answers false: the wait is over). Endings take the owner's claim slots and budget. Until
 * then the wait's cursor written to the checkpoint stays before the held match, so a restart finds it again; a
 * wait's cursor is always listed (a wait not listed starts from `afterBlock`), so a restart neither skips its
 * blocks nor ends it twice. Entries 10 minutes past their deadline are dropped (the run has timed them out).
 */
import { log } from "../log";
import { endWaitByEvent } from "../execution/waits";
import { deleteAwaitWatch, readAwaitQueries, type AwaitWatch, type ListedAwait } from "../store/entities/watch";
import type { ChainTrigger, WatchEntry } from "../workflow/watch-registry";
import type { ChainPlans } from "./chain-plans";
import type { ChainReader } from "./chain-reader";
import { matchPrepared, prepare, type Log } from "./match";
import { ownerOf, type Member } from "./plan";
import type { Epoch, FairSlots, PassRun, PassWork, Wait, WaitMatch } from "./pass-state";
import { brief } from "./provider";
import type { EventQuery } from "../kinds/support/event-query";

/** A wait's entry is dropped this long after its deadline: the run has ended the wait by its timeout long before. */
const DROP_AFTER_DEADLINE_MS = 10 * 60_000;

/** The key a wait's members and cursor go by, apart from every workflow id (a ULID; node ids are `[A-Za-z0-9_-]`). */
const waitKey = (executionId: string, nodeId: string): string => `await:${executionId}:${nodeId}`;

/** Stand-in entries → their wait: how the plans' members are told apart from workflows'. */
const standIns = new WeakMap<WatchEntry, Wait>();

/** The wait a (stand-in) watch entry serves, if it is one. */
export const waitOf = (entry: WatchEntry): Wait | undefined => standIns.get(entry);

/** Whether `entryLog` (matched by query `q`) comes before `match`. */
const before = (entryLog: Log, q: number, match: WaitMatch): boolean =>
  entryLog.block !== match.log.block
    ? entryLog.block < match.log.block
    : entryLog.index !== match.log.index
      ? entryLog.index < match.log.index
      : q < match.q;

export class ChainWaits {
  /** The waits listed, by key (their stand-in entries stay the same objects from pass to pass). */
  private readonly waits = new Map<string, Wait>();
  /** Waits this state has ended or dropped (their entries may still be listed for a moment). */
  private readonly endedWaits = new Set<string>();
  /** Ended waits whose entry could not be deleted yet. */
  private readonly undeleted = new Map<string, AwaitWatch>();
  /** Waits whose queries cannot be served (warned once). */
  private readonly unusable = new Set<string>();

  constructor(
    private readonly work: PassWork,
    private readonly plans: Pick<ChainPlans, "progressKeys">,
    private readonly reader: ChainReader,
    private readonly slots: FairSlots,
  ) {}

  /**
   * The chain's waits as stand-in watch entries: queries in their own item read once (BatchGetItem), entries past
   * their deadline by DROP_AFTER_DEADLINE_MS deleted, ended ones left out.
   */
  async live(listed: readonly ListedAwait[], now: number): Promise<WatchEntry[]> {
    const live = new Set<string>();
    const missing: ListedAwait[] = [];
    for (const w of listed) {
      const key = waitKey(w.executionId, w.nodeId);
      live.add(key);
      const undeleted = this.undeleted.get(key);
      if (undeleted) await this.deleteEntry(key, undeleted);
      if (this.endedWaits.has(key) || this.unusable.has(key)) continue;
      if (w.deadline + DROP_AFTER_DEADLINE_MS <= now) {
        this.endedWaits.add(key);
        await this.deleteEntry(key, w);
        continue;
      }
      const known = this.waits.get(key);
      if (known && known.watch.afterBlock === w.afterBlock && known.watch.deadline === w.deadline && known.watch.owner === w.owner)
        continue;
      if (known) this.forgetWait(key);
      if (w.queries) this.addWait(key, { ...w, queries: w.queries });
      else missing.push(w);
    }
    for (let at = 0; at < missing.length; at += 100) {
      const slice = missing.slice(at, at + 100);
      const read = await readAwaitQueries(slice);
      for (const w of slice) {
        const queries = read.get(`${w.executionId}#${w.nodeId}`);
        if (queries) this.addWait(waitKey(w.executionId, w.nodeId), { ...w, queries });
      }
    }
    for (const key of this.waits.keys()) if (!live.has(key) || this.endedWaits.has(key)) this.forgetWait(key);
    for (const key of this.endedWaits) if (!live.has(key)) this.endedWaits.delete(key);
    for (const key of this.undeleted.keys()) if (!live.has(key)) this.undeleted.delete(key);
    for (const key of this.unusable) if (!live.has(key)) this.unusable.delete(key);
    return [...this.waits.values()].map((w) => w.entry);
  }

  private addWait(key: string, watch: AwaitWatch): void {
    const queries = watch.queries as EventQuery[];
    let usable = queries.length > 0;
    try {
      for (const q of queries) {
        // As §8.3.5 requires: some address or topics[0], never a request for every log of the chain.
        const prepared = typeof q === "object" && q !== null ? prepare(q) : undefined;
        if (!prepared || (!prepared.addresses && prepared.topics[0] === null)) usable = false;
      }
    } catch {
      usable = false;
    }
    if (!usable) {
      if (!this.unusable.has(key)) {
        this.unusable.add(key);
        log.warn("watcher: a chain-event wait's queries cannot be read; it waits for its deadline", {
          chainId: this.work.chainId,
          executionId: watch.executionId,
          nodeId: watch.nodeId,
        });
      }
      return;
    }
    const entry: WatchEntry = {
      workflowId: key,
      chainId: watch.chainId,
      owner: watch.owner.toLowerCase(),
      trigger: { id: watch.nodeId, name: watch.nodeId, type: "event", config: { queries } } as ChainTrigger,
      since: 0,
      v: 3,
    };
    const wait: Wait = { key, watch, entry };
    standIns.set(entry, wait);
    this.waits.set(key, wait);
  }

  /** A wait no longer served (ended, gone, or written again with another start): its progress and match go. */
  private forgetWait(key: string): void {
    this.waits.delete(key);
    const epoch = this.work.epoch;
    epoch.waitMatches.delete(key);
    for (const member of epoch.progress.keys()) if (member.startsWith(`${key}:`)) epoch.progress.delete(member);
  }

  private async deleteEntry(key: string, w: Pick<AwaitWatch, "executionId" | "nodeId">): Promise<void> {
    try {
      await deleteAwaitWatch(w.executionId, w.nodeId);
      this.undeleted.delete(key);
    } catch (err) {
      this.undeleted.set(key, w as AwaitWatch);
      log.warn("watcher could not delete a chain-event wait's entry; tried again next pass", {
        chainId: this.work.chainId,
        executionId: w.executionId,
        nodeId: w.nodeId,
        error: brief(err),
      });
    }
  }

  /** A log of a group's answer against one of a wait's members: kept when it is the wait's earliest match so far. */
  match(wait: Wait, m: Member, entryLog: Log, epoch: Epoch): void {
    if (this.endedWaits.has(wait.key)) return;
    if (entryLog.block <= wait.watch.afterBlock || entryLog.block <= (epoch.progress.get(m.key) ?? Infinity)) return;
    const best = epoch.waitMatches.get(wait.key);
    if (best && !before(entryLog, m.q, best)) return;
    const decoded = matchPrepared(m.prepared, entryLog);
    if (!decoded) return;
    epoch.waitMatches.set(wait.key, { wait, log: entryLog, q: m.q, query: m.prepared.query, decoded });
  }

  /** Ends the waits whose earliest match is final: every member of the wait has passed its block. */
  settle(run: PassRun): void {
    const epoch = this.work.epoch;
    for (const [key, match] of epoch.waitMatches) {
      if (epoch.ending.has(key) || run.waitsFailed.has(key)) continue;
      if (this.endedWaits.has(key)) {
        epoch.waitMatches.delete(key);
        continue;
      }
      const owner = ownerOf(match.wait.entry);
      if (run.blocked.has(owner)) continue;
      const passed = this.plans.progressKeys(match.wait.entry).every((k) => (epoch.progress.get(k) ?? -Infinity) >= match.log.block);
      if (!passed) continue;
      const left = run.firesLeft.get(owner) ?? run.limits.firesPerOwnerPerPass;
      if (left <= 0) continue;
      run.firesLeft.set(owner, left - 1);
      this.endWait(match, owner, run, epoch);
    }
  }

  /** Hands the wait its log (in the owner's claim slots), then deletes its entry. */
  private endWait(match: WaitMatch, owner: string, run: PassRun, epoch: Epoch): void {
    const { wait } = match;
    const { watch } = wait;
    epoch.ending.add(wait.key);
    const work = this.slots
      .run(owner, async () => {
        const output = await this.reader.eventOutput(match.log.raw, match.log, match.query, match.decoded);
        const open = await endWaitByEvent(watch.workflowId, watch.executionId, watch.nodeId, output);
        this.endedWaits.add(wait.key);
        epoch.waitMatches.delete(wait.key);
        run.result.waitsEnded.push({
          workflowId: watch.workflowId,
          executionId: watch.executionId,
          nodeId: watch.nodeId,
          blockNumber: match.log.block,
          logIndex: match.log.index,
          open,
        });
        await this.deleteEntry(wait.key, watch);
      })
      .catch((err: unknown) => {
        run.waitsFailed.add(wait.key);
        run.firesLeft.set(owner, (run.firesLeft.get(owner) ?? run.limits.firesPerOwnerPerPass) + 1);
        log.warn("watcher could not end a chain-event wait; tried again next pass", {
          chainId: this.work.chainId,
          owner,
          executionId: watch.executionId,
          nodeId: watch.nodeId,
          error: brief(err),
        });
      })
      .finally(() => {
        epoch.ending.delete(wait.key);
        this.work.pump(run);
      });
    this.work.track(run, work);
  }
}
