/**
 * Request groups (API.md §18.4): how the event queries watching a chain are asked of it, in bounded `eth_getLogs`.
 *
 * - A group carries the queries of ONE owner, so one owner's request failing, or answering slowly or hugely,
 *   concerns only that owner's workflows, and owners can be served in turn (watcher.ts).
 * - A group's filter names at most `maxAddresses` addresses (1,000) and, per topic position, at most `maxTopicValues`
 *   values (10); a position is a wildcard only where every query of the group leaves it open. Queries are grouped
 *   by shape (with or without addresses, and which topic positions they set), so a query without addresses never
 *   shares a request with a query that has some: it cannot widen another query's request.
 * - Within a shape, queries are sorted by their topics and packed in order (next fit): queries asking for the same
 *   event of many contracts share requests up to the address bound.
 * - A query naming more addresses than the bound (when a provider's limit lowers it below 100) is cut into parts,
 *   each a member of its own.
 *
 * Each member is one (workflow, query[, part]); its progress (the last block done for it) is kept by the watcher.
 * A group's key names its owner, shape and members, so the same members make the same key whatever else changes.
 */
import { createHash } from "node:crypto";
import type { Hex } from "viem";
import { GroupIndex, prepare, yieldToLoop, type Prepared } from "./match";
import type { WatchEntry } from "../workflow/watch-registry";

export interface Member {
  /** `<workflowId>:<query index>` (`:<part>` when the query was cut into parts). */
  key: string;
  entry: WatchEntry;
  q: number;
  prepared: Prepared;
  /** The addresses this member asks for: the query's, or its part of them; undefined: any contract. */
  addresses?: string[];
  group?: RequestGroup;
}

export interface Filter {
  address?: Hex[];
  topics?: (Hex[] | null)[];
}

export interface RequestGroup {
  key: string;
  owner: string;
  members: Member[];
  filter: Filter;
  addressCount: number;
  /** Built on the first answer that has logs. */
  index?: GroupIndex<Member>;
}

export interface OwnerPlan {
  owner: string;
  signature: string;
  groups: RequestGroup[];
  /** Event members of each workflow, in query order. */
  members: Map<string, Member[]>;
}

export interface PlanLimits {
  maxAddresses: number;
  maxTopicValues: number;
}

/** The owner a watch entry is served as: its owner, or "" for entries that do not name one (tools, old entries). */
export const ownerOf = (entry: WatchEntry): string => entry.owner ?? "";

/** Prepared queries by `<workflowId>:<since>`: a trigger never changes, so each is read once. */
export type PreparedCache = Map<string, Prepared[]>;

function preparedOf(entry: WatchEntry, cache: PreparedCache): Prepared[] {
  const key = `${entry.workflowId}:${entry.since}`;
  let found = cache.get(key);
  if (!found) {
    found = entry.trigger.type === "event" ? entry.trigger.config.queries.map(prepare) : [];
    cache.set(key, found);
  }
  return found;
}

/** Everything the plan of one owner depends on, as a string. */
export function ownerSignature(entries: readonly WatchEntry[], limits: PlanLimits, split: ReadonlySet<string>): string {
  const parts = entries.filter((e) => e.trigger.type === "event").map((e) => `${e.workflowId}:${e.since}`);
  parts.sort();
  return `${limits.maxAddresses}/${limits.maxTopicValues}/${split.size}|${parts.join(",")}`;
}

const hash = (text: string) => createHash("sha256").update(text).digest("base64url").slice(0, 16);

interface Bin {
  shape: string;
  members: Member[];
  addresses: Set<string>;
  topics: Set<string>[];
}

/**
 * Packs one owner's event queries into request groups. `split`: keys of groups a provider refused even for one
 * block (too many results): each is cut into two halves of its members (again while a half's key is listed).
 * Yields to the event loop between slices (an owner may name a million addresses).
 */
export async function planOwner(
  owner: string,
  entries: readonly WatchEntry[],
  limits: PlanLimits,
  split: ReadonlySet<string>,
  cache: PreparedCache,
): Promise<OwnerPlan> {
  const members = new Map<string, Member[]>();
  const byShape = new Map<string, Member[]>();
  let began = performance.now();
  const pause = async () => {
    if (performance.now() - began > 8) {
      await yieldToLoop();
      began = performance.now();
    }
  };
  const sorted = [...entries]
    .filter((e) => e.trigger.type === "event")
    .sort((a, b) => (a.workflowId < b.workflowId ? -1 : a.workflowId > b.workflowId ? 1 : 0));
  for (const entry of sorted) {
    const list: Member[] = [];
    preparedOf(entry, cache).forEach((prepared, q) => {
      const shape = (prepared.addresses ? "a" : "t") + prepared.topics.map((t) => (t === null ? "-" : "x")).join("");
      const chunks: (string[] | undefined)[] = [];
      if (!prepared.addresses || prepared.addresses.length <= limits.maxAddresses) chunks.push(prepared.addresses);
      else
        for (let at = 0; at < prepared.addresses.length; at += limits.maxAddresses)
          chunks.push(prepared.addresses.slice(at, at + limits.maxAddresses));
      chunks.forEach((addresses, part) => {
        const member: Member = {
          key: chunks.length > 1 ? `${entry.workflowId}:${q}:${part}` : `${entry.workflowId}:${q}`,
          entry,
          q,
          prepared,
          ...(addresses ? { addresses } : {}),
        };
        list.push(member);
        const same = byShape.get(shape);
        if (same) same.push(member);
        else byShape.set(shape, [member]);
      });
    });
    members.set(entry.workflowId, list);
    await pause();
  }

  const groups: RequestGroup[] = [];
  for (const [shape, list] of byShape) {
    const topicKey = (m: Member) => m.prepared.topics.join("|");
    const keyed = list.map((m) => ({ m, t: topicKey(m) }));
    keyed.sort((a, b) => (a.t < b.t ? -1 : a.t > b.t ? 1 : 0));
    let bin: Bin | undefined;
    const close = () => {
      if (bin && bin.members.length > 0) groups.push(...cut(owner, bin, split));
      bin = undefined;
    };
    for (const { m } of keyed) {
      if (bin && !fits(bin, m, limits)) close();
      bin ??= { shape, members: [], addresses: new Set(), topics: [new Set(), new Set(), new Set(), new Set()] };
      bin.members.push(m);
      for (const a of m.addresses ?? []) bin.addresses.add(a);
      m.prepared.topics.forEach((t, p) => t !== null && bin!.topics[p]!.add(t));
      await pause();
    }
    close();
  }
  return { owner, signature: "", groups, members };
}

function fits(bin: Bin, m: Member, limits: PlanLimits): boolean {
  if (bin.members.length === 0) return true;
  let more = 0;
  for (const a of m.addresses ?? []) if (!bin.addresses.has(a)) more++;
  if (bin.addresses.size + more > limits.maxAddresses) return false;
  return m.prepared.topics.every((t, p) => t === null || bin.topics[p]!.has(t) || bin.topics[p]!.size < limits.maxTopicValues);
}

/** The bin as one group, or cut in halves while its key is in `split`. */
function cut(owner: string, bin: Bin, split: ReadonlySet<string>): RequestGroup[] {
  const group = toGroup(owner, bin.shape, bin.members);
  if (!split.has(group.key) || bin.members.length < 2) return [group];
  const half = Math.ceil(bin.members.length / 2);
  const halves = [bin.members.slice(0, half), bin.members.slice(half)];
  return halves.flatMap((members) => {
    const addresses = new Set<string>();
    const topics = [new Set<string>(), new Set<string>(), new Set<string>(), new Set<string>()];
    for (const m of members) {
      for (const a of m.addresses ?? []) addresses.add(a);
      m.prepared.topics.forEach((t, p) => t !== null && topics[p]!.add(t));
    }
    return cut(owner, { shape: bin.shape, members, addresses, topics }, split);
  });
}

function toGroup(owner: string, shape: string, members: Member[]): RequestGroup {
  const addressed = shape.startsWith("a");
  const addresses = new Set<string>();
  const topics: Set<string>[] = [new Set(), new Set(), new Set(), new Set()];
  for (const m of members) {
    for (const a of m.addresses ?? []) addresses.add(a);
    m.prepared.topics.forEach((t, p) => t !== null && topics[p]!.add(t));
  }
  const filter: Filter = {};
  if (addressed) filter.address = [...addresses] as Hex[];
  const positions: (Hex[] | null)[] = topics.map((set, p) => (shape[p + 1] === "x" ? ([...set] as Hex[]) : null));
  while (positions.length > 0 && positions[positions.length - 1] === null) positions.pop();
  if (positions.length > 0) filter.topics = positions;
  const key = `${owner}|${shape}|${hash(members.map((m) => m.key).join(","))}`;
  const group: RequestGroup = { key, owner, members, filter, addressCount: addresses.size };
  for (const m of members) m.group = group;
  return group;
}

/** The group's (address, topics[0]) index of its members, built once. */
export function indexOf(group: RequestGroup): GroupIndex<Member> {
  if (!group.index) {
    const index = new GroupIndex<Member>();
    for (const m of group.members) index.add(m.addresses, m.prepared.topics[0] ?? null, m);
    group.index = index;
  }
  return group.index;
}
