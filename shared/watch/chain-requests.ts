/**
 * Requests (watcher.ts, "Requests" and "Fairness"): dealt round robin across owners within the pass's budget and
 * the in-flight bounds, their refusals read, their answers matched against the group's members.
 */
import { numberToHex } from "viem";
import { log } from "../log";
import type { ChainFires } from "./chain-fires";
import type { ChainPlans } from "./chain-plans";
import type { ChainReader } from "./chain-reader";
import { waitOf, type ChainWaits } from "./chain-waits";
import { matchPrepared, readLogs, SLICE_MS, yieldToLoop, type Log, type RpcLog } from "./match";
import { indexOf, type Member, type OwnerPlan, type RequestGroup } from "./plan";
import type { Batch, Candidate, Epoch, GroupState, PassRun, PassWork } from "./pass-state";
import { brief, classify, TooManyLogs, withTimeout } from "./provider";
import type { WatchLimits } from "./types";
import { useRuntime } from "../current-runtime";

export class ChainRequests {
  /** Learned from the provider's refusals: blocks per request at most. */
  private rangeCap = Infinity;
  /** When a request of this chain last succeeded (a failure that others do not share is the request's own). */
  private lastSuccessAt = 0;

  constructor(
    private readonly work: PassWork,
    private readonly plans: ChainPlans,
    private readonly reader: ChainReader,
    private readonly fires: ChainFires,
    private readonly waits: ChainWaits,
  ) {}

  /** Starts requests round robin across owners, within the pass's budget and the in-flight bounds. */
  deal(run: PassRun): void {
    const { limits } = run;
    const now = useRuntime().now();
    if (run.requestsLeft <= 0 || (run.deadline !== undefined && now >= run.deadline)) return;
    const owners = [...this.plans.owners.keys()].sort();
    if (owners.length === 0) return;
    const start = run.rotation % owners.length;
    const order = [...owners.slice(start), ...owners.slice(0, start)];
    const due = new Map<string, { group: RequestGroup; from: number }[]>();
    for (const owner of order) {
      const list: { group: RequestGroup; from: number }[] = [];
      for (const group of this.plans.owners.get(owner)!.groups) {
        const state = this.groupState(group.key, limits);
        // Groups packed before the provider's address bound was learned wait for their owner's new groups.
        if (state.busy || state.held || state.retryAt > now || group.addressCount > this.plans.addressCap) continue;
        const from = this.groupFrom(group, this.work.epoch);
        if (from <= run.head) list.push({ group, from });
      }
      list.sort((a, b) => a.from - b.from);
      if (list.length > 0) due.set(owner, list);
    }
    const epoch = this.work.epoch;
    let started = true;
    while (started && run.requestsLeft > 0) {
      started = false;
      for (const owner of order) {
        if (run.requestsLeft <= 0) break;
        const list = due.get(owner);
        if (!list || list.length === 0) continue;
        const mine = epoch.inFlight.get(owner) ?? 0;
        if (mine > 0 && (epoch.totalInFlight >= limits.maxInFlight || mine >= Math.ceil(limits.maxInFlight / 2))) continue;
        const next = list.shift()!;
        this.request(next.group, next.from, run);
        started = true;
      }
    }
  }

  private request(group: RequestGroup, from: number, run: PassRun): void {
    const { limits } = run;
    const epoch = this.work.epoch;
    const state = this.groupState(group.key, limits);
    state.busy = true;
    const span = Math.max(1, Math.min(state.maxBlocks, this.rangeCap, limits.rangeBlocks));
    const to = Math.min(run.head, from + span - 1);
    run.requestsLeft--;
    epoch.inFlight.set(group.owner, (epoch.inFlight.get(group.owner) ?? 0) + 1);
    epoch.totalInFlight++;
    run.result.requests.push({ owner: group.owner, group: group.key, from, to, addresses: group.addressCount, filter: group.filter });
    const client = this.reader.client;
    const work = (async () => {
      let batch: Batch | undefined;
      try {
        const raw = await withTimeout(
          client.request(
            { method: "eth_getLogs", params: [{ fromBlock: numberToHex(from), toBlock: numberToHex(to), ...group.filter }] } as never,
            { retryCount: 0 },
          ) as Promise<RpcLog[]>,
          limits.requestTimeoutMs,
        );
        if (!Array.isArray(raw)) throw new Error("eth_getLogs did not answer a list");
        if (raw.length > limits.maxLogsPerResponse && (to > from || group.members.length > 1))
          throw new TooManyLogs(raw.length, limits.maxLogsPerResponse);
        if (epoch.dead) return;
        const logs = await readLogs(raw);
        const candidates = await this.match(group, logs, epoch);
        state.failures = 0;
        this.lastSuccessAt = useRuntime().now();
        if (++state.okStreak >= 8 && state.maxBlocks < limits.rangeBlocks) {
          state.maxBlocks = Math.min(limits.rangeBlocks, state.maxBlocks * 2);
          state.okStreak = 0;
        }
        batch = { owner: group.owner, memberKeys: group.members.map((m) => m.key), to, candidates, group: state };
      } catch (err) {
        this.failed(group, state, from, to, err, limits);
      } finally {
        epoch.inFlight.set(group.owner, (epoch.inFlight.get(group.owner) ?? 1) - 1);
        epoch.totalInFlight--;
      }
      if (batch && !epoch.dead) this.fires.enqueue(batch);
      this.work.pump(run);
    })();
    this.work.track(run, work);
  }

  /** A refused or failed request: a smaller range, fewer addresses, the group cut in two, or backoff. */
  private failed(group: RequestGroup, state: GroupState, from: number, to: number, err: unknown, limits: WatchLimits): void {
    state.busy = false;
    state.okStreak = 0;
    if (!this.refused(group, state, to - from + 1, err)) this.backOff(group, state, from, to, err, limits);
  }

  /** A refusal for the request's size: the range or the addresses made smaller; false when it was none. */
  private refused(group: RequestGroup, state: GroupState, span: number, err: unknown): boolean {
    const kind = classify(err);
    const chainId = this.work.chainId;
    if (kind === "range" && span > 1) {
      const cap = Math.floor(span / 2);
      if (cap < this.rangeCap)
        log.info("watcher: the provider refused a block range; ranges halved", { chainId, blocks: span, now: cap, error: brief(err) });
      this.rangeCap = Math.min(this.rangeCap, cap);
      state.maxBlocks = Math.min(state.maxBlocks, cap);
      return true;
    }
    if (kind === "results" && span > 1) {
      state.maxBlocks = Math.max(1, Math.min(state.maxBlocks, Math.floor(span / 2)));
      log.debug("watcher: too many results; the group's range halved", { chainId, group: group.key, blocks: state.maxBlocks });
      return true;
    }
    if (kind === "addresses" && group.addressCount > 1) {
      const cap = Math.floor(Math.min(group.addressCount, this.plans.addressCap) / 2);
      if (cap < this.plans.addressCap) {
        log.info("watcher: the provider refused a request's addresses; requests split", {
          chainId,
          addresses: group.addressCount,
          now: cap,
          error: brief(err),
        });
        this.plans.addressCap = cap;
      }
      state.held = true;
      return true;
    }
    if ((kind === "results" || kind === "range") && group.members.length > 1) {
      this.plans.splitGroup(group);
      state.held = true;
      log.debug("watcher: too many results in one block; the group's queries split", {
        chainId,
        group: group.key,
        members: group.members.length,
      });
      return true;
    }
    return false;
  }

  /**
   * A failure: the group is retried with backoff. Failing again while other requests of the chain succeed, the
   * failure is this request's own: a group of several queries is cut in two (its halves retried with backoff of
   * their own), so the query that fails ends up alone and delays no other query; a provider down for every request
   * splits nothing.
   */
  private backOff(group: RequestGroup, state: GroupState, from: number, to: number, err: unknown, limits: WatchLimits): void {
    const now = useRuntime().now();
    const own = state.failures >= 1 && this.lastSuccessAt > state.lastFailureAt;
    state.failures++;
    state.lastFailureAt = now;
    const delay = Math.min(limits.backoffMaxMs, limits.backoffBaseMs * 2 ** Math.min(30, state.failures - 1));
    state.retryAt = now + delay;
    if (own && group.members.length > 1) this.plans.splitGroup(group);
    log.warn("watcher request failed; its workflows wait and are retried with backoff", {
      chainId: this.work.chainId,
      owner: group.owner,
      group: group.key,
      workflows: new Set(group.members.map((m) => m.entry.workflowId)).size,
      addresses: group.addressCount,
      from,
      to,
      attempt: state.failures,
      retryInMs: delay,
      error: brief(err),
    });
  }

  private groupState(key: string, limits: WatchLimits): GroupState {
    let state = this.work.epoch.groups.get(key);
    if (!state) {
      state = { failures: 0, lastFailureAt: 0, retryAt: 0, maxBlocks: limits.rangeBlocks, okStreak: 0, busy: false, held: false };
      this.work.epoch.groups.set(key, state);
    }
    return state;
  }

  /** The first block a group still has to ask for: after its least advanced member. */
  private groupFrom(group: RequestGroup, epoch: Epoch): number {
    let least = Infinity;
    for (const m of group.members) least = Math.min(least, epoch.progress.get(m.key) ?? Infinity);
    return least + 1;
  }

  /** A group's answer against its members, in slices: the fires, in log order. */
  private async match(group: RequestGroup, logs: Log[], epoch: Epoch): Promise<Candidate[]> {
    const candidates: Candidate[] = [];
    if (logs.length === 0) return candidates;
    const index = indexOf(group);
    const plan = this.plans.owners.get(group.owner);
    const counts = new Map<string, number>();
    let began = performance.now();
    for (let i = 0; i < logs.length; i++) {
      const entryLog = logs[i]!;
      const found = index.lookup(entryLog.address, entryLog.topic0);
      if (found.length > 1) found.sort((a, b) => a.q - b.q);
      let firedFor: Set<string> | undefined;
      for (const m of found) {
        const wait = waitOf(m.entry);
        if (wait) {
          this.waits.match(wait, m, entryLog, epoch);
          continue;
        }
        const wf = m.entry.workflowId;
        if (firedFor?.has(wf)) continue;
        if (entryLog.block <= (epoch.progress.get(m.key) ?? Infinity)) continue;
        const decoded = matchPrepared(m.prepared, entryLog);
        if (!decoded) continue;
        const countKey = `${m.key}@${entryLog.block}`;
        const seen = (counts.get(countKey) ?? 0) + 1;
        counts.set(countKey, seen);
        if (seen > (m.prepared.query.maxEventsPerBlock ?? 100)) continue; // the next query may still take it
        (firedFor ??= new Set()).add(wf); // a log fires a workflow once, whichever of its queries matched first
        if (m.q > 0 && plan && matchedEarlierElsewhere(m, entryLog, plan)) continue;
        candidates.push(this.fires.eventCandidate(m, entryLog, decoded));
      }
      if ((i & 63) === 63 && performance.now() - began > SLICE_MS) {
        await yieldToLoop();
        began = performance.now();
      }
    }
    return candidates;
  }
}

/** A later query of the same workflow in another group matched first: that group fires the log. */
function matchedEarlierElsewhere(m: Member, entryLog: Log, plan: OwnerPlan): boolean {
  for (const other of plan.members.get(m.entry.workflowId) ?? []) {
    if (other.q >= m.q) break;
    if (other.group !== m.group && matchPrepared(other.prepared, entryLog)) return true;
  }
  return false;
}
