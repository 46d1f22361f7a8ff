/**
 * A chain's watch, one per chain and lease holder: the epoch of its progress and the pass's work in flight, its
 * collaborators (each with its own state) and its cursors' write. The plans (chain-plans.ts) pack each owner's
 * queries; the reader (chain-reader.ts) reads headers and receipts once; the fires (chain-fires.ts) are claimed
 * within each owner's budget; the waits (chain-waits.ts) are served and ended; the requests (chain-requests.ts)
 * are dealt fairly, their refusals and failures read. They share the claim slots, and ask the watch for the
 * epoch in force, to track their work and to start what can start (`PassWork`).
 */
import { ulid } from "ulid";
import type { WatchEntry } from "../workflow/watch-registry";
import { ChainFires } from "./chain-fires";
import { ChainPlans } from "./chain-plans";
import { ChainReader } from "./chain-reader";
import { ChainRequests } from "./chain-requests";
import { ChainWaits, waitOf } from "./chain-waits";
import { NO_OWNER, store } from "./checkpoint";
import { Epoch, FairSlots, type PassRun, type PassWork } from "./pass-state";
import { ownerOf } from "./plan";
import type { WatchLimits } from "./types";

/** Claims in flight per chain, taken in turn by owner; one workflow's fires stay in order (cooldown, maxExecution). */
const CLAIM_CONCURRENCY = 16;

export class ChainWatch implements PassWork {
  epoch = new Epoch();
  /** The checkpoint as this holder last wrote it. */
  written?: { block: number; rev: string; text: string };
  rotation = 0;
  /** Watch entries of older versions already upgraded (`<wf>:<since>`). */
  readonly upgraded = new Set<string>();
  readonly background = new Set<Promise<unknown>>();
  readonly reader: ChainReader;
  readonly plans: ChainPlans;
  readonly fires: ChainFires;
  readonly waits: ChainWaits;
  private readonly requests: ChainRequests;

  constructor(readonly chainId: number) {
    const slots = new FairSlots(CLAIM_CONCURRENCY);
    this.reader = new ChainReader(chainId);
    this.plans = new ChainPlans(chainId);
    this.fires = new ChainFires(this, this.reader, slots);
    this.waits = new ChainWaits(this, this.plans, this.reader, slots);
    this.requests = new ChainRequests(this, this.plans, this.reader, this.fires, this.waits);
  }

  reset(): void {
    this.epoch.dead = true;
    this.epoch = new Epoch();
  }

  track(run: PassRun, work: Promise<unknown>): void {
    run.running++;
    this.background.add(work);
    void work.finally(() => {
      this.background.delete(work);
      run.running--;
      if (run.running === 0) run.idle?.();
    });
  }

  pump(run: PassRun): void {
    if (run.closed || this.epoch.dead) return;
    this.waits.settle(run);
    this.fires.drainAll(run);
    this.requests.deal(run);
  }

  /**
   * Every workflow's cursor (the least progress of its members), written with the lease held. A wait's cursor
   * (under its key, `await:<executionId>:<nodeId>`) is listed even at the head, and stays before its held match.
   */
  async persist(holder: string, head: number, watchers: readonly WatchEntry[], limits: WatchLimits): Promise<boolean> {
    const { progress, waitMatches } = this.epoch;
    let behind: Record<string, number> = {};
    const byOwner = new Map<string, string[]>();
    let count = 0;
    for (const entry of watchers) {
      let cursor = Infinity;
      for (const key of this.plans.progressKeys(entry)) cursor = Math.min(cursor, progress.get(key) ?? Infinity);
      const wait = waitOf(entry);
      if (wait) {
        const match = waitMatches.get(wait.key);
        if (match) cursor = Math.min(cursor, match.log.block - 1);
        // Not settled in this epoch: not listed, so it starts again from afterBlock.
        if (cursor === Infinity) continue;
      } else if (!(cursor < head)) continue;
      behind[entry.workflowId] = cursor;
      const owner = ownerOf(entry) || NO_OWNER;
      const list = byOwner.get(owner);
      if (list) list.push(entry.workflowId);
      else byOwner.set(owner, [entry.workflowId]);
      count++;
    }
    let block = head;
    let floors: Record<string, number> = {};
    if (count > limits.maxBehindEntries) {
      // Too many to list one by one: the owners with most are kept at their lowest cursor (re-done blocks claim nothing twice).
      for (const [owner, ids] of [...byOwner].sort((a, b) => b[1].length - a[1].length)) {
        if (count <= limits.maxBehindEntries) break;
        floors[owner] = Math.min(...ids.map((id) => behind[id]!));
        for (const id of ids) delete behind[id];
        count -= ids.length;
      }
      if (Object.keys(floors).length > limits.maxBehindEntries) {
        block = Math.min(head, ...Object.values(floors));
        behind = {};
        floors = {};
      }
    }
    const text = JSON.stringify([block, behind, floors]);
    if (this.written?.text === text) return true;
    const rev = ulid();
    if (!(await store(this.chainId, holder, block, behind, floors, rev))) return false;
    this.written = { block, rev, text };
    return true;
  }
}

const states = new Map<string, ChainWatch>();

export function stateOf(chainId: number, holder: string): ChainWatch {
  const key = `${chainId}:${holder}`;
  let state = states.get(key);
  if (!state) states.set(key, (state = new ChainWatch(chainId)));
  return state;
}

/** Lets a holder's state go (the polling loop, when it stops): waits for its requests and claims still running. */
export async function forget(chainId: number, holder: string, waitMs = 5_000): Promise<void> {
  const state = states.get(`${chainId}:${holder}`);
  if (!state) return;
  states.delete(`${chainId}:${holder}`);
  state.reset();
  await Promise.race([Promise.allSettled([...state.background]), new Promise((resolve) => setTimeout(resolve, waitMs).unref?.())]);
}
