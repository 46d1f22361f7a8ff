/**
 * The per-owner queues that every sandbox dispatcher serves in turn (API.md §18.1): the in-process worker pool
 * (./pool.ts) and the sandbox function's invoker (./remote.ts). Of the owners with queued work and a free share,
 * the one served least recently goes next (an owner not served since it was last idle comes first), its oldest
 * evaluation first; one owner runs at most `perOwner` at once.
 */
export class FairQueue<Job extends { owner: string }> {
  private readonly queues = new Map<string, Job[]>();
  private readonly running = new Map<string, number>();
  /** When each owner with work queued or running was last served (a turn counter). */
  private readonly lastServed = new Map<string, number>();
  private turn = 0;

  constructor(private readonly perOwner: number) {}

  push(job: Job): void {
    const queue = this.queues.get(job.owner);
    if (queue) queue.push(job);
    else this.queues.set(job.owner, [job]);
  }

  /** The next job in turn, counted as running for its owner until `finish`. */
  take(): Job | undefined {
    let chosen: string | undefined;
    for (const [owner, queue] of this.queues) {
      if (!queue.length || (this.running.get(owner) ?? 0) >= this.perOwner) continue;
      if (chosen === undefined || (this.lastServed.get(owner) ?? -1) < (this.lastServed.get(chosen) ?? -1)) chosen = owner;
    }
    if (chosen === undefined) return undefined;
    const queue = this.queues.get(chosen)!;
    const job = queue.shift()!;
    if (!queue.length) this.queues.delete(chosen);
    this.lastServed.set(chosen, this.turn++);
    this.running.set(chosen, (this.running.get(chosen) ?? 0) + 1);
    return job;
  }

  /** A job `take` answered has ended: its owner's share is free again. */
  finish(owner: string): void {
    const count = (this.running.get(owner) ?? 1) - 1;
    if (count > 0) this.running.set(owner, count);
    else this.running.delete(owner);
    this.forgetIfIdle(owner);
  }

  /** Removes a job still queued; false when it is not queued (running, or done). */
  remove(job: Job): boolean {
    const queue = this.queues.get(job.owner);
    const at = queue?.indexOf(job) ?? -1;
    if (!queue || at < 0) return false;
    queue.splice(at, 1);
    if (!queue.length) this.queues.delete(job.owner);
    this.forgetIfIdle(job.owner);
    return true;
  }

  /** Every queued job, removed. */
  drain(): Job[] {
    const all = [...this.queues.values()].flat();
    this.queues.clear();
    return all;
  }

  get queued(): number {
    let n = 0;
    for (const queue of this.queues.values()) n += queue.length;
    return n;
  }

  runningFor(owner: string): number {
    return this.running.get(owner) ?? 0;
  }

  private forgetIfIdle(owner: string): void {
    if (!this.running.has(owner) && !this.queues.has(owner)) this.lastServed.delete(owner);
  }
}
