/**
 * The most recent log matching an event trigger's queries (API.md §17.3), asked of the chain the way the watcher
 * asks it (§18.4): the queries packed into request groups by plan.ts (at most 1,000 addresses and 10 values per
 * topic position per `eth_getLogs`), each group asked over windows of at most `LOGS_RANGE_BLOCKS` blocks, from the
 * head back to `maxCatchupBlocks` blocks behind it, newest window first, stopping at the first window with a match.
 * A window the provider refuses as too wide or too large is halved (down to one block); any other failure, or the
 * scan outliving its deadline, is an RPC failure. At most `CONCURRENCY` requests are in flight.
 *
 * Matching is the watcher's: topics and addresses, ABI-decoded conditions, `maxEventsPerBlock` per query and block
 * (counted in log order), a log matched by the first of the trigger's queries that takes it. The output is what a
 * fire on that log carries (§8.3.6): the log, its block's time, its decoded event, and `methodResults` when the
 * query has `methodCalls`.
 */
import { getAddress, numberToHex, type PublicClient } from "viem";
import { chainSettings, publicClient } from "../chain/chains";
import type { WatchEntry } from "../workflow/watch-registry";
import { matchPrepared, readLogs, type Decoded, type Log, type RpcLog } from "./match";
import { indexOf, planOwner, type Member, type RequestGroup } from "./plan";
import { brief, classify, TooManyLogs, withTimeout } from "./provider";
import { methodResults } from "./fire";
import { DEFAULT_LIMITS, LOGS_RANGE_BLOCKS } from "./types";
import { useRuntime } from "../current-runtime";
import type { EventQuery } from "../kinds/support/event-query";

/** `eth_getLogs` in flight at once for one scan: an owner's share of the watcher's in-flight bound. */
const CONCURRENCY = Math.ceil(DEFAULT_LIMITS.maxInFlight / 2);

export type ScanResult =
  { kind: "found"; output: Record<string, unknown> } | { kind: "none"; blocks: number } | { kind: "error"; error: string };

/** The most recent matching log within the last `maxBlocks` blocks of `chainId`, asked before `deadline` (ms). */
export async function latestMatchingLog(
  queries: readonly EventQuery[],
  chainId: number,
  maxBlocks: number,
  deadline: number,
): Promise<ScanResult> {
  const { now } = useRuntime();
  const client = publicClient(chainSettings(chainId));
  const entry: WatchEntry = {
    workflowId: "run",
    chainId,
    trigger: { id: "run", name: "run", type: "event", config: { queries: [...queries] } } as WatchEntry["trigger"],
    since: 0,
    v: 3,
  };
  const plan = await planOwner("", [entry], DEFAULT_LIMITS, new Set(), new Map());

  let head: number;
  try {
    head = Number(await client.getBlockNumber({ cacheTime: 0 }));
  } catch (err) {
    return { kind: "error", error: `could not read the latest block of chain ${chainId}: ${brief(err)}` };
  }
  const lowest = Math.max(0, head - Math.max(1, maxBlocks) + 1);
  let span = LOGS_RANGE_BLOCKS;
  for (let to = head; to >= lowest;) {
    const from = Math.max(lowest, to - span + 1);
    let logs: Log[][];
    try {
      logs = await inTurn(
        plan.groups.map((group) => () => getLogs(client, group, from, to, deadline - now())),
        CONCURRENCY,
      );
    } catch (err) {
      const kind = classify(err);
      if ((kind === "range" || kind === "results") && to > from) {
        span = Math.max(1, Math.floor((to - from + 1) / 2));
        continue;
      }
      return { kind: "error", error: `eth_getLogs failed on chain ${chainId}: ${brief(err)}` };
    }
    const found = latest(plan.groups, logs);
    if (found) {
      try {
        return { kind: "found", output: await eventOutput(client, chainId, found.log, found.member.prepared.query, found.decoded) };
      } catch (err) {
        return { kind: "error", error: `could not read block ${found.log.block} of chain ${chainId}: ${brief(err)}` };
      }
    }
    if (now() >= deadline && from > lowest) return { kind: "error", error: `the scan of chain ${chainId} ran out of time` };
    to = from - 1;
  }
  return { kind: "none", blocks: head - lowest + 1 };
}

async function getLogs(client: PublicClient, group: RequestGroup, from: number, to: number, leftMs: number): Promise<Log[]> {
  if (leftMs <= 0) throw new Error("the scan ran out of time");
  const raw = await withTimeout(
    client.request(
      { method: "eth_getLogs", params: [{ fromBlock: numberToHex(from), toBlock: numberToHex(to), ...group.filter }] } as never,
      { retryCount: 0 },
    ) as Promise<RpcLog[]>,
    Math.min(DEFAULT_LIMITS.requestTimeoutMs, leftMs),
  );
  if (!Array.isArray(raw)) throw new Error("eth_getLogs did not answer a list");
  if (raw.length > DEFAULT_LIMITS.maxLogsPerResponse && to > from) throw new TooManyLogs(raw.length, DEFAULT_LIMITS.maxLogsPerResponse);
  return readLogs(raw);
}

/** Runs the tasks at most `limit` at a time; the first failure fails the whole (the rest are not started). */
async function inTurn<T>(tasks: (() => Promise<T>)[], limit: number): Promise<T[]> {
  const results: T[] = new Array<T>(tasks.length);
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (!failed && next < tasks.length) {
      const i = next++;
      try {
        results[i] = await tasks[i]!();
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, worker));
  return results;
}

/** The last log of the window that fires, as the watcher would match it. */
function latest(groups: readonly RequestGroup[], answers: readonly Log[][]): { log: Log; member: Member; decoded: Decoded } | undefined {
  // Each log once (groups may overlap), in chain order.
  const seen = new Map<string, { log: Log; group: RequestGroup }>();
  answers.forEach((logs, g) => {
    for (const log of logs) {
      const key = `${log.block}:${log.index}`;
      if (!seen.has(key)) seen.set(key, { log, group: groups[g]! });
    }
  });
  const ordered = [...seen.values()].sort((a, b) => a.log.block - b.log.block || a.log.index - b.log.index);
  const counts = new Map<string, number>();
  let best: { log: Log; member: Member; decoded: Decoded } | undefined;
  for (const { log } of ordered) {
    // Every member of every group that may match, in query order: the first that takes the log fires it.
    const candidates = groups.flatMap((group) => indexOf(group).lookup(log.address, log.topic0)).sort((a, b) => a.q - b.q);
    for (const member of candidates) {
      const decoded = matchPrepared(member.prepared, log);
      if (!decoded) continue;
      const countKey = `${member.q}@${log.block}`;
      const count = (counts.get(countKey) ?? 0) + 1;
      counts.set(countKey, count);
      if (count > (member.prepared.query.maxEventsPerBlock ?? 100)) continue;
      best = { log, member, decoded };
      break;
    }
  }
  return best;
}

/** A fire's output for the log (as the watcher's fires carry it, shared/watch/chain-reader.ts). */
async function eventOutput(
  client: PublicClient,
  chainId: number,
  log: Log,
  query: EventQuery,
  decoded: Decoded,
): Promise<Record<string, unknown>> {
  const raw = log.raw;
  const block = await client.getBlock({ blockNumber: BigInt(log.block) });
  const data: Record<string, unknown> = {
    address: getAddress(raw.address),
    blockNumber: log.block,
    blockHash: raw.blockHash,
    transactionHash: raw.transactionHash,
    transactionIndex: parseInt(raw.transactionIndex, 16),
    logIndex: log.index,
    topics: raw.topics,
    data: raw.data,
    timestamp: Number(block.timestamp) * 1000,
  };
  if (decoded.eventName !== undefined) Object.assign(data, { eventName: decoded.eventName, args: decoded.args });
  if (query.methodCalls?.length) data.methodResults = await methodResults(chainId, query, getAddress(raw.address));
  return { data };
}
