/**
 * Matching logs against event queries (API.md §8.3.5): addresses, topics with wildcards, ABI-decoded conditions.
 *
 * `matchLog` checks one query against one log. The watcher does not call it per (log, query) pair: each request
 * group indexes its queries by (address, topics[0]) (`GroupIndex`), so a log is only checked against the queries
 * that name its contract and event (or leave them open), and `matchLogs` walks a response in slices that give the
 * event loop back every few milliseconds, so a block of 10,000 matching logs never holds up request handling.
 */
import { decodeEventLog, type AbiEvent, type Hex } from "viem";
import { toJson } from "../kinds/support/abi";
import type { EventQuery } from "../kinds/support/event-query";

export type EventCondition = NonNullable<EventQuery["conditions"]>[number];

/** The decoded event (empty when the query has no ABI or the log does not decode with it). */
export interface Decoded {
  eventName?: string;
  args?: Record<string, unknown>;
}

export interface RpcLog {
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

/** A log of a response with its numbers read once, and its decodings by ABI (see `Prepared.abiId`). */
export interface Log {
  raw: RpcLog;
  block: number;
  index: number;
  address: string;
  topic0: string;
  decoded?: Map<number, Decoded>;
}

const blank = (t: string | null | undefined): t is null | undefined | "" => t === null || t === undefined || t === "";

/**
 * The superset filter of every query: addresses only when every query names some, and per topic position the
 * values only when every query sets that position (an unrestricted query makes the position a wildcard). Kept for
 * tools and benchmarks: the watcher itself never merges queries this way (see plan.ts).
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

function decode(abi: readonly unknown[] | undefined, raw: Pick<RpcLog, "topics" | "data">, events = eventsOf(abi)): Decoded {
  if (events.length === 0 || raw.topics.length === 0) return {};
  try {
    const out = decodeEventLog({ abi: events, data: raw.data, topics: raw.topics as [Hex, ...Hex[]] });
    const event =
      events.find(
        (e) =>
          e.name === out.eventName && e.inputs.length === (Array.isArray(out.args) ? out.args.length : Object.keys(out.args ?? {}).length),
      ) ?? events.find((e) => e.name === out.eventName)!;
    const values = out.args as unknown;
    const args = Object.fromEntries(
      event.inputs.map((input, i) => {
        const value = Array.isArray(values)
          ? values[i]
          : input.name
            ? (values as Record<string, unknown>)[input.name]
            : (values as unknown[])[i];
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
  if (op === "contains")
    return type === "address" ? text.toLowerCase().includes(condition.value.toLowerCase()) : text.includes(condition.value);
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

// ---------------------------------------------------------------------------------------------------------
// Prepared queries and the per-group index

/** A query read once: addresses and topics lower-case, its ABI's events, an id shared by equal ABIs. */
export interface Prepared {
  query: EventQuery;
  /** Lower-case; undefined: any contract. */
  addresses?: string[];
  /** Four positions, lower-case, null where any value matches. */
  topics: (string | null)[];
  events: AbiEvent[];
  /** Equal ABIs share an id, so a log is decoded once per ABI, not once per query (-1: no events). */
  abiId: number;
}

const abiIds = new Map<string, number>();

export function prepare(query: EventQuery): Prepared {
  const events = eventsOf(query.contractAbi);
  let abiId = -1;
  if (events.length > 0) {
    const text = JSON.stringify(events);
    abiId = abiIds.get(text) ?? abiIds.size;
    if (!abiIds.has(text)) abiIds.set(text, abiId);
  }
  const addresses = (query.addresses?.length ?? 0) > 0 ? [...new Set(query.addresses!.map((a) => a.toLowerCase()))] : undefined;
  const topics = [0, 1, 2, 3].map((p) => {
    const t = query.topics?.[p];
    return blank(t) ? null : t.toLowerCase();
  });
  return { query, ...(addresses ? { addresses } : {}), topics, events, abiId };
}

/** Topics after the first (the index has checked address and topics[0]), the ABI decoding and the conditions. */
export function matchPrepared(p: Prepared, log: Log): Decoded | undefined {
  for (let i = 1; i < 4; i++) {
    const want = p.topics[i];
    if (want !== null && log.raw.topics[i]?.toLowerCase() !== want) return undefined;
  }
  if (p.topics[0] !== null && log.topic0 !== p.topics[0]) return undefined;
  if (p.addresses && log.address !== undefined && !p.addresses.includes(log.address)) return undefined;
  let decoded: Decoded = {};
  if (p.abiId >= 0) {
    log.decoded ??= new Map();
    let known = log.decoded.get(p.abiId);
    if (!known) {
      known = decode(undefined, log.raw, p.events);
      log.decoded.set(p.abiId, known);
    }
    decoded = known;
  }
  for (const condition of p.query.conditions ?? []) {
    if (!decoded.args || !holds(condition, decoded, p.query.contractAbi)) return undefined;
  }
  return decoded;
}

/** Items indexed by (address or "" for any, topics[0] or "" for any). */
export class GroupIndex<T> {
  private readonly byAddress = new Map<string, Map<string, T[]>>();

  add(addresses: readonly string[] | undefined, topic0: string | null, item: T): void {
    for (const address of addresses ?? [""]) {
      let byTopic = this.byAddress.get(address);
      if (!byTopic) this.byAddress.set(address, (byTopic = new Map()));
      const key = topic0 ?? "";
      const list = byTopic.get(key);
      if (list) list.push(item);
      else byTopic.set(key, [item]);
    }
  }

  /** Everything that may match a log of `address` with `topic0` (both lower-case). */
  lookup(address: string, topic0: string): T[] {
    const out: T[] = [];
    for (const a of [address, ""]) {
      const byTopic = this.byAddress.get(a);
      if (!byTopic) continue;
      for (const t of topic0 === "" ? [""] : [topic0, ""]) {
        const list = byTopic.get(t);
        if (list) for (const item of list) out.push(item);
      }
    }
    return out;
  }
}

/** Gives the event loop back (timers, sockets, other requests) before going on. */
export const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Work at most this long between two yields while reading or matching a response. */
export const SLICE_MS = 8;

/**
 * Reads a response's logs (numbers parsed once, removed logs dropped) in log order, yielding every SLICE_MS.
 */
export async function readLogs(raw: readonly RpcLog[]): Promise<Log[]> {
  const logs: Log[] = [];
  let began = performance.now();
  for (let i = 0; i < raw.length; i++) {
    const r = raw[i]!;
    if (!r.removed) {
      logs.push({
        raw: r,
        block: parseInt(r.blockNumber, 16),
        index: parseInt(r.logIndex, 16),
        address: r.address.toLowerCase(),
        topic0: (r.topics[0] ?? "").toLowerCase(),
      });
    }
    if ((i & 255) === 255 && performance.now() - began > SLICE_MS) {
      await yieldToLoop();
      began = performance.now();
    }
  }
  logs.sort((a, b) => a.block - b.block || a.index - b.index);
  return logs;
}
