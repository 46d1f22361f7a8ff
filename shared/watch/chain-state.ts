/**
 * A chain's state between passes (chain-watch.ts puts it together): what it learned, the epoch of its progress,
 * each owner's packed request groups, the block headers it read.
 */
import type { PublicClient } from "viem";
import { log } from "../log";
import { blockStepOutput } from "../execution/trigger-output";
import type { WatchEntry } from "../workflow/watch-registry";
import { ownerOf, ownerSignature, planOwner, type OwnerPlan, type PreparedCache, type RequestGroup } from "./plan";
import { brief } from "./provider";
import { Epoch, FairSlots, Lru, type GroupState, type Header, type PassRun } from "./pass-state";
import type { WatchLimits } from "./types";

/** Claims in flight per chain, taken in turn by owner; one workflow's fires stay in order (cooldown, maxExecution). */
const CLAIM_CONCURRENCY = 16;
/** An owner naming at most this many addresses is packed before the pass goes on (a few milliseconds). */
const PLAN_INLINE_ADDRESSES = 20_000;
/** How long a pass waits for larger owners' packing; it finishes in the background. */
const PLAN_WAIT_MS = 100;

export class ChainState {
  epoch = new Epoch();
  readonly plans = new Map<string, OwnerPlan>();
  readonly prepared: PreparedCache = new Map();
  /** Owners being packed in the background (their signature), and packed plans to take up at the next pass. */
  readonly building = new Map<string, string>();
  readonly ready = new Map<string, OwnerPlan>();
  /** Group keys refused even for one block, by owner: cut in halves when packed again. */
  readonly split = new Map<string, Set<string>>();
  /** Learned from the provider's refusals. */
  addressCap = Infinity;
  rangeCap = Infinity;
  written?: { block: number; rev: string; text: string };
  rotation = 0;
  client!: PublicClient;
  readonly headers = new Lru<number, Promise<Header>>(1024);
  /** Transaction hash → its receipt's first log index and log count. */
  readonly receipts = new Lru<string, Promise<{ first: number; count: number }>>(4096);
  readonly upgraded = new Set<string>();
  readonly background = new Set<Promise<unknown>>();
  readonly slots = new FairSlots(CLAIM_CONCURRENCY);
  /** When a request of this chain last succeeded (a failure that others do not share is the request's own). */
  lastSuccessAt = 0;
  /** Consecutive passes in which an owner's claims failed (logged once per doubling). */
  readonly fireFailures = new Map<string, number>();

  constructor(readonly chainId: number) {}

  reset(): void {
    this.epoch.dead = true;
    this.epoch = new Epoch();
  }

  // ----- plans

  /**
   * Brings each owner's groups up to date with its workflows. An owner's queries are packed again only when its
   * workflows changed, in slices; a pass waits for a small owner's packing, and PLAN_WAIT_MS at most for a larger
   * one's (a million addresses take a second or two), which goes on in the background: its new groups are taken
   * up at the start of a later pass, so a large owner's changes never hold a pass up. Until then its new workflows
   * wait (their cursors kept), and its old groups serve the others.
   */
  async plan(watchers: readonly WatchEntry[], limits: WatchLimits): Promise<void> {
    const planLimits = { maxAddresses: Math.max(1, Math.min(limits.maxAddresses, this.addressCap)), maxTopicValues: limits.maxTopicValues };
    const byOwner = new Map<string, WatchEntry[]>();
    for (const entry of watchers) {
      const list = byOwner.get(ownerOf(entry));
      if (list) list.push(entry);
      else byOwner.set(ownerOf(entry), [entry]);
    }
    const install = (plan: OwnerPlan) => {
      this.plans.set(plan.owner, plan);
      for (const g of plan.groups) {
        const state = this.epoch.groups.get(g.key);
        if (state) state.held = false;
      }
    };
    const builds: Promise<void>[] = [];
    const inline: Promise<void>[] = [];
    for (const [owner, entries] of byOwner) {
      const split = this.split.get(owner) ?? new Set<string>();
      const signature = ownerSignature(entries, planLimits, split);
      const ready = this.ready.get(owner);
      if (ready) {
        this.ready.delete(owner);
        if (ready.signature === signature) install(ready);
      }
      const known = this.plans.get(owner);
      if (known?.signature === signature) {
        // Same workflows: the latest copy of each entry (lastFiredAt) serves the members.
        const latest = new Map(entries.map((e) => [e.workflowId, e]));
        for (const list of known.members.values()) for (const m of list) m.entry = latest.get(m.entry.workflowId) ?? m.entry;
        continue;
      }
      if (this.building.get(owner) === signature) continue;
      this.building.set(owner, signature);
      const build = planOwner(owner, entries, planLimits, split, this.prepared).then(
        (plan) => {
          if (this.building.get(owner) !== signature) return;
          this.building.delete(owner);
          plan.signature = signature;
          this.ready.set(owner, plan);
        },
        (err: unknown) => {
          this.building.delete(owner);
          log.warn("watcher could not pack an owner's queries", { chainId: this.chainId, owner, error: brief(err) });
        },
      );
      const size = entries.reduce(
        (n, e) => n + (e.trigger.type === "event" ? e.trigger.config.queries.reduce((k, q) => k + (q.addresses?.length ?? 0) + 1, 0) : 0),
        0,
      );
      (size <= PLAN_INLINE_ADDRESSES ? inline : builds).push(build);
    }
    await Promise.all(inline);
    if (builds.length > 0) await Promise.race([Promise.all(builds), new Promise((resolve) => setTimeout(resolve, PLAN_WAIT_MS).unref?.())]);
    for (const [owner, built] of this.ready) {
      this.ready.delete(owner);
      if (byOwner.has(owner)) install(built);
    }
    for (const owner of this.plans.keys()) if (!byOwner.has(owner)) this.plans.delete(owner);
    const keys = new Set<string>();
    for (const plan of this.plans.values()) for (const g of plan.groups) keys.add(g.key);
    for (const [key, state] of this.epoch.groups) if (!keys.has(key) && !state.busy) this.epoch.groups.delete(key);
    const live = new Set(watchers.map((e) => `${e.workflowId}:${e.since}`));
    for (const key of this.prepared.keys()) if (!live.has(key)) this.prepared.delete(key);
  }

  /** The progress keys a workflow's cursor is the least of: its members, its block trigger, or (no plan yet) a stand-in. */
  progressKeys(entry: WatchEntry): string[] {
    if (entry.trigger.type === "block") return [`${entry.workflowId}:block`];
    const members = this.plans.get(ownerOf(entry))?.members.get(entry.workflowId);
    return members && members.length > 0 ? members.map((m) => m.key) : [`${entry.workflowId}:waiting`];
  }

  groupState(key: string, limits: WatchLimits): GroupState {
    let state = this.epoch.groups.get(key);
    if (!state) {
      state = { failures: 0, lastFailureAt: 0, retryAt: 0, maxBlocks: limits.rangeBlocks, okStreak: 0, busy: false, held: false };
      this.epoch.groups.set(key, state);
    }
    return state;
  }

  /** The first block a group still has to ask for: after its least advanced member. */
  groupFrom(group: RequestGroup): number {
    let least = Infinity;
    for (const m of group.members) least = Math.min(least, this.epoch.progress.get(m.key) ?? Infinity);
    return least + 1;
  }

  // ----- the work of a pass

  track(run: PassRun, work: Promise<unknown>): void {
    run.running++;
    this.background.add(work);
    void work.finally(() => {
      this.background.delete(work);
      run.running--;
      if (run.running === 0) run.idle?.();
    });
  }

  header(n: number): Promise<Header> {
    let found = this.headers.get(n);
    if (!found) {
      found = this.client
        .getBlock({ blockNumber: BigInt(n) })
        .then((b) => ({ number: n, timestampMs: Number(b.timestamp) * 1000, output: blockStepOutput(b) }));
      found.catch(() => this.headers.delete(n));
      this.headers.set(n, found);
    }
    return found;
  }
}
