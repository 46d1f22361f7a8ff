/**
 * A chain's plans between passes (plan.ts): each owner's packed request groups, packed again when its workflows
 * change, and what the provider's refusals taught the packing (its address bound, the groups to cut in halves).
 */
import { log } from "../log";
import type { WatchEntry } from "../workflow/watch-registry";
import { ownerOf, ownerSignature, planOwner, type OwnerPlan, type PreparedCache, type RequestGroup } from "./plan";
import { brief } from "./provider";
import type { Epoch } from "./pass-state";
import type { WatchLimits } from "./types";

/** An owner naming at most this many addresses is packed before the pass goes on (a few milliseconds). */
const PLAN_INLINE_ADDRESSES = 20_000;
/** How long a pass waits for larger owners' packing; it finishes in the background. */
const PLAN_WAIT_MS = 100;

export class ChainPlans {
  /** Each owner's plan in force. */
  readonly owners = new Map<string, OwnerPlan>();
  /** Learned from the provider's refusals: addresses per request at most. */
  addressCap = Infinity;
  private readonly prepared: PreparedCache = new Map();
  /** Owners being packed in the background (their signature), and packed plans to take up at the next pass. */
  private readonly building = new Map<string, string>();
  private readonly ready = new Map<string, OwnerPlan>();
  /** Group keys refused even for one block, by owner: cut in halves when packed again. */
  private readonly split = new Map<string, Set<string>>();

  constructor(private readonly chainId: number) {}

  /**
   * Brings each owner's groups up to date with its workflows. An owner's queries are packed again only when its
   * workflows changed, in slices; a pass waits for a small owner's packing, and PLAN_WAIT_MS at most for a larger
   * one's (a million addresses take a second or two), which goes on in the background: its new groups are taken
   * up at the start of a later pass, so a large owner's changes never hold a pass up. Until then its new workflows
   * wait (their cursors kept), and its old groups serve the others. `epoch`: whose groups' state follows the plans.
   */
  async plan(watchers: readonly WatchEntry[], limits: WatchLimits, epoch: Epoch): Promise<void> {
    const planLimits = { maxAddresses: Math.max(1, Math.min(limits.maxAddresses, this.addressCap)), maxTopicValues: limits.maxTopicValues };
    const byOwner = groupByOwner(watchers);
    const install = (plan: OwnerPlan) => {
      this.owners.set(plan.owner, plan);
      for (const g of plan.groups) {
        const state = epoch.groups.get(g.key);
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
      const known = this.owners.get(owner);
      if (known?.signature === signature) {
        // Same workflows: the latest copy of each entry (lastFiredAt) serves the members.
        const latest = new Map(entries.map((e) => [e.workflowId, e]));
        for (const list of known.members.values()) for (const m of list) m.entry = latest.get(m.entry.workflowId) ?? m.entry;
        continue;
      }
      if (this.building.get(owner) === signature) continue;
      const build = this.build(owner, entries, planLimits, split, signature);
      (addressesOf(entries) <= PLAN_INLINE_ADDRESSES ? inline : builds).push(build);
    }
    await Promise.all(inline);
    if (builds.length > 0) await Promise.race([Promise.all(builds), new Promise((resolve) => setTimeout(resolve, PLAN_WAIT_MS).unref?.())]);
    for (const [owner, built] of this.ready) {
      this.ready.delete(owner);
      if (byOwner.has(owner)) install(built);
    }
    this.drop(watchers, byOwner, epoch);
  }

  /** Packs an owner's queries; the plan waits in `ready` for the pass that takes it up. */
  private build(
    owner: string,
    entries: WatchEntry[],
    planLimits: { maxAddresses: number; maxTopicValues: number },
    split: Set<string>,
    signature: string,
  ): Promise<void> {
    this.building.set(owner, signature);
    return planOwner(owner, entries, planLimits, split, this.prepared).then(
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
  }

  /** Owners, groups' state and prepared queries no workflow needs any more go. */
  private drop(watchers: readonly WatchEntry[], byOwner: Map<string, WatchEntry[]>, epoch: Epoch): void {
    for (const owner of this.owners.keys()) if (!byOwner.has(owner)) this.owners.delete(owner);
    const keys = new Set<string>();
    for (const plan of this.owners.values()) for (const g of plan.groups) keys.add(g.key);
    for (const [key, state] of epoch.groups) if (!keys.has(key) && !state.busy) epoch.groups.delete(key);
    const live = new Set(watchers.map((e) => `${e.workflowId}:${e.since}`));
    for (const key of this.prepared.keys()) if (!live.has(key)) this.prepared.delete(key);
  }

  /** The progress keys a workflow's cursor is the least of: its members, its block trigger, or (no plan yet) a stand-in. */
  progressKeys(entry: WatchEntry): string[] {
    if (entry.trigger.type === "block") return [`${entry.workflowId}:block`];
    const members = this.owners.get(ownerOf(entry))?.members.get(entry.workflowId);
    return members && members.length > 0 ? members.map((m) => m.key) : [`${entry.workflowId}:waiting`];
  }

  /** A group refused even for one block: its owner's queries are packed again with it cut in halves. */
  splitGroup(group: RequestGroup): void {
    let split = this.split.get(group.owner);
    if (!split) this.split.set(group.owner, (split = new Set()));
    split.add(group.key);
  }
}

function groupByOwner(watchers: readonly WatchEntry[]): Map<string, WatchEntry[]> {
  const byOwner = new Map<string, WatchEntry[]>();
  for (const entry of watchers) {
    const list = byOwner.get(ownerOf(entry));
    if (list) list.push(entry);
    else byOwner.set(ownerOf(entry), [entry]);
  }
  return byOwner;
}

/** How large an owner's packing is: its queries' addresses, one more per query. */
const addressesOf = (entries: readonly WatchEntry[]): number =>
  entries.reduce(
    (n, e) => n + (e.trigger.type === "event" ? e.trigger.config.queries.reduce((k, q) => k + (q.addresses?.length ?? 0) + 1, 0) : 0),
    0,
  );
