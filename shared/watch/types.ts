/** What a pass of the chain watcher (watcher.ts) is given and answers: its limits, options and result. */
import type { PublicClient } from "viem";
import type { Filter } from "./plan";

/** Blocks per `eth_getLogs` at most: within what public RPC providers accept; halved on their range errors. */
export const LOGS_RANGE_BLOCKS = 500;

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

interface Fired {
  fireId: string;
  workflowId: string;
  executionId: string;
}

interface WaitEnded {
  workflowId: string;
  executionId: string;
  nodeId: string;
  /** The log that ended it. */
  blockNumber: number;
  logIndex: number;
  /** What `endWaitByEvent` answered: false when the wait was no longer open (its entry is removed all the same). */
  open: boolean;
}

interface RequestMade {
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
  /** Chain-event waits ended by their first matching log (API.md §17.1). */
  waitsEnded: WaitEnded[];
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
