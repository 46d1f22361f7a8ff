/**
 * Fires and carry-over (watcher.ts, "Matching" and "Progress"): the fires of an answer or of a block trigger wait
 * in their owner's queue, are claimed within the owner's budget for the pass, and move their members' progress
 * once all are claimed; those not claimed yet wait for the next pass.
 */
import { log } from "../log";
import { noteFired, unwatch, type WatchEntry } from "../workflow/watch-registry";
import type { ChainReader } from "./chain-reader";
import { fireExecution } from "./fire";
import type { Decoded, Log } from "./match";
import { ownerOf, type Member } from "./plan";
import type { Batch, Candidate, Epoch, FairSlots, PassRun, PassWork } from "./pass-state";
import { brief } from "./provider";

export class ChainFires {
  /** Consecutive passes in which an owner's claims failed (logged once per doubling). */
  private readonly failures = new Map<string, number>();

  constructor(
    private readonly work: PassWork,
    private readonly reader: ChainReader,
    private readonly slots: FairSlots,
  ) {}

  eventCandidate(m: Member, entryLog: Log, decoded: Decoded): Candidate {
    const { entry } = m;
    const raw = entryLog.raw;
    return {
      entry,
      block: entryLog.block,
      done: false,
      fire: async () => {
        const position = await this.reader.positionInTransaction(raw, entryLog.index);
        return {
          fireId: `${entry.workflowId}:${entry.trigger.id}:log:${raw.transactionHash.toLowerCase()}:${position}`,
          output: await this.reader.eventOutput(raw, entryLog, m.prepared.query, decoded),
        };
      },
    };
  }

  /** Block triggers: a batch of the multiples of `interval` since the entry's progress. */
  blockBatches(watchers: readonly WatchEntry[], run: PassRun): void {
    const epoch = this.work.epoch;
    for (const entry of watchers) {
      if (entry.trigger.type !== "block") continue;
      const key = `${entry.workflowId}:block`;
      if (epoch.blockBusy.has(key) || epoch.stopped.has(`${entry.workflowId}:${entry.since}`)) continue;
      const done = epoch.progress.get(key)!;
      if (done >= run.head) continue;
      const interval = entry.trigger.config.interval;
      const candidates: Candidate[] = [];
      for (let n = Math.ceil((done + 1) / interval) * interval; n <= run.head; n += interval) {
        const block = n;
        candidates.push({
          entry,
          block,
          done: false,
          fire: async () => ({
            fireId: `${entry.workflowId}:${entry.trigger.id}:block:${block}`,
            output: (await this.reader.header(block)).output,
          }),
        });
      }
      epoch.blockBusy.add(key);
      this.enqueue({ owner: ownerOf(entry), memberKeys: [key], to: run.head, candidates, blockKey: key });
    }
  }

  enqueue(batch: Batch): void {
    if (batch.candidates.length === 0) return this.complete(batch);
    const { queues } = this.work.epoch;
    const queue = queues.get(batch.owner);
    if (queue) queue.push(batch);
    else queues.set(batch.owner, [batch]);
  }

  private complete(batch: Batch): void {
    const { progress, blockBusy } = this.work.epoch;
    for (const key of batch.memberKeys) {
      const done = progress.get(key);
      if (done !== undefined && done < batch.to) progress.set(key, batch.to);
    }
    if (batch.group) batch.group.busy = false;
    if (batch.blockKey) blockBusy.delete(batch.blockKey);
  }

  /** Starts claiming the waiting fires of every owner that has budget left and is not claiming already. */
  drainAll(run: PassRun): void {
    const epoch = this.work.epoch;
    for (const [owner, queue] of epoch.queues) {
      if (queue.length === 0 || epoch.draining.has(owner) || run.blocked.has(owner)) continue;
      if ((run.firesLeft.get(owner) ?? run.limits.firesPerOwnerPerPass) <= 0) continue;
      this.drain(owner, run);
    }
  }

  /** Claims an owner's waiting fires, batch by batch, within the owner's budget for the pass. */
  private drain(owner: string, run: PassRun): void {
    const epoch = this.work.epoch;
    epoch.draining.add(owner);
    const work = (async () => {
      try {
        const queue = epoch.queues.get(owner) ?? [];
        while (queue.length > 0 && !epoch.dead && !run.blocked.has(owner)) {
          const batch = queue[0]!;
          if (!(await this.runBatch(batch, owner, run, epoch))) break;
          queue.shift();
          if (!epoch.dead) this.complete(batch);
        }
      } finally {
        epoch.draining.delete(owner);
      }
      this.work.pump(run);
    })();
    this.work.track(run, work);
  }

  /** True when every fire of the batch is claimed (or dropped: workflow stopped, outside its window). */
  private async runBatch(batch: Batch, owner: string, run: PassRun, epoch: Epoch): Promise<boolean> {
    const byWorkflow = new Map<string, Candidate[]>();
    for (const c of batch.candidates) {
      if (c.done) continue;
      const list = byWorkflow.get(c.entry.workflowId);
      if (list) list.push(c);
      else byWorkflow.set(c.entry.workflowId, [c]);
    }
    await Promise.all([...byWorkflow.values()].map((list) => this.claimInOrder(list, owner, run, epoch)));
    if (!run.blocked.has(owner)) this.failures.delete(owner);
    return batch.candidates.every((c) => c.done);
  }

  /** One workflow's fires of a batch, in order, each within the owner's budget; a failed claim blocks the owner. */
  private async claimInOrder(list: Candidate[], owner: string, run: PassRun, epoch: Epoch): Promise<void> {
    const budget = () => run.firesLeft.get(owner) ?? run.limits.firesPerOwnerPerPass;
    for (const c of list) {
      if (epoch.dead || run.blocked.has(owner)) return;
      if (epoch.stopped.has(`${c.entry.workflowId}:${c.entry.since}`) || run.notStarted.has(c.entry.workflowId)) {
        c.done = true;
        continue;
      }
      if (budget() <= 0) return;
      run.firesLeft.set(owner, budget() - 1); // reserved; given back when nothing was claimed
      try {
        const claimed = await this.slots.run(owner, () => this.tryFire(c, run, epoch));
        if (!claimed) run.firesLeft.set(owner, budget() + 1);
        c.done = true;
      } catch (err) {
        run.blocked.add(owner);
        const failures = (this.failures.get(owner) ?? 0) + 1;
        this.failures.set(owner, failures);
        if ((failures & (failures - 1)) === 0) {
          log.warn("watcher could not fire; the owner's fires wait for the next pass", {
            chainId: this.work.chainId,
            owner,
            workflowId: c.entry.workflowId,
            attempt: failures,
            error: brief(err),
          });
        }
        return;
      }
    }
  }

  /** One fire through its claim; false when its block is outside the workflow's window or cooldown (no claim). */
  private async tryFire(c: Candidate, run: PassRun, epoch: Epoch): Promise<boolean> {
    const { entry } = c;
    const at = (await this.reader.header(c.block)).timestampMs;
    if (at < Math.floor(entry.since / 1000) * 1000) return false;
    if (entry.startAt !== undefined && at < entry.startAt) return false;
    if (entry.expiredAt !== undefined && at >= entry.expiredAt) return false;
    const cooldownMs = entry.trigger.type === "event" ? (entry.trigger.config.cooldownSeconds ?? 0) * 1000 : 0;
    if (cooldownMs > 0 && entry.lastFiredAt !== undefined && at < entry.lastFiredAt + cooldownMs) return false;
    if (epoch.dead) return false;

    const { fireId, output } = await c.fire();
    const outcome = await fireExecution(entry.workflowId, fireId, output);
    if (outcome.kind === "stopped") {
      if (outcome.reason === "NOT_STARTED") run.notStarted.add(entry.workflowId);
      else {
        epoch.stopped.add(`${entry.workflowId}:${entry.since}`);
        await unwatch(entry.workflowId, entry.since);
      }
      return true;
    }
    if (outcome.kind === "duplicate") run.result.duplicates.push(fireId);
    else run.result.fired.push({ fireId, workflowId: entry.workflowId, executionId: outcome.executionId });
    if (cooldownMs > 0) {
      entry.lastFiredAt = at;
      await noteFired(entry.workflowId, at);
    }
    return true;
  }
}
