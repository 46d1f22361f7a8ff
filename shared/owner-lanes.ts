/**
 * Per-owner lanes: at most `width` pieces of one owner's work run at once, the rest wait in that owner's queue,
 * first come, first served; other owners' work never waits behind them. What one owner's burst may take of a
 * resource every owner shares (the table's connection pool): its lanes, not the resource.
 */
interface Lanes {
  running: number;
  waiting: { start: () => void; leave: () => void }[];
}

export class OwnerLanes {
  private readonly owners = new Map<string, Lanes>();

  constructor(private readonly width: number) {}

  /** Runs `work` in one of `owner`'s lanes; rejects with `signal`'s reason if it aborts while `work` waits. */
  async run<T>(owner: string, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const key = owner.toLowerCase();
    const lanes = this.owners.get(key) ?? { running: 0, waiting: [] };
    this.owners.set(key, lanes);
    if (lanes.running < this.width) lanes.running += 1;
    else await this.turn(key, lanes, signal);
    try {
      return await work();
    } finally {
      const next = lanes.waiting.shift();
      if (next) next.start();
      else this.free(key, lanes);
    }
  }

  /** Waits in the owner's queue until a finishing piece of work hands its lane over. */
  private turn(key: string, lanes: Lanes, signal: AbortSignal | undefined): Promise<void> {
    signal?.throwIfAborted();
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => entry.leave();
      const entry = {
        start: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
        leave: () => {
          lanes.waiting.splice(lanes.waiting.indexOf(entry), 1);
          if (lanes.waiting.length === 0 && lanes.running === 0) this.owners.delete(key);
          reject(signal?.reason as Error);
        },
      };
      lanes.waiting.push(entry);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  private free(key: string, lanes: Lanes) {
    lanes.running -= 1;
    if (lanes.running === 0 && lanes.waiting.length === 0) this.owners.delete(key);
  }
}
