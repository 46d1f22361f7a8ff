/**
 * Fair running of executions in one process (API.md §18.4, third bullet): what the in-process runner uses for
 * every run it starts, asynchronous (from the bus) and blocking (a `:trigger` with `isBlocking`) alike.
 *
 * - At most `RUNNER_CONCURRENCY` runs at once (slots); the rest wait in one queue per owner, oldest first.
 * - When a slot frees, the owners with queued runs are served in turn: the owner served least recently goes
 *   next (an owner that had nothing queued or running comes first), so no owner waits behind another's backlog.
 * - An owner holds at most half the slots (rounded up), so a newcomer finds a free slot while any one other owner
 *   floods; and while several owners wait, a slot goes only to an owner below its fair share: the max-min fair
 *   split of the slots over the owners with work (an owner that needs less than an equal part keeps what it needs,
 *   the rest is split equally). Runs are never preempted: an owner above its share (it took slots while nobody
 *   else waited) gives them back as its runs end.
 *
 * One owner's burst therefore delays only that owner's runs: another owner's run waits at most until a slot
 * frees, which with a flooding owner capped at half is at once.
 */
import { useConfig } from "../current-runtime";

interface Job {
  owner: string;
  start: () => void;
}

export interface RunQueueStats {
  slots: number;
  running: number;
  queued: number;
  byOwner: Record<string, { running: number; queued: number }>;
}

export class FairRunQueue {
  private readonly queues = new Map<string, Job[]>();
  private readonly running = new Map<string, number>();
  /** Turn at which each owner with work was last served; forgotten when it has none. */
  private readonly lastServed = new Map<string, number>();
  private turn = 0;
  private busy = 0;

  /** `slots` is read at every dispatch, so a changed setting applies to the next run. */
  constructor(private readonly slots: () => number) {}

  /** Runs `work` for `owner` when its turn comes; settles as `work` does. Owners compare case-insensitively. */
  run<T>(owner: string, work: () => Promise<T>): Promise<T> {
    const who = owner.toLowerCase();
    return new Promise<T>((resolve, reject) => {
      const job: Job = {
        owner: who,
        start: () => {
          let result: Promise<T>;
          try {
            result = work();
          } catch (err) {
            result = Promise.reject(err as Error);
          }
          result.then(resolve, reject).finally(() => this.done(who));
        },
      };
      const queue = this.queues.get(who);
      if (queue) queue.push(job);
      else this.queues.set(who, [job]);
      this.dispatch();
    });
  }

  stats(): RunQueueStats {
    const byOwner: RunQueueStats["byOwner"] = {};
    let queued = 0;
    for (const [owner, queue] of this.queues) {
      byOwner[owner] = { running: this.running.get(owner) ?? 0, queued: queue.length };
      queued += queue.length;
    }
    for (const [owner, running] of this.running) byOwner[owner] ??= { running, queued: 0 };
    return { slots: this.slots(), running: this.busy, queued, byOwner };
  }

  private done(owner: string) {
    this.busy -= 1;
    const left = (this.running.get(owner) ?? 1) - 1;
    if (left > 0) this.running.set(owner, left);
    else this.running.delete(owner);
    if (left <= 0 && !this.queues.has(owner)) this.lastServed.delete(owner);
    this.dispatch();
  }

  private dispatch() {
    while (this.busy < this.slots()) {
      const owner = this.next();
      if (owner === undefined) return;
      const queue = this.queues.get(owner)!;
      const job = queue.shift()!;
      if (queue.length === 0) this.queues.delete(owner);
      this.busy += 1;
      this.running.set(owner, (this.running.get(owner) ?? 0) + 1);
      this.lastServed.set(owner, this.turn++);
      job.start();
    }
  }

  /**
   * The owner whose queued run starts next: of the owners below the per-owner cap, those below their fair share
   * first (then those at most one above it, which only happens with slots left over), each group least recently
   * served first.
   */
  private next(): string | undefined {
    if (this.queues.size === 0) return undefined;
    const slots = this.slots();
    const cap = Math.max(1, Math.ceil(slots / 2));
    const demand = new Map<string, number>();
    for (const [owner, running] of this.running) demand.set(owner, Math.min(cap, running));
    for (const [owner, queue] of this.queues) demand.set(owner, Math.min(cap, (this.running.get(owner) ?? 0) + queue.length));
    const level = waterLevel([...demand.values()], slots);
    let chosen: string | undefined;
    let chosenUnder = false;
    for (const owner of this.queues.keys()) {
      const running = this.running.get(owner) ?? 0;
      if (running >= cap) continue;
      const under = running < Math.min(demand.get(owner)!, level);
      if (!under && running > level) continue;
      const earlier = (this.lastServed.get(owner) ?? -1) < (this.lastServed.get(chosen ?? "") ?? -1);
      if (chosen === undefined || (under && !chosenUnder) || (under === chosenUnder && earlier)) {
        chosen = owner;
        chosenUnder = under;
      }
    }
    return chosen;
  }
}

/**
 * The max-min fair share of `slots` over `demands`: the largest whole level L with Σ min(d, L) ≤ slots. Owners
 * needing less than L get what they need; the others get L, and the slots left (fewer than those owners) go one
 * each in turn.
 */
export function waterLevel(demands: number[], slots: number): number {
  const sorted = [...demands].sort((a, b) => a - b);
  let remaining = slots;
  for (let i = 0; i < sorted.length; i++) {
    const left = sorted.length - i;
    const d = sorted[i]!;
    if (d * left <= remaining) {
      remaining -= d;
      continue;
    }
    return Math.floor(remaining / left);
  }
  return sorted.length ? sorted[sorted.length - 1]! : slots;
}

let shared: FairRunQueue | undefined;

/** The process's queue, sized by `RUNNER_CONCURRENCY`. */
export function runQueue(): FairRunQueue {
  shared ??= new FairRunQueue(() => useConfig().runnerConcurrency);
  return shared;
}
