/**
 * What a chain's state keeps between passes (per chain and lease holder) and what one pass keeps: groups' backoff,
 * members' progress, fires waiting for their claims, the claim slots; and what a chain's collaborators (fires, waits,
 * requests) ask of the watch that owns them (`PassWork`).
 */
import type { AwaitWatch } from "../store/entities/watch";
import type { WatchEntry } from "../workflow/watch-registry";
import type { Decoded, Log } from "./match";
import type { PassResult, WatchLimits } from "./types";
import type { EventQuery } from "../kinds/support/event-query";

export interface GroupState {
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

export interface Header {
  number: number;
  timestampMs: number;
  output: Record<string, unknown>;
}

/** A fire waiting for its claim: the block (for its time) and how to make its id and output. */
export interface Candidate {
  entry: WatchEntry;
  block: number;
  fire: () => Promise<{ fireId: string; output: Record<string, unknown> }>;
  done: boolean;
}

/** The fires of one answer (or of one block trigger's new blocks): its members' progress moves to `to` once all are claimed. */
export interface Batch {
  owner: string;
  memberKeys: string[];
  to: number;
  candidates: Candidate[];
  group?: GroupState;
  blockKey?: string;
}

/**
 * A chain-event wait (chain-waits.ts) as the plans serve it: `entry` stands in for a watch entry (its `workflowId`
 * is `key`, `await:<executionId>:<nodeId>`, so its members and its cursor are keyed apart from every workflow's).
 */
export interface Wait {
  key: string;
  watch: AwaitWatch;
  entry: WatchEntry;
}

/** The earliest log found so far that matches a wait (block, log index, then query order). */
export interface WaitMatch {
  wait: Wait;
  log: Log;
  q: number;
  query: EventQuery;
  decoded: Decoded;
}

/** What the state knows since the checkpoint was last read as written; a rewound or foreign checkpoint starts a new one. */
export class Epoch {
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
  /** Wait key → its earliest match so far, until the wait is ended with it (every member has passed its block). */
  readonly waitMatches = new Map<string, WaitMatch>();
  /** Waits being ended (`endWaitByEvent` in flight). */
  readonly ending = new Set<string>();
  dead = false;
}

/** A small map that forgets its oldest keys. */
export class Lru<K, V> {
  private readonly map = new Map<K, V>();
  constructor(private readonly cap: number) {}
  get(key: K): V | undefined {
    return this.map.get(key);
  }
  delete(key: K): boolean {
    return this.map.delete(key);
  }
  set(key: K, value: V): this {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.cap) this.map.delete(this.map.keys().next().value as K);
    return this;
  }
}

/** Claim slots handed out in turn by owner, so one owner's hundreds of fires never queue another's behind them. */
export class FairSlots {
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
export interface PassRun {
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
  /** Waits whose ending failed in this pass (tried again next pass). */
  waitsFailed: Set<string>;
  running: number;
  closed: boolean;
  idle?: () => void;
  rotation: number;
}

/** What a chain's collaborators ask of the watch that owns them (chain-watch.ts). */
export interface PassWork {
  readonly chainId: number;
  /** The epoch in force (a new one after each reset: work that kept an older one sees it `dead`). */
  readonly epoch: Epoch;
  /** Counts `work` as the pass's until it settles. */
  track(run: PassRun, work: Promise<unknown>): void;
  /** Starts what can start: endings of waits whose match is final, claims of owners with fires waiting, requests. */
  pump(run: PassRun): void;
}
