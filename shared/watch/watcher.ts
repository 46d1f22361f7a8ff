/**
 * The chain watcher (API.md §8.3.4-§8.3.7, §18.4): passes over a chain turn the blocks mined since the last pass into
 * fires of the block- and event-triggered workflows watching that chain (shared/workflow/watch-registry.ts), so
 * that one owner's queries can neither stop nor delay another owner's fires.
 *
 * Requests. The event queries are asked in bounded request groups (plan.ts): each carries one owner's queries, at
 * most 1,000 addresses and per topic position at most 10 values, and a query without addresses never shares a
 * request with one that has some. A group asks for the blocks after its members' progress, at most
 * LOGS_RANGE_BLOCKS at a time. A provider's refusal is read (`classify`): a block range too large halves the range
 * (for the whole chain when the provider names the range, else for that group), too many addresses lowers the
 * chain's address bound (groups are packed again), too many results for a single block splits the group's queries
 * in two; anything else is a failure: the group's workflows wait, retried with exponential backoff (2 s doubling to
 * 5 min), logged once per backoff step (one warning per failed attempt, never one per pass; the provider's message
 * is cut to 200 characters, never the request). A group answered with more than `maxLogsPerResponse` logs is
 * treated as too many results too, so no answer holds an unbounded number of logs in memory.
 *
 * Fairness. Each pass starts at most `requestsPerPass` requests (32), dealt round robin across owners from an
 * owner that moves on each pass; an owner's groups go most-behind first. At most `maxInFlight` (8) requests are in
 * flight per chain, at most half of them one owner's, and an owner with none in flight may always start one, so a
 * slow or hanging provider answer for one owner never keeps another's request from starting. An owner whose
 * queries need many requests gets them over more passes; a pass waits for its requests at most `waitMs` (the
 * polling loop: its poll interval), and answers that come later are taken up by the next pass. Another owner's fire
 * thus follows its block by about one block time plus the poll interval.
 *
 * Matching. A group's answer is read and matched in slices that give the event loop back every few milliseconds,
 * against an index of the group's queries by (address, topics[0]) (match.ts), never against every query of the
 * chain; each log is decoded once per ABI. Fires are claimed per owner: at most `firesPerOwnerPerPass` (100) claims
 * of one owner per pass, the claims of all owners through 16 slots taken in turn by owner. The fires of an answer
 * that are not claimed yet wait for the next pass, and the group asks for nothing more until they are: its
 * progress moves only when every fire of the range has been claimed.
 *
 * Progress. Every member of a group (a workflow's query, or part of it) and every block trigger has its own
 * progress: the last block whose fires are all claimed. A group asks from its least advanced member; a member
 * skips blocks it has already done. A workflow's cursor is the least progress of its queries; the checkpoint item
 * (store pattern 18, `CHAIN#<id>` / `CHECKPOINT`) keeps `block` (the head of the last pass: where every workflow not
 * listed, and every new one, stands) and `behind` (workflow → cursor, for those not at `block`; past
 * `maxBehindEntries` of them, the owners with most are kept as one lowest cursor each in `floors`). So a group that
 * lags (many requests, failures, fires carried over) catches up by itself without holding any other back, and a
 * restart resumes every workflow where it stood. Each fire is claimed with its fire id (§8.3.7: the block number,
 * or the transaction hash and the log's position in that transaction), so a range done again (a restart, a
 * rewound checkpoint, a query asked by two groups after its owner's groups were packed again) creates nothing twice.
 *
 * A pass:
 * 1. takes the chain's lease on the checkpoint with one conditional update (two overlapping invocations never
 *    process the chain at once); the lease is released when the invocation ends;
 * 2. reads the watch entries (small items; large triggers read once per process) and the latest block; with no
 *    checkpoint yet (a new deployment) or no watcher the checkpoint just moves to the head: nothing before it fires;
 * 3. packs each owner's queries into groups again only when that owner's workflows changed;
 * 4. settles every member's progress (at most `max_catchup_blocks` behind the head: older blocks are skipped with a
 *    warning, §8.3.7), makes the block triggers' fires (one header read per firing block, shared), deals the
 *    requests, matches their answers and claims fires as answers come in;
 * 5. writes the cursors back with the lease held.
 *
 * Blocks older than a watch entry's `since` never fire for it, nor blocks outside `[startAt, expiredAt)`; a workflow
 * that is deleted or no longer runnable loses its entry. Blocks are processed at the head (no confirmation depth);
 * a block re-mined by a short reorganisation does not fire again (fire ids never name a block hash).
 */
import { DeleteCommand, GetCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { getAddress, numberToHex, type Hex, type PublicClient } from "viem";
import { ulid } from "ulid";
import { useRuntime } from "../runtime";
import { log } from "../log";
import { ApiError } from "../errors";
import { Keys } from "../store/keys";
import { isConditionFailure } from "../store/table";
import { chainSettings, publicClient } from "../chain/chains";
import * as Workflow from "../workflow/workflow";
import { blockStepOutput } from "../execution/trigger-output";
import { callAll, prepareCalls } from "../engine/nodes/contract-read";
import type { EventQuery } from "../workflow/schemas";
import { noteFired, unwatch, upgrade, watchersOf, type WatchEntry } from "../workflow/watch-registry";
import { claimExecution, handOver } from "../execution/claim";
import { matchPrepared, readLogs, SLICE_MS, yieldToLoop, type Decoded, type Log, type RpcLog } from "./match";
import { indexOf, ownerOf, ownerSignature, planOwner, type Filter, type Member, type OwnerPlan, type PreparedCache, type RequestGroup } from "./plan";

export { holds, matchLog, mergedFilter } from "./match";

/** Blocks per `eth_getLogs` at most: within what public RPC providers accept; halved on their range errors. */
export const LOGS_RANGE_BLOCKS = 500;
/** How long a lease holds without being extended; every pass extends it. */
export const LEASE_MS = 60_000;
/** Fire records outlive any re-processing of their block. */
const FIRE_RECORD_TTL_S = 7 * 24 * 3600;
/** Claims in flight per chain, taken in turn by owner; one workflow's fires stay in order (cooldown, maxExecution). */
const CLAIM_CONCURRENCY = 16;
/** An owner naming at most this many addresses is packed before the pass goes on (a few milliseconds). */
const PLAN_INLINE_ADDRESSES = 20_000;
/** How long a pass waits for larger owners' packing; it finishes in the background. */
const PLAN_WAIT_MS = 100;

export interface WatchLimits {
  /** `eth_getLogs` started per pass, dealt round robin across owners. */
  requestsPerPass: number;
  /** `eth_getLogs` in flight per chain; one owner at most half; an owner with none in flight may always start one. */
  maxInFlight: number;
  /** Claims per owner per pass; the rest wait for the next pass. */
  firesPerOwnerPerPass: number;
  /** Addresses per request (API.md §18.4: 1,000). */
  maxAddresses: number;
  /** Values per topic position per request (API.md §18.4: 10). */
  maxTopicValues: number;
  /** Blocks per request at most. */
  rangeBlocks: number;
  /** An answer with more logs counts as a size refusal (unless it is one block of one query). */
  maxLogsPerResponse: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  requestTimeoutMs: number;
  /** Workflows whose own cursor the checkpoint keeps; past it, whole owners are kept at their lowest cursor. */
  maxBehindEntries: number;
}

export const DEFAULT_LIMITS: WatchLimits = {
  requestsPerPass: 32,
  maxInFlight: 8,
  firesPerOwnerPerPass: 100,
  maxAddresses: 1000,
  maxTopicValues: 10,
  rangeBlocks: LOGS_RANGE_BLOCKS,
  maxLogsPerResponse: 20_000,
  backoffBaseMs: 2_000,
  backoffMaxMs: 300_000,
  requestTimeoutMs: 20_000,
  maxBehindEntries: 4_000,
};

export interface Fired {
  fireId: string;
  workflowId: string;
  executionId: string;
}

export interface RequestMade {
  owner: string;
  group: string;
  from: number;
  to: number;
  addresses: number;
  /** The request's filter (the group's, shared: not to be changed). */
  filter: Filter;
}

export interface PassResult {
  chainId: number;
  /** `leased`: another invocation holds the chain; `started`: the checkpoint was set at the head. */
  status: "processed" | "leased" | "started" | "idle";
  /** The blocks this pass set out to process (from the least advanced workflow to the head), inclusive. */
  from?: number;
  to?: number;
  /** Blocks skipped because they were more than max_catchup_blocks behind. */
  skippedBlocks?: number;
  fired: Fired[];
  /** Fire ids already claimed before (a repeated range): nothing done. */
  duplicates: string[];
  /** The `eth_getLogs` this pass started. */
  requests: RequestMade[];
  /** Fires found and not claimed yet (carried to the next pass). */
  carried: number;
  /** Groups waiting: an answer in flight, fires carried, or backing off after failures. */
  waiting: number;
}

export interface PassOptions {
  /** Who holds the lease: one id per invocation. */
  holder: string;
  /** The chain's client (default: the configured RPC's). */
  client?: PublicClient;
  /** Start no request after this instant (ms). */
  deadline?: number;
  /** How long the pass waits for its requests and claims (default 30 s); later answers go to the next pass. */
  waitMs?: number;
  limits?: Partial<WatchLimits>;
}

// ---------------------------------------------------------------------------------------------------------
// Checkpoint, cursors and lease (pattern 18)

const table = () => useRuntime().config.tableName;
/** Map keys cannot be empty: entries without an owner are kept under this name. */
const NO_OWNER = "-";

interface Persisted {
  block?: number;
  rev?: string;
  behind: Record<string, number>;
  floors: Record<string, number>;
}

/** Takes (or extends) the chain's lease; the checkpoint item, or `null` when another holds it. */
async function acquire(chainId: number, holder: string, now: number): Promise<Persisted | null> {
  try {
    const out = await useRuntime().db.send(
      new UpdateCommand({
        TableName: table(),
        Key: Keys.chainCheckpoint(chainId),
        UpdateExpression: "SET leaseOwner = :me, leaseUntil = :until, #type = :type, v = :v",
        ConditionExpression: "attribute_not_exists(leaseUntil) OR leaseUntil < :now OR leaseOwner = :me",
        ExpressionAttributeNames: { "#type": "type" },
        ExpressionAttributeValues: { ":me": holder, ":until": now + LEASE_MS, ":now": now, ":type": "chainCheckpoint", ":v": 2 },
        ReturnValues: "ALL_NEW",
      }),
    );
    const item = out.Attributes ?? {};
    return {
      ...(typeof item.block === "number" ? { block: item.block } : {}),
      ...(typeof item.rev === "string" ? { rev: item.rev } : {}),
      behind: (item.behind as Record<string, number> | undefined) ?? {},
      floors: (item.floors as Record<string, number> | undefined) ?? {},
    };
  } catch (err) {
    if (isConditionFailure(err)) return null;
    throw err;
  }
}

/** Writes the cursors while still holding the lease (extending it); false when the lease was lost. */
async function store(chainId: number, holder: string, block: number, behind: Record<string, number>, floors: Record<string, number>, rev: string): Promise<boolean> {
  const now = useRuntime().now();
  try {
    await useRuntime().db.send(
      new UpdateCommand({
        TableName: table(),
        Key: Keys.chainCheckpoint(chainId),
        UpdateExpression: "SET #block = :block, behind = :behind, floors = :floors, rev = :rev, leaseUntil = :until",
        ConditionExpression: "leaseOwner = :me",
        ExpressionAttributeNames: { "#block": "block" },
        ExpressionAttributeValues: { ":block": block, ":behind": behind, ":floors": floors, ":rev": rev, ":until": now + LEASE_MS, ":me": holder },
      }),
    );
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

/** Gives the lease up so the next invocation starts at once. */
export async function release(chainId: number, holder: string): Promise<void> {
  try {
    await useRuntime().db.send(
      new UpdateCommand({
        TableName: table(),
        Key: Keys.chainCheckpoint(chainId),
        UpdateExpression: "REMOVE leaseOwner, leaseUntil",
        ConditionExpression: "leaseOwner = :me",
        ExpressionAttributeValues: { ":me": holder },
      }),
    );
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
}

/** The chain's checkpoint (tests, tools): the head of the last pass (workflows listed in `behind` stand earlier). */
export async function checkpointOf(chainId: number): Promise<number | undefined> {
  const out = await useRuntime().db.send(new GetCommand({ TableName: table(), Key: Keys.chainCheckpoint(chainId), ConsistentRead: true }));
  return typeof out.Item?.block === "number" ? out.Item.block : undefined;
}

/** Forgets the chain's checkpoint (tests, operators): the next pass starts at the head. */
export async function resetCheckpoint(chainId: number): Promise<void> {
  await useRuntime().db.send(new DeleteCommand({ TableName: table(), Key: Keys.chainCheckpoint(chainId) }));
}

/** Where a workflow stood at the last write: its own cursor, its owner's floor, or the checkpoint's block. */
function cursorOf(p: Persisted, entry: WatchEntry): number {
  const block = p.block!;
  return Math.min(p.behind[entry.workflowId] ?? p.floors[ownerOf(entry) || NO_OWNER] ?? block, block);
}

// ---------------------------------------------------------------------------------------------------------
// State kept between passes (per chain and lease holder)

interface GroupState {
  failures: number;
  lastFailureAt: number;
  retryAt: number;
  maxBlocks: number;
  okStreak: number;
  /** An answer in flight or its fires not all claimed: the group asks for nothing more. */
  busy: boolean;
  /** Refused for its size: waits until its owner's queries are packed again. */
  held: boolean;
}

interface Header {
  number: number;
  timestampMs: number;
  output: Record<string, unknown>;
}

/** A fire waiting for its claim: the block (for its time) and how to make its id and output. */
interface Candidate {
  entry: WatchEntry;
  block: number;
  fire: () => Promise<{ fireId: string; output: Record<string, unknown> }>;
  done: boolean;
}

/** The fires of one answer (or of one block trigger's new blocks): its members' progress moves to `to` once all are claimed. */
interface Batch {
  owner: string;
  memberKeys: string[];
  to: number;
  candidates: Candidate[];
  group?: GroupState;
  blockKey?: string;
}

/** What the state knows since the checkpoint was last read as written; a rewound or foreign checkpoint starts a new one. */
class Epoch {
  readonly groups = new Map<string, GroupState>();
  /** Member key (`<wf>:<q>[:<part>]`, `<wf>:block`) → last block whose fires are all claimed. */
  readonly progress = new Map<string, number>();
  readonly queues = new Map<string, Batch[]>();
  readonly draining = new Set<string>();
  readonly blockBusy = new Set<string>();
  readonly inFlight = new Map<string, number>();
  totalInFlight = 0;
  /** `<wf>:<since>` of workflows whose claim answered not found or not runnable. */
  readonly stopped = new Set<string>();
  dead = false;
}

/** A small map that forgets its oldest keys. */
class Lru<K, V> extends Map<K, V> {
  constructor(private readonly cap: number) {
    super();
  }
  override set(key: K, value: V): this {
    super.delete(key);
    super.set(key, value);
    if (this.size > this.cap) this.delete(this.keys().next().value as K);
    return this;
  }
}

/** Claim slots handed out in turn by owner, so one owner's hundreds of fires never queue another's behind them. */
class FairSlots {
  private readonly waiting = new Map<string, (() => void)[]>();
  private readonly order: string[] = [];
  constructor(private free: number) {}

  async run<T>(owner: string, work: () => Promise<T>): Promise<T> {
    await this.take(owner);
    try {
      return await work();
    } finally {
      this.give();
    }
  }

  private take(owner: string): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const list = this.waiting.get(owner);
      if (list) list.push(resolve);
      else {
        this.waiting.set(owner, [resolve]);
        this.order.push(owner);
      }
    });
  }

  private give(): void {
    const owner = this.order.shift();
    if (owner === undefined) {
      this.free++;
      return;
    }
    const list = this.waiting.get(owner)!;
    const next = list.shift()!;
    if (list.length > 0) this.order.push(owner);
    else this.waiting.delete(owner);
    next();
  }
}

/** One pass's budgets and bookkeeping. */
interface PassRun {
  head: number;
  limits: WatchLimits;
  result: PassResult;
  deadline?: number;
  requestsLeft: number;
  firesLeft: Map<string, number>;
  /** Owners whose claims failed in this pass (tried again next pass). */
  blocked: Set<string>;
  /** Workflows whose claim answered NOT_STARTED in this pass. */
  notStarted: Set<string>;
  running: number;
  closed: boolean;
  idle?: () => void;
  rotation: number;
}

class ChainWatch {
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
      const size = entries.reduce((n, e) => n + (e.trigger.type === "event" ? e.trigger.config.queries.reduce((k, q) => k + (q.addresses?.length ?? 0) + 1, 0) : 0), 0);
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

  /** Starts what can start: claims of owners with fires waiting, then requests. */
  pump(run: PassRun): void {
    if (run.closed || this.epoch.dead) return;
    const epoch = this.epoch;
    for (const [owner, queue] of epoch.queues) {
      if (queue.length === 0 || epoch.draining.has(owner) || run.blocked.has(owner)) continue;
      if ((run.firesLeft.get(owner) ?? run.limits.firesPerOwnerPerPass) <= 0) continue;
      this.drain(owner, run);
    }
    this.deal(run);
  }

  /** Starts requests round robin across owners, within the pass's budget and the in-flight bounds. */
  deal(run: PassRun): void {
    const { limits } = run;
    const now = useRuntime().now();
    if (run.requestsLeft <= 0 || (run.deadline !== undefined && now >= run.deadline)) return;
    const owners = [...this.plans.keys()].sort();
    if (owners.length === 0) return;
    const start = run.rotation % owners.length;
    const order = [...owners.slice(start), ...owners.slice(0, start)];
    const due = new Map<string, { group: RequestGroup; from: number }[]>();
    for (const owner of order) {
      const list: { group: RequestGroup; from: number }[] = [];
      for (const group of this.plans.get(owner)!.groups) {
        const state = this.groupState(group.key, limits);
        // Groups packed before the provider's address bound was learned wait for their owner's new groups.
        if (state.busy || state.held || state.retryAt > now || group.addressCount > this.addressCap) continue;
        const from = this.groupFrom(group);
        if (from <= run.head) list.push({ group, from });
      }
      list.sort((a, b) => a.from - b.from);
      if (list.length > 0) due.set(owner, list);
    }
    const epoch = this.epoch;
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

  request(group: RequestGroup, from: number, run: PassRun): void {
    const { limits } = run;
    const epoch = this.epoch;
    const state = this.groupState(group.key, limits);
    state.busy = true;
    const span = Math.max(1, Math.min(state.maxBlocks, this.rangeCap, limits.rangeBlocks));
    const to = Math.min(run.head, from + span - 1);
    run.requestsLeft--;
    epoch.inFlight.set(group.owner, (epoch.inFlight.get(group.owner) ?? 0) + 1);
    epoch.totalInFlight++;
    run.result.requests.push({ owner: group.owner, group: group.key, from, to, addresses: group.addressCount, filter: group.filter });
    const client = this.client;
    const work = (async () => {
      let batch: Batch | undefined;
      try {
        const raw = await withTimeout(
          client.request({ method: "eth_getLogs", params: [{ fromBlock: numberToHex(from), toBlock: numberToHex(to), ...group.filter }] } as never, { retryCount: 0 }) as Promise<RpcLog[]>,
          limits.requestTimeoutMs,
        );
        if (!Array.isArray(raw)) throw new Error("eth_getLogs did not answer a list");
        if (raw.length > limits.maxLogsPerResponse && (to > from || group.members.length > 1)) throw new TooManyLogs(raw.length, limits.maxLogsPerResponse);
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
      if (batch && !epoch.dead) this.enqueue(batch);
      this.pump(run);
    })();
    this.track(run, work);
  }

  /** A refused or failed request: a smaller range, fewer addresses, the group cut in two, or backoff. */
  failed(group: RequestGroup, state: GroupState, from: number, to: number, err: unknown, limits: WatchLimits): void {
    state.busy = false;
    state.okStreak = 0;
    const span = to - from + 1;
    const kind = classify(err);
    const chainId = this.chainId;
    if (kind === "range" && span > 1) {
      const cap = Math.floor(span / 2);
      if (cap < this.rangeCap) log.info("watcher: the provider refused a block range; ranges halved", { chainId, blocks: span, now: cap, error: brief(err) });
      this.rangeCap = Math.min(this.rangeCap, cap);
      state.maxBlocks = Math.min(state.maxBlocks, cap);
      return;
    }
    if (kind === "results" && span > 1) {
      state.maxBlocks = Math.max(1, Math.min(state.maxBlocks, Math.floor(span / 2)));
      log.debug("watcher: too many results; the group's range halved", { chainId, group: group.key, blocks: state.maxBlocks });
      return;
    }
    if (kind === "addresses" && group.addressCount > 1) {
      const cap = Math.floor(Math.min(group.addressCount, this.addressCap) / 2);
      if (cap < this.addressCap) {
        log.info("watcher: the provider refused a request's addresses; requests split", { chainId, addresses: group.addressCount, now: cap, error: brief(err) });
        this.addressCap = cap;
      }
      state.held = true;
      return;
    }
    if ((kind === "results" || kind === "range") && group.members.length > 1) {
      let split = this.split.get(group.owner);
      if (!split) this.split.set(group.owner, (split = new Set()));
      split.add(group.key);
      state.held = true;
      log.debug("watcher: too many results in one block; the group's queries split", { chainId, group: group.key, members: group.members.length });
      return;
    }
    const now = useRuntime().now();
    // Failing again while other requests of the chain succeed: the failure is this request's own. A group of several
    // queries is cut in two (its halves retried with backoff of their own), so the query that fails ends up alone
    // and delays no other query; a provider down for every request splits nothing.
    const own = state.failures >= 1 && this.lastSuccessAt > state.lastFailureAt;
    state.failures++;
    state.lastFailureAt = now;
    const delay = Math.min(limits.backoffMaxMs, limits.backoffBaseMs * 2 ** Math.min(30, state.failures - 1));
    state.retryAt = now + delay;
    if (own && group.members.length > 1) {
      let split = this.split.get(group.owner);
      if (!split) this.split.set(group.owner, (split = new Set()));
      split.add(group.key);
    }
    log.warn("watcher request failed; its workflows wait and are retried with backoff", {
      chainId,
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

  /** A group's answer against its members, in slices: the fires, in log order. */
  async match(group: RequestGroup, logs: Log[], epoch: Epoch): Promise<Candidate[]> {
    const candidates: Candidate[] = [];
    if (logs.length === 0) return candidates;
    const index = indexOf(group);
    const plan = this.plans.get(group.owner);
    const counts = new Map<string, number>();
    let began = performance.now();
    for (let i = 0; i < logs.length; i++) {
      const entryLog = logs[i]!;
      const found = index.lookup(entryLog.address, entryLog.topic0);
      if (found.length > 1) found.sort((a, b) => a.q - b.q);
      let firedFor: Set<string> | undefined;
      for (const m of found) {
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
        candidates.push(this.eventCandidate(m, entryLog, decoded));
      }
      if ((i & 63) === 63 && performance.now() - began > SLICE_MS) {
        await yieldToLoop();
        began = performance.now();
      }
    }
    return candidates;
  }

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
          fire: async () => ({ fireId: `${entry.workflowId}:${entry.trigger.id}:block:${block}`, output: (await this.header(block)).output }),
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
              log.warn("watcher could not fire; the owner's fires wait for the next pass", { chainId: this.chainId, owner, workflowId: c.entry.workflowId, attempt: failures, error: brief(err) });
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

  header(n: number): Promise<Header> {
    let found = this.headers.get(n);
    if (!found) {
      found = this.client.getBlock({ blockNumber: BigInt(n) }).then((b) => ({ number: n, timestampMs: Number(b.timestamp) * 1000, output: blockStepOutput(b) }));
      found.catch(() => this.headers.delete(n));
      this.headers.set(n, found);
    }
    return found;
  }

  /** The log's position inside its transaction (from the receipt, read once per transaction). */
  async positionInTransaction(raw: RpcLog, logIndex: number): Promise<number> {
    let known = this.receipts.get(raw.transactionHash);
    if (!known) {
      known = (this.client.request({ method: "eth_getTransactionReceipt", params: [raw.transactionHash] } as never) as Promise<{ logs: { logIndex: Hex }[] } | null>).then((r) => {
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

  /** Every workflow's cursor (the least progress of its members), written with the lease held. */
  async persist(holder: string, head: number, watchers: readonly WatchEntry[], limits: WatchLimits): Promise<boolean> {
    const { progress } = this.epoch;
    let behind: Record<string, number> = {};
    const byOwner = new Map<string, string[]>();
    let count = 0;
    for (const entry of watchers) {
      let cursor = Infinity;
      for (const key of this.progressKeys(entry)) cursor = Math.min(cursor, progress.get(key) ?? Infinity);
      if (!(cursor < head)) continue;
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

/** A later query of the same workflow in another group matched first: that group fires the log. */
function matchedEarlierElsewhere(m: Member, entryLog: Log, plan: OwnerPlan): boolean {
  for (const other of plan.members.get(m.entry.workflowId) ?? []) {
    if (other.q >= m.q) break;
    if (other.group !== m.group && matchPrepared(other.prepared, entryLog)) return true;
  }
  return false;
}

const states = new Map<string, ChainWatch>();

function stateOf(chainId: number, holder: string): ChainWatch {
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

// ---------------------------------------------------------------------------------------------------------
// A pass

/** One pass over `chainId`: requests dealt fairly, fires claimed once, every workflow's cursor written back. */
export async function watchChain(chainId: number, options: PassOptions): Promise<PassResult> {
  const { now, config } = useRuntime();
  const limits: WatchLimits = { ...DEFAULT_LIMITS, ...options.limits };
  const result: PassResult = { chainId, status: "idle", fired: [], duplicates: [], requests: [], carried: 0, waiting: 0 };
  const persisted = await acquire(chainId, options.holder, now());
  if (persisted === null) return { ...result, status: "leased" };
  const state = stateOf(chainId, options.holder);
  state.client = options.client ?? publicClient(chainSettings(chainId));

  const watchers = await liveWatchers(chainId, now(), state);
  const head = Number(await state.client.getBlockNumber({ cacheTime: 0 }));
  if (persisted.block === undefined || watchers.length === 0) {
    state.reset();
    const moved = persisted.block === undefined || head > persisted.block || Object.keys(persisted.behind).length + Object.keys(persisted.floors).length > 0;
    if (moved && (await store(chainId, options.holder, head, {}, {}, ulid()))) state.written = undefined;
    return { ...result, status: persisted.block === undefined ? "started" : "idle" };
  }
  // Progress known in memory holds only while the checkpoint is as this holder last wrote it.
  if (!state.written || state.written.rev !== persisted.rev || state.written.block !== persisted.block) state.reset();
  await state.plan(watchers, limits);

  // Every member's progress, at most max_catchup_blocks behind the head.
  const epoch = state.epoch;
  const floor = head - config.limits.maxCatchupBlocks;
  let from = Infinity;
  let skipped = 0;
  let skippedEntries = 0;
  const settle = (key: string, entry: WatchEntry) => {
    let done = epoch.progress.get(key) ?? cursorOf(persisted, entry);
    if (done < floor) {
      skipped = Math.max(skipped, floor - done);
      skippedEntries++;
      done = floor;
    }
    epoch.progress.set(key, done);
    if (done < head) from = Math.min(from, done + 1);
  };
  for (const entry of watchers) for (const key of state.progressKeys(entry)) settle(key, entry);
  if (skipped > 0) {
    result.skippedBlocks = skipped;
    log.warn("watcher skipped blocks beyond max_catchup_blocks", { chainId, workflows: skippedEntries, blocks: skipped, before: floor + 1 });
  }
  const waitingBefore = [...epoch.queues.values()].some((q) => q.length > 0);
  if (from === Infinity && !waitingBefore) {
    await state.persist(options.holder, head, watchers, limits);
    return result;
  }
  result.status = "processed";
  if (from !== Infinity) {
    result.from = from;
    result.to = head;
  }

  const run: PassRun = {
    head,
    limits,
    result,
    ...(options.deadline !== undefined ? { deadline: options.deadline } : {}),
    requestsLeft: limits.requestsPerPass,
    firesLeft: new Map(),
    blocked: new Set(),
    notStarted: new Set(),
    running: 0,
    closed: false,
    rotation: state.rotation++,
  };
  state.blockBatches(watchers, run);
  state.pump(run);
  const waitMs = Math.max(0, Math.min(options.waitMs ?? 30_000, options.deadline !== undefined ? options.deadline - now() : Infinity));
  await new Promise<void>((resolve) => {
    if (run.running === 0) return resolve();
    const timer = setTimeout(resolve, waitMs);
    run.idle = () => {
      clearTimeout(timer);
      resolve();
    };
  });
  run.closed = true;

  for (const queue of epoch.queues.values()) for (const batch of queue) result.carried += batch.candidates.filter((c) => !c.done).length;
  for (const g of epoch.groups.values()) if (g.busy || g.retryAt > now()) result.waiting++;
  if (!(await state.persist(options.holder, head, watchers, limits))) state.reset();
  return result;
}

/** The chain's watch entries, minus expired ones (whose entries go); entries of older versions upgraded once. */
async function liveWatchers(chainId: number, now: number, state: ChainWatch): Promise<WatchEntry[]> {
  const entries = await watchersOf(chainId);
  const live: WatchEntry[] = [];
  for (const entry of entries) {
    if (entry.expiredAt !== undefined && entry.expiredAt <= now) await unwatch(entry.workflowId, entry.since);
    else live.push(entry);
  }
  const legacy = live.map((entry, i) => ({ entry, i })).filter(({ entry }) => entry.v < 3 && !state.upgraded.has(`${entry.workflowId}:${entry.since}`));
  let next = 0;
  const upgradeOne = async () => {
    while (next < legacy.length) {
      const { entry, i } = legacy[next++]!;
      state.upgraded.add(`${entry.workflowId}:${entry.since}`);
      try {
        live[i] = await upgrade(entry);
      } catch (err) {
        log.warn("watcher could not upgrade a watch entry", { chainId, workflowId: entry.workflowId, error: brief(err) });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(16, legacy.length) }, upgradeOne));
  return live;
}

// ---------------------------------------------------------------------------------------------------------
// Provider errors

class TooManyLogs extends Error {
  constructor(
    readonly count: number,
    limit: number,
  ) {
    super(`query returned more than ${limit} results (${count})`);
  }
}

class RequestTimeout extends Error {}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RequestTimeout(`eth_getLogs timed out after ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/** The provider's own words (never the request, which may carry 1,000 addresses), at most 200 characters. */
function brief(err: unknown): string {
  const parts: string[] = [];
  let e: unknown = err;
  for (let depth = 0; e && depth < 4; depth++, e = (e as { cause?: unknown }).cause) {
    const o = e as { details?: unknown; shortMessage?: unknown; message?: unknown; code?: unknown; status?: unknown };
    if (typeof o.details === "string" && o.details) {
      parts.push(o.details);
      if (o.code !== undefined) parts.push(`code ${String(o.code)}`);
      if (o.status !== undefined) parts.push(`status ${String(o.status)}`);
      break;
    }
    if (!(e as { cause?: unknown }).cause) parts.push(typeof o.shortMessage === "string" ? o.shortMessage : typeof o.message === "string" ? o.message : String(e));
  }
  const text = parts.join("; ");
  return text.length > 200 ? `${text.slice(0, 197)}...` : text;
}

/**
 * What a refusal says: the block range is too large, the request names too many addresses, the answer would hold
 * too many results, or something else (a failure). Read from the provider's message (Infura, Alchemy, QuickNode,
 * geth, erigon wordings) and code -32005 (limit exceeded).
 */
export function classify(err: unknown): "range" | "addresses" | "results" | "other" {
  if (err instanceof TooManyLogs) return "results";
  if (err instanceof RequestTimeout) return "other";
  const text = brief(err).toLowerCase();
  // A rate limit is a failure like any other (backoff), whatever its code says.
  if (/(rate limit|rate-limit|too many requests|status 429|daily request|capacity)/.test(text)) return "other";
  if (/(more than \d+ (results|logs)|too many (results|logs)|response size|results? (limit|exceed)|logs? limit|limit exceeded|query timeout|returned more than|response is too big|code -32005)/.test(text)) return "results";
  if (/address/.test(text) && /(too many|exceed|limit|maximum|max\b|at most|up to)/.test(text)) return "addresses";
  if (/(block range|range (is )?too (large|wide|big)|range limit|blocks? range|range exceeds|range should|max(imum)? (block )?range|too many blocks)/.test(text)) return "range";
  return "other";
}

// ---------------------------------------------------------------------------------------------------------
// Firing

/** `methodCalls` against the log's contract: contractRead output elements (§8.4.3), failures included. */
async function methodResults(chainId: number, query: EventQuery, contract: Hex): Promise<unknown[]> {
  const calls = query.methodCalls ?? [];
  try {
    const prepared = prepareCalls(calls, contract, query.contractAbi);
    return (await callAll(chainId, prepared)).elements;
  } catch (err) {
    return calls.map((c) => ({ methodName: c.methodName, contractAddress: c.contractAddress ?? contract, success: false, error: (err as Error).message, value: null }));
  }
}

export type FireOutcome = { kind: "fired"; executionId: string } | { kind: "duplicate" } | { kind: "stopped"; reason: string };

/**
 * Claims the execution of one automatic fire (its trigger step's `output` given) with `fireId` as the claim's intent
 * (its fire record, put conditionally before the workflow's count is taken), then publishes it for a runner. A fire
 * already claimed → `duplicate`; a workflow deleted or not runnable → `stopped` with the reason (WORKFLOW_NOT_FOUND
 * or the §8.8.7 reason).
 */
export async function fireExecution(workflowId: string, fireId: string, output: Record<string, unknown>): Promise<FireOutcome> {
  const now = useRuntime().now();
  let executionId: string;
  try {
    executionId = await claimExecution(workflowId, {
      now,
      fire: { fireId, expiresAt: Math.floor(now / 1000) + FIRE_RECORD_TTL_S },
      stepOutput: output,
      runInput: { triggerOutput: output },
    });
  } catch (err) {
    if (err instanceof Workflow.DuplicateFire) return { kind: "duplicate" };
    if (err instanceof ApiError && (err.status === 404 || err.status === 412)) return { kind: "stopped", reason: err.extra.reason ?? err.code };
    throw err;
  }
  await handOver(workflowId, executionId);
  return { kind: "fired", executionId };
}

// ---------------------------------------------------------------------------------------------------------
// The polling loop (AWS: one invocation a minute; locally: for as long as `npm start` runs)

export interface LoopOptions {
  holder?: string;
  /** Pause between passes (default: half the fastest configured block time, 500 ms to 5 s). */
  pollMs?: number;
  /** Stop at this instant (ms); without it, until `stop()`. */
  until?: number;
  limits?: Partial<WatchLimits>;
  /** Clients by chain id (default: the configured RPCs'). */
  clients?: Record<number, PublicClient>;
}

/** Passes over every configured chain until `until` or `stop()`; leases are released at the end. */
export function startWatching(options: LoopOptions = {}): { stop: () => Promise<void>; done: Promise<void> } {
  const holder = options.holder ?? `watcher-${ulid()}`;
  const { config, now } = useRuntime();
  const fastest = Math.min(...config.chains.map((c) => (c.blockTimeSeconds ?? 12) * 1000), 10_000);
  const pollMs = options.pollMs ?? Math.min(5_000, Math.max(500, fastest / 2));
  let stopping = false;
  let wake: (() => void) | undefined;
  const failures = new Map<number, number>();
  const done = (async () => {
    while (!stopping && (options.until === undefined || now() < options.until)) {
      await Promise.all(
        config.chains.map((c) =>
          watchChain(c.chainId, {
            holder,
            waitMs: pollMs,
            ...(options.clients?.[c.chainId] ? { client: options.clients[c.chainId] } : {}),
            ...(options.until !== undefined ? { deadline: options.until } : {}),
            ...(options.limits ? { limits: options.limits } : {}),
          }).then(
            () => failures.delete(c.chainId),
            (err) => {
              // Once per doubling of consecutive failed passes, never once per pass.
              const n = (failures.get(c.chainId) ?? 0) + 1;
              failures.set(c.chainId, n);
              if ((n & (n - 1)) === 0) log.warn("watcher pass failed", { chainId: c.chainId, passes: n, error: brief(err) });
            },
          ),
        ),
      );
      const left = options.until === undefined ? pollMs : Math.min(pollMs, options.until - now());
      if (left > 0 && !stopping) await new Promise<void>((resolve) => ((wake = resolve), setTimeout(resolve, left).unref?.()));
    }
    await Promise.all(config.chains.map((c) => forget(c.chainId, holder)));
    await Promise.all(config.chains.map((c) => release(c.chainId, holder).catch(() => undefined)));
  })();
  return {
    done,
    stop: async () => {
      stopping = true;
      wake?.();
      await done;
    },
  };
}
