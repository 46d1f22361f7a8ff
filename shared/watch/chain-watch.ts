/** A chain's state (requests, fires, progress) and its cursors' write; one per chain and lease holder. */
import { ulid } from "ulid";
import type { WatchEntry } from "../workflow/watch-registry";
import { ChainRequests } from "./chain-requests";
import { waitOf } from "./chain-waits";
import { NO_OWNER, store } from "./checkpoint";
import { ownerOf } from "./plan";
import type { WatchLimits } from "./types";

export class ChainWatch extends ChainRequests {
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
      for (const key of this.progressKeys(entry)) cursor = Math.min(cursor, progress.get(key) ?? Infinity);
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
