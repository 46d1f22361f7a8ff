/**
 * The chain watcher (API.md §8.3.4-§8.3.7): one pass per chain turns the blocks mined since the last pass into
 * fires of the block- and event-triggered workflows watching that chain (shared/watch/registry.ts).
 *
 * A pass:
 * 1. takes the chain's lease on its checkpoint (store pattern 18, `CHAIN#<id>` / `CHECKPOINT`: `block`, `leaseOwner`,
 *    `leaseUntil`) with one conditional update, so two overlapping invocations never process the same range; the
 *    lease is extended with every checkpoint advance and released when the invocation ends;
 * 2. reads the watch entries of the chain (one gsi2 Query) and the latest block; with no checkpoint yet (a new
 *    deployment) or no watcher the checkpoint just moves to the head: nothing before it ever fires;
 * 3. processes `checkpoint + 1 .. head` in ranges of LOGS_RANGE_BLOCKS, at most `max_catchup_blocks` behind the
 *    head (older blocks are skipped, §8.3.7). Blocks are processed at the head (no confirmation depth): fire
 *    latency is about one block time, and a block re-mined by a short reorganisation does not fire again because
 *    the fire id names the block number, or the transaction hash and the log's position inside its transaction,
 *    never the block hash. (A transaction that a reorganisation drops after it fired is not taken back.)
 * 4. per range: block triggers fire on every block whose number is a multiple of `interval` (one header read per
 *    such block, shared by every workflow); event triggers share ONE `eth_getLogs` for all the chain's workflows
 *    (addresses and topics merged into a superset filter) and are matched in memory per query: addresses, topics
 *    with wildcards, ABI-decoded conditions, `maxEventsPerBlock`, then `cooldownSeconds` in chain time. RPC calls
 *    per range are therefore constant in the number of workflows: 1 `eth_getLogs`, 1 header per block that has a
 *    fire, 1 receipt per transaction with a matching log (for the log's position in it), plus `methodCalls`.
 * 5. each fire is claimed with its fire id in the claim's transaction (Workflow.claim `fire`): a repeated fire is
 *    a no-op (DuplicateFire), so a pass that dies before advancing the checkpoint is simply done again. The
 *    execution is then published on the bus for a runner; then the checkpoint advances.
 *
 * Blocks older than a watch entry's `since` (the second it started watching: create or resume) never fire for it,
 * nor blocks outside `[startAt, expiredAt)`; a workflow that is deleted or no longer runnable loses its entry.
 */
import { DeleteCommand, GetCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { decodeEventLog, getAddress, hexToNumber, numberToHex, type AbiEvent, type Hex, type PublicClient } from "viem";
import { ulid } from "ulid";
import { useRuntime } from "../runtime";
import { log } from "../log";
import { ApiError } from "../errors";
import { Keys } from "../store/keys";
import { isConditionFailure } from "../store/table";
import { chainSettings, publicClient } from "../chain/chains";
import * as Workflow from "../workflow/workflow";
import { blockStepOutput } from "../execution/trigger-output";
import { toJson } from "../engine/nodes/abi";
import { callAll, prepareCalls } from "../engine/nodes/contract-read";
import type { EventQuery } from "../workflow/schemas";
import { noteFired, unwatch, watchersOf, type WatchEntry } from "./registry";
import { claimExecution, handOver } from "../execution/claim";

/** Blocks per `eth_getLogs` (and per checkpoint advance): within what public RPC providers accept. */
export const LOGS_RANGE_BLOCKS = 500;
/** How long a lease holds without being extended; every checkpoint advance extends it. */
export const LEASE_MS = 60_000;
/** Fire records outlive any re-processing of their block: the checkpoint never moves back. */
const FIRE_RECORD_TTL_S = 7 * 24 * 3600;
/** Concurrent claims (across workflows; one workflow's fires stay in order for its cooldown and maxExecution). */
const CLAIM_CONCURRENCY = 16;

export interface Fired {
  fireId: string;
  workflowId: string;
  executionId: string;
}

export interface PassResult {
  chainId: number;
  /** `leased`: another invocation holds the chain; `started`: the checkpoint was set at the head. */
  status: "processed" | "leased" | "started" | "idle";
  /** The blocks processed, inclusive. */
  from?: number;
  to?: number;
  /** Blocks skipped because they were more than max_catchup_blocks behind. */
  skippedBlocks?: number;
  fired: Fired[];
  /** Fire ids already claimed before (a repeated range): nothing done. */
  duplicates: string[];
}

export interface PassOptions {
  /** Who holds the lease: one id per invocation. */
  holder: string;
  /** The chain's client (default: the configured RPC's). */
  client?: PublicClient;
  /** Stop starting new ranges at this instant (ms). */
  deadline?: number;
}

// ---------------------------------------------------------------------------------------------------------
// Checkpoint and lease (pattern 18)

const table = () => useRuntime().config.tableName;

/** Takes (or extends) the chain's lease; the checkpoint (`undefined`: none yet), or `null` when another holds it. */
async function acquire(chainId: number, holder: string, now: number): Promise<number | undefined | null> {
  try {
    const out = await useRuntime().db.send(
      new UpdateCommand({
        TableName: table(),
        Key: Keys.chainCheckpoint(chainId),
        UpdateExpression: "SET leaseOwner = :me, leaseUntil = :until, #type = :type, v = :v",
        ConditionExpression: "attribute_not_exists(leaseUntil) OR leaseUntil < :now OR leaseOwner = :me",
        ExpressionAttributeNames: { "#type": "type" },
        ExpressionAttributeValues: { ":me": holder, ":until": now + LEASE_MS, ":now": now, ":type": "chainCheckpoint", ":v": 1 },
        ReturnValues: "ALL_NEW",
      }),
    );
    const block = out.Attributes?.block;
    return typeof block === "number" ? block : undefined;
  } catch (err) {
    if (isConditionFailure(err)) return null;
    throw err;
  }
}

/** Moves the checkpoint to `block` while still holding the lease (extending it); false when the lease was lost. */
async function advance(chainId: number, holder: string, block: number): Promise<boolean> {
  const now = useRuntime().now();
  try {
    await useRuntime().db.send(
      new UpdateCommand({
        TableName: table(),
        Key: Keys.chainCheckpoint(chainId),
        UpdateExpression: "SET #block = :block, leaseUntil = :until",
        ConditionExpression: "leaseOwner = :me AND (attribute_not_exists(#block) OR #block < :block)",
        ExpressionAttributeNames: { "#block": "block" },
        ExpressionAttributeValues: { ":block": block, ":until": now + LEASE_MS, ":me": holder },
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

/** The chain's checkpoint (tests, tools): the last processed block. */
export async function checkpointOf(chainId: number): Promise<number | undefined> {
  const out = await useRuntime().db.send(new GetCommand({ TableName: table(), Key: Keys.chainCheckpoint(chainId), ConsistentRead: true }));
  return typeof out.Item?.block === "number" ? out.Item.block : undefined;
}

/** Forgets the chain's checkpoint (tests, operators): the next pass starts at the head. */
export async function resetCheckpoint(chainId: number): Promise<void> {
  await useRuntime().db.send(new DeleteCommand({ TableName: table(), Key: Keys.chainCheckpoint(chainId) }));
}

// ---------------------------------------------------------------------------------------------------------
// A pass

/** One pass over `chainId`: the blocks since the checkpoint, every fire claimed once, the checkpoint advanced. */
export async function watchChain(chainId: number, options: PassOptions): Promise<PassResult> {
  const { now, config } = useRuntime();
  const result: PassResult = { chainId, status: "idle", fired: [], duplicates: [] };
  const checkpoint = await acquire(chainId, options.holder, now());
  if (checkpoint === null) return { ...result, status: "leased" };
  const client = options.client ?? publicClient(chainSettings(chainId));

  const watchers = await liveWatchers(chainId, now());
  const head = Number(await client.getBlockNumber({ cacheTime: 0 }));
  if (checkpoint === undefined || watchers.length === 0) {
    if (checkpoint === undefined || head > checkpoint) await advance(chainId, options.holder, head);
    return { ...result, status: checkpoint === undefined ? "started" : "idle" };
  }
  if (head <= checkpoint) return result;

  let from = checkpoint + 1;
  const behind = head - checkpoint;
  if (behind > config.limits.maxCatchupBlocks) {
    from = head - config.limits.maxCatchupBlocks + 1;
    result.skippedBlocks = from - (checkpoint + 1);
    log.warn("watcher skipped blocks beyond max_catchup_blocks", { chainId, from: checkpoint + 1, to: from - 1 });
  }
  const pass = new Pass(chainId, client, watchers);
  result.status = "processed";
  result.from = from;
  for (let start = from; start <= head; start += LOGS_RANGE_BLOCKS) {
    const end = Math.min(head, start + LOGS_RANGE_BLOCKS - 1);
    await pass.process(start, end, result);
    if (!(await advance(chainId, options.holder, end))) {
      log.warn("watcher lost its lease; stopping the pass", { chainId, at: end });
      break;
    }
    result.to = end;
    if (options.deadline !== undefined && now() >= options.deadline) break;
  }
  return result;
}

/** The chain's watch entries, minus expired ones (whose entries go). */
async function liveWatchers(chainId: number, now: number): Promise<WatchEntry[]> {
  const entries = await watchersOf(chainId);
  const live: WatchEntry[] = [];
  for (const entry of entries) {
    if (entry.expiredAt !== undefined && entry.expiredAt <= now) await unwatch(entry.workflowId, entry.since);
    else live.push(entry);
  }
  return live;
}

interface RpcLog {
  address: Hex;
  topics: Hex[];
  data: Hex;
  blockNumber: Hex;
  blockHash: Hex;
  transactionHash: Hex;
  transactionIndex: Hex;
  logIndex: Hex;
  removed?: boolean;
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
}

class Pass {
  private readonly headers = new Map<number, Promise<Header>>();
  private readonly receipts = new Map<string, Promise<{ logIndex: Hex }[]>>();
  /** Entries that stopped firing in this pass (deleted, not runnable). */
  private readonly stopped = new Set<string>();

  constructor(
    private readonly chainId: number,
    private readonly client: PublicClient,
    private readonly watchers: WatchEntry[],
  ) {}

  private header(n: number): Promise<Header> {
    let found = this.headers.get(n);
    if (!found) {
      found = this.client.getBlock({ blockNumber: BigInt(n) }).then((b) => ({ number: n, timestampMs: Number(b.timestamp) * 1000, output: blockStepOutput(b) }));
      this.headers.set(n, found);
    }
    return found;
  }

  /** The log's position inside its transaction (from the receipt, read once per transaction). */
  private async positionInTransaction(entry: RpcLog): Promise<number> {
    let logs = this.receipts.get(entry.transactionHash);
    if (!logs) {
      logs = (this.client.request({ method: "eth_getTransactionReceipt", params: [entry.transactionHash] }) as Promise<{ logs: { logIndex: Hex }[] } | null>).then(
        (r) => r?.logs ?? [],
      );
      this.receipts.set(entry.transactionHash, logs);
    }
    const all = await logs;
    const at = all.findIndex((l) => hexToNumber(l.logIndex) === hexToNumber(entry.logIndex));
    if (at < 0) throw new Error(`log ${entry.logIndex} of ${entry.transactionHash} is not in its receipt`);
    return at;
  }

  async process(from: number, to: number, result: PassResult): Promise<void> {
    const candidates: Candidate[] = [];
    for (const entry of this.watchers) {
      if (entry.trigger.type !== "block") continue;
      const interval = entry.trigger.config.interval;
      for (let n = Math.ceil(from / interval) * interval; n <= to; n += interval) {
        const block = n;
        candidates.push({
          entry,
          block,
          fire: async () => ({ fireId: `${entry.workflowId}:${entry.trigger.id}:block:${block}`, output: (await this.header(block)).output }),
        });
      }
    }
    const events = this.watchers.filter((w) => w.trigger.type === "event");
    if (events.length > 0) candidates.push(...(await this.eventCandidates(events, from, to)));
    candidates.sort((a, b) => a.block - b.block);

    const byWorkflow = new Map<string, Candidate[]>();
    for (const c of candidates) byWorkflow.set(c.entry.workflowId, [...(byWorkflow.get(c.entry.workflowId) ?? []), c]);
    await forEachLimited([...byWorkflow.values()], CLAIM_CONCURRENCY, async (list) => {
      for (const c of list) {
        if (this.stopped.has(c.entry.workflowId)) return;
        await this.tryFire(c, result);
      }
    });
  }

  private async tryFire(c: Candidate, result: PassResult): Promise<void> {
    const { entry } = c;
    const at = (await this.header(c.block)).timestampMs;
    if (at < Math.floor(entry.since / 1000) * 1000) return;
    if (entry.startAt !== undefined && at < entry.startAt) return;
    if (entry.expiredAt !== undefined && at >= entry.expiredAt) return;
    const cooldownMs = entry.trigger.type === "event" ? (entry.trigger.config.cooldownSeconds ?? 0) * 1000 : 0;
    if (cooldownMs > 0 && entry.lastFiredAt !== undefined && at < entry.lastFiredAt + cooldownMs) return;

    const { fireId, output } = await c.fire();
    const outcome = await fireExecution(entry.workflowId, fireId, output);
    if (outcome.kind === "stopped") {
      this.stopped.add(entry.workflowId);
      if (outcome.reason !== "NOT_STARTED") await unwatch(entry.workflowId, entry.since);
      return;
    }
    if (outcome.kind === "duplicate") result.duplicates.push(fireId);
    else result.fired.push({ fireId, workflowId: entry.workflowId, executionId: outcome.executionId });
    if (cooldownMs > 0) {
      entry.lastFiredAt = at;
      await noteFired(entry.workflowId, at);
    }
  }

  /** One eth_getLogs for every event trigger of the chain, matched in memory. */
  private async eventCandidates(watchers: WatchEntry[], from: number, to: number): Promise<Candidate[]> {
    const queries = watchers.flatMap((w) => (w.trigger.type === "event" ? w.trigger.config.queries : []));
    const logs = ((await this.client.request({
      method: "eth_getLogs",
      params: [{ fromBlock: numberToHex(from), toBlock: numberToHex(to), ...mergedFilter(queries) }],
    } as never)) as RpcLog[]).filter((l) => !l.removed);
    logs.sort((a, b) => hexToNumber(a.blockNumber) - hexToNumber(b.blockNumber) || hexToNumber(a.logIndex) - hexToNumber(b.logIndex));

    const candidates: Candidate[] = [];
    for (const entry of watchers) {
      if (entry.trigger.type !== "event") continue;
      const queriesOf = entry.trigger.config.queries;
      const perBlock = new Map<string, number>();
      for (const raw of logs) {
        const block = hexToNumber(raw.blockNumber);
        for (let q = 0; q < queriesOf.length; q++) {
          const query = queriesOf[q]!;
          const decoded = matchLog(query, raw);
          if (!decoded) continue;
          const key = `${q}:${block}`;
          const seen = (perBlock.get(key) ?? 0) + 1;
          perBlock.set(key, seen);
          if (seen > (query.maxEventsPerBlock ?? 100)) continue;
          candidates.push({
            entry,
            block,
            fire: async () => {
              const position = await this.positionInTransaction(raw);
              return {
                fireId: `${entry.workflowId}:${entry.trigger.id}:log:${raw.transactionHash.toLowerCase()}:${position}`,
                output: await this.eventOutput(raw, query, decoded),
              };
            },
          });
          break; // a log fires a workflow once, whichever of its queries matched
        }
      }
    }
    return candidates;
  }

  private async eventOutput(raw: RpcLog, query: EventQuery, decoded: Decoded): Promise<Record<string, unknown>> {
    const block = hexToNumber(raw.blockNumber);
    const data: Record<string, unknown> = {
      address: getAddress(raw.address),
      blockNumber: block,
      blockHash: raw.blockHash,
      transactionHash: raw.transactionHash,
      transactionIndex: hexToNumber(raw.transactionIndex),
      logIndex: hexToNumber(raw.logIndex),
      topics: raw.topics,
      data: raw.data,
      timestamp: (await this.header(block)).timestampMs,
    };
    if (decoded.eventName !== undefined) Object.assign(data, { eventName: decoded.eventName, args: decoded.args });
    if (query.methodCalls?.length) data.methodResults = await methodResults(this.chainId, query, getAddress(raw.address));
    return { data };
  }
}

// ---------------------------------------------------------------------------------------------------------
// Matching

/** The decoded event (empty when the query has no ABI or the log does not decode with it). */
type EventCondition = NonNullable<EventQuery["conditions"]>[number];

interface Decoded {
  eventName?: string;
  args?: Record<string, unknown>;
}

const blank = (t: string | null | undefined): t is null | undefined | "" => t === null || t === undefined || t === "";

/**
 * The superset filter of every query: addresses only when every query names some, and per topic position the
 * values only when every query sets that position (an unrestricted query makes the position a wildcard).
 */
export function mergedFilter(queries: readonly EventQuery[]): { address?: Hex[]; topics?: (Hex[] | null)[] } {
  const filter: { address?: Hex[]; topics?: (Hex[] | null)[] } = {};
  if (queries.every((q) => (q.addresses?.length ?? 0) > 0)) {
    filter.address = [...new Set(queries.flatMap((q) => q.addresses!.map((a) => a.toLowerCase() as Hex)))];
  }
  const topics: (Hex[] | null)[] = [];
  for (let p = 0; p < 4; p++) {
    const restricted = queries.every((q) => !blank(q.topics?.[p]));
    topics.push(restricted ? [...new Set(queries.map((q) => q.topics![p]!.toLowerCase() as Hex))] : null);
  }
  while (topics.length > 0 && topics[topics.length - 1] === null) topics.pop();
  if (topics.length > 0) filter.topics = topics;
  return filter;
}

/** The decoded log when it matches the query (addresses, topics, conditions), else undefined. */
export function matchLog(query: EventQuery, raw: Pick<RpcLog, "address" | "topics" | "data">): Decoded | undefined {
  if ((query.addresses?.length ?? 0) > 0 && !query.addresses!.some((a) => a.toLowerCase() === raw.address.toLowerCase())) return undefined;
  for (let p = 0; p < (query.topics?.length ?? 0); p++) {
    const want = query.topics![p];
    if (!blank(want) && raw.topics[p]?.toLowerCase() !== want.toLowerCase()) return undefined;
  }
  const decoded = decode(query.contractAbi, raw);
  for (const condition of query.conditions ?? []) {
    if (!decoded.args || !holds(condition, decoded, query.contractAbi)) return undefined;
  }
  return decoded;
}

function eventsOf(abi: readonly unknown[] | undefined): AbiEvent[] {
  return (abi ?? []).filter((item): item is AbiEvent => (item as { type?: string }).type === "event");
}

function decode(abi: readonly unknown[] | undefined, raw: Pick<RpcLog, "topics" | "data">): Decoded {
  const events = eventsOf(abi);
  if (events.length === 0 || raw.topics.length === 0) return {};
  try {
    const out = decodeEventLog({ abi: events, data: raw.data, topics: raw.topics as [Hex, ...Hex[]] });
    const event = events.find((e) => e.name === out.eventName && e.inputs.length === (Array.isArray(out.args) ? out.args.length : Object.keys(out.args ?? {}).length)) ??
      events.find((e) => e.name === out.eventName)!;
    const values = out.args as unknown;
    const args = Object.fromEntries(
      event.inputs.map((input, i) => {
        const value = Array.isArray(values) ? values[i] : input.name ? (values as Record<string, unknown>)[input.name] : (values as unknown[])[i];
        return [input.name || `arg${i}`, toJson(input, value)];
      }),
    );
    return { eventName: out.eventName, args };
  } catch {
    return {};
  }
}

/** §8.3.5 EventCondition against the decoded event. */
export function holds(condition: EventCondition, decoded: Decoded, abi: readonly unknown[] | undefined): boolean {
  let field = condition.fieldName;
  const dot = field.indexOf(".");
  if (dot > 0) {
    if (field.slice(0, dot) !== decoded.eventName) return false;
    field = field.slice(dot + 1);
  }
  if (!decoded.args || !(field in decoded.args)) return false;
  const value = decoded.args[field];
  const abiType = eventsOf(abi)
    .find((e) => e.name === decoded.eventName)
    ?.inputs.find((input, i) => (input.name || `arg${i}`) === field)?.type;
  const type = condition.fieldType ?? abiType ?? "string";
  const text = typeof value === "string" ? value : JSON.stringify(value);
  const op = condition.operator;
  if (op === "contains") return type === "address" ? text.toLowerCase().includes(condition.value.toLowerCase()) : text.includes(condition.value);
  if (/^u?int[0-9]*$/.test(type)) {
    let a: bigint, b: bigint;
    try {
      a = BigInt(text);
      b = BigInt(condition.value.trim());
    } catch {
      return false;
    }
    return compare(op, a < b ? -1 : a > b ? 1 : 0);
  }
  if (type === "address") {
    if (op !== "eq" && op !== "ne") return false;
    return (text.toLowerCase() === condition.value.trim().toLowerCase()) === (op === "eq");
  }
  if (type === "bool") {
    if (op !== "eq" && op !== "ne") return false;
    return (text === condition.value.trim()) === (op === "eq");
  }
  return compare(op, text < condition.value ? -1 : text > condition.value ? 1 : 0);
}

function compare(op: EventCondition["operator"], order: number): boolean {
  switch (op) {
    case "eq":
      return order === 0;
    case "ne":
      return order !== 0;
    case "gt":
      return order > 0;
    case "gte":
      return order >= 0;
    case "lt":
      return order < 0;
    case "lte":
      return order <= 0;
    default:
      return false;
  }
}

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

// ---------------------------------------------------------------------------------------------------------
// Firing

export type FireOutcome = { kind: "fired"; executionId: string } | { kind: "duplicate" } | { kind: "stopped"; reason: string };

/**
 * Claims the execution of one automatic fire (its trigger step's `output` given) with `fireId` in the claim's
 * transaction, then publishes it for a runner. A fire already claimed → `duplicate`; a workflow deleted or not
 * runnable → `stopped` with the reason (WORKFLOW_NOT_FOUND or the §8.8.7 reason).
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

async function forEachLimited<T>(items: readonly T[], limit: number, run: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await run(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

// ---------------------------------------------------------------------------------------------------------
// The polling loop (AWS: one invocation a minute; locally: for as long as `npm start` runs)

export interface LoopOptions {
  holder?: string;
  /** Pause between passes (default: half the fastest configured block time, 500 ms to 5 s). */
  pollMs?: number;
  /** Stop at this instant (ms); without it, until `stop()`. */
  until?: number;
}

/** Passes over every configured chain until `until` or `stop()`; leases are released at the end. */
export function startWatching(options: LoopOptions = {}): { stop: () => Promise<void>; done: Promise<void> } {
  const holder = options.holder ?? `watcher-${ulid()}`;
  const { config, now } = useRuntime();
  const fastest = Math.min(...config.chains.map((c) => (c.blockTimeSeconds ?? 12) * 1000), 10_000);
  const pollMs = options.pollMs ?? Math.min(5_000, Math.max(500, fastest / 2));
  let stopping = false;
  let wake: (() => void) | undefined;
  const done = (async () => {
    while (!stopping && (options.until === undefined || now() < options.until)) {
      await Promise.all(
        config.chains.map((c) =>
          watchChain(c.chainId, { holder, ...(options.until !== undefined ? { deadline: options.until } : {}) }).catch((err) =>
            log.warn("watcher pass failed", { chainId: c.chainId, error: (err as Error).message }),
          ),
        ),
      );
      const left = options.until === undefined ? pollMs : Math.min(pollMs, options.until - now());
      if (left > 0 && !stopping) await new Promise<void>((resolve) => ((wake = resolve), setTimeout(resolve, left).unref?.()));
    }
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
