/**
 * Fires and carry-over (watcher.ts, "Matching" and "Progress"): the fires of an answer or of a block trigger wait
 * in their owner's queue, are claimed within the owner's budget for the pass, and move their members' progress
 * once all are claimed; those not claimed yet wait for the next pass.
 */
import { getAddress, type Hex } from "viem";
import { log } from "../log";
import type { EventQuery } from "../workflow/schemas";
import { noteFired, unwatch, type WatchEntry } from "../workflow/watch-registry";
import { ChainState } from "./chain-state";
import { fireExecution, methodResults } from "./fire";
import type { Decoded, Log, RpcLog } from "./match";
import { ownerOf, type Member } from "./plan";
import type { Batch, Candidate, Epoch, PassRun } from "./pass-state";
import { brief } from "./provider";

export abstract class ChainFires extends ChainState {
  /** Starts what can start (chain-requests.ts). */
  abstract pump(run: PassRun): void;

  eventCandidate(m: Member, entryLog: Log, decoded: Decoded): Candidate {
    const { entry } = m;
    const raw = entryLog.raw;
    return {
      entry,
      block: entryLog.block,
      done: false,
      fire: async () => {
        const position = await this.positionInTransaction(raw, entryLog.index);
        return {
          fireId: `${entry.workflowId}:${entry.trigger.id}:log:${raw.transactionHash.toLowerCase()}:${position}`,
          output: await this.eventOutput(raw, entryLog, m.prepared.query, decoded),
        };
      },
    };
  }

  /** Block triggers: a batch of the multiples of `interval` since the entry's progress. */
  blockBatches(watchers: readonly WatchEntry[], run: PassRun): void {
    const epoch = this.epoch;
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
            output: (await this.header(block)).output,
          }),
        });
      }
      epoch.blockBusy.add(key);
      this.enqueue({ owner: ownerOf(entry), memberKeys: [key], to: run.head, candidates, blockKey: key });
    }
  }

  enqueue(batch: Batch): void {
    if (batch.candidates.length === 0) return this.complete(batch);
    const queue = this.epoch.queues.get(batch.owner);
    if (queue) queue.push(batch);
    else this.epoch.queues.set(batch.owner, [batch]);
  }

  complete(batch: Batch): void {
    const { progress } = this.epoch;
    for (const key of batch.memberKeys) {
      const done = progress.get(key);
      if (done !== undefined && done < batch.to) progress.set(key, batch.to);
    }
    if (batch.group) batch.group.busy = false;
    if (batch.blockKey) this.epoch.blockBusy.delete(batch.blockKey);
  }

  /** Claims an owner's waiting fires, batch by batch, within the owner's budget for the pass. */
  drain(owner: string, run: PassRun): void {
    const epoch = this.epoch;
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
      this.pump(run);
    })();
    this.track(run, work);
  }

  /** True when every fire of the batch is claimed (or dropped: workflow stopped, outside its window). */
  async runBatch(batch: Batch, owner: string, run: PassRun, epoch: Epoch): Promise<boolean> {
    const byWorkflow = new Map<string, Candidate[]>();
    for (const c of batch.candidates) {
      if (c.done) continue;
      const list = byWorkflow.get(c.entry.workflowId);
      if (list) list.push(c);
      else byWorkflow.set(c.entry.workflowId, [c]);
    }
    const budget = () => run.firesLeft.get(owner) ?? run.limits.firesPerOwnerPerPass;
    await Promise.all(
      [...byWorkflow.values()].map(async (list) => {
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
            const failures = (this.fireFailures.get(owner) ?? 0) + 1;
            this.fireFailures.set(owner, failures);
            if ((failures & (failures - 1)) === 0) {
              log.warn("watcher could not fire; the owner's fires wait for the next pass", {
                chainId: this.chainId,
                owner,
                workflowId: c.entry.workflowId,
                attempt: failures,
                error: brief(err),
              });
            }
            return;
          }
        }
      }),
    );
    if (!run.blocked.has(owner)) this.fireFailures.delete(owner);
    return batch.candidates.every((c) => c.done);
  }

  /** One fire through its claim; false when its block is outside the workflow's window or cooldown (no claim). */
  async tryFire(c: Candidate, run: PassRun, epoch: Epoch): Promise<boolean> {
    const { entry } = c;
    const at = (await this.header(c.block)).timestampMs;
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

  /** The log's position inside its transaction (from the receipt, read once per transaction). */
  async positionInTransaction(raw: RpcLog, logIndex: number): Promise<number> {
    let known = this.receipts.get(raw.transactionHash);
    if (!known) {
      known = (
        this.client.request({ method: "eth_getTransactionReceipt", params: [raw.transactionHash] } as never) as Promise<{
          logs: { logIndex: Hex }[];
        } | null>
      ).then((r) => {
        const logs = r?.logs ?? [];
        return { first: logs.length > 0 ? parseInt(logs[0]!.logIndex, 16) : 0, count: logs.length };
      });
      known.catch(() => this.receipts.delete(raw.transactionHash));
      this.receipts.set(raw.transactionHash, known);
    }
    const { first, count } = await known;
    const at = logIndex - first;
    if (at < 0 || at >= count) throw new Error(`log ${raw.logIndex} of ${raw.transactionHash} is not in its receipt`);
    return at;
  }

  async eventOutput(raw: RpcLog, entryLog: Log, query: EventQuery, decoded: Decoded): Promise<Record<string, unknown>> {
    const data: Record<string, unknown> = {
      address: getAddress(raw.address),
      blockNumber: entryLog.block,
      blockHash: raw.blockHash,
      transactionHash: raw.transactionHash,
      transactionIndex: parseInt(raw.transactionIndex, 16),
      logIndex: entryLog.index,
      topics: raw.topics,
      data: raw.data,
      timestamp: (await this.header(entryLog.block)).timestampMs,
    };
    if (decoded.eventName !== undefined) Object.assign(data, { eventName: decoded.eventName, args: decoded.args });
    if (query.methodCalls?.length) data.methodResults = await methodResults(this.chainId, query, getAddress(raw.address));
    return { data };
  }
}
