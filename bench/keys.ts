/**
 * Keys and write cost (issue 28 item 2): `npm run bench:keys` (BENCH_ONLY=keys), called from bench/run.ts with its
 * server and runtime. Every DynamoDB request of the load bench's workload (bench/load.ts: a manual trigger and one
 * customCode node, runs in this process) is recorded through a recording document client, with the item images
 * before and after each write (strongly consistent reads of the raw client, not recorded), and priced as DynamoDB
 * prices it:
 *
 *   table write      max(before, after) item size, 1 WRU per KB rounded up (a delete: the item deleted); ×2 inside
 *                    TransactWriteItems (a ConditionCheck too); a failed condition still costs the item's size
 *   index write      per GSI, from the item's key attributes before and after: an entry added or removed is one
 *                    write of its projected size; a changed index key is a delete plus a put; an unchanged key is
 *                    one write only when a projected attribute changed (ALL: any attribute); projected size =
 *                    projected attributes + table and index keys + 100 bytes
 *   read             1 RRU per 4 KB of items read, rounded up per item (GetItem, BatchGetItem) or per request
 *                    (Query, over the items answered); eventually consistent reads half
 *
 * It prints
 *   per warm run     WRU and RRU of one asynchronous one-node run (trigger to its last write; the rate limiter's
 *                    write apart), with a 1 KB script and with a 60 KB one, each write listed (goal ≤ 8 WRU, and
 *                    the 60 KB script no dearer)
 *   hot keys         BENCH_KEYS_N runs (default 200) over BENCH_KEYS_OWNERS owners (default 10, one workflow each),
 *                    BENCH_KEYS_C at a time (default 10): the top partition keys' share of writes on the table and
 *                    each GSI, and the writes/s each would take at 1,000 executions/s spread over 10,000 owners (a
 *                    key naming an execution: its writes within that execution, taken as one second; naming an owner
 *                    or workflow: its writes per run × 0.1/s; any other key is the whole stage's: writes per run
 *                    × 1,000/s) (goal: none above 1,000 writes/s)
 */
import { DescribeTableCommand } from "@aws-sdk/client-dynamodb";
import { GetCommand } from "@aws-sdk/lib-dynamodb";
import { currentBus, setBus } from "../shared/execution/bus/install";
import { createInProcessBus } from "../shared/execution/bus/in-process";
import { withRunner } from "../shared/execution/runner";
import { createOneNodeWorkflow, newOwner, type BenchContext, type Owner } from "./workflows";
import { setRuntime, type Runtime } from "../shared/current-runtime";

const WRU_GOAL = 8;
const KEY_GOAL = 1_000;
const STAGE_RATE = 1_000;
const OWNERS_AT_SCALE = 10_000;
const WRU_PRICE = 0.625; // $ per million, on-demand, us-east-1
const RRU_PRICE = 0.125;

type Item = Record<string, unknown>;
interface Projection {
  type: "ALL" | "KEYS_ONLY" | "INCLUDE";
  include: string[];
}
/** One priced write of one item: where it landed (table or an index), its partition key, its units. */
interface Write {
  target: string;
  pk: string;
  wru: number;
  what: string;
}
interface Recording {
  writes: Write[];
  rru: number;
  requests: string[];
  /** Bytes of the items BatchGetItem answered (a keys-only index's page read by key). */
  byKeyBytes: number;
}

export async function benchKeys(ctx: BenchContext): Promise<void> {
  const n = Number(process.env.BENCH_KEYS_N ?? 200);
  const c = Number(process.env.BENCH_KEYS_C ?? 10);
  const ownerCount = Number(process.env.BENCH_KEYS_OWNERS ?? 10);
  const previousBus = currentBus();
  const bus = setBus(withRunner(createInProcessBus()));
  try {
    const indexes = await projections(ctx.runtime);
    const owners: Owner[] = [];
    for (let i = 0; i < ownerCount; i++) owners.push(await newOwner(ctx.base, String(2800 + i)));
    const small = await createScriptWorkflow(ctx.base, owners[0]!, 1_024);
    const large = await createScriptWorkflow(ctx.base, owners[0]!, 60 * 1_024);
    const workflows = [small];
    for (const who of owners.slice(1)) workflows.push(await createScriptWorkflow(ctx.base, who, 1_024));
    const trigger = (i: number) => triggerOnce(ctx.base, owners[i % owners.length]!, workflows[i % workflows.length]!);

    // 1. One warm run, 1 KB and 60 KB scripts: the median of 5 recorded runs each.
    const perRun = async (workflowId: string, data?: unknown) => {
      for (let i = 0; i < 3; i++) await triggerOnce(ctx.base, owners[0]!, workflowId, data).then(() => bus.idle());
      const runs: Recording[] = [];
      for (let i = 0; i < 5; i++)
        runs.push(
          await recording(ctx.runtime, indexes, async () => {
            await triggerOnce(ctx.base, owners[0]!, workflowId, data);
            await bus.idle();
          }),
        );
      return runs.sort((a, b) => runWru(a) - runWru(b))[2]!;
    };
    const one = await perRun(small);
    const sixty = await perRun(large);
    const withInput = await perRun(small, { blob: "x".repeat(10 * 1_024) });

    // 2. The load: n runs over the owners' workflows, c at a time.
    const ids = new Set<string>();
    let next = 0;
    const load = await recording(ctx.runtime, indexes, async () => {
      await Promise.all(
        Array.from({ length: c }, async () => {
          while (next < n) {
            const id = await trigger(next++);
            if (id) ids.add(id);
          }
        }),
      );
      await bus.idle();
    });

    // 3. Reading lists: a page of an owner's executions and of its workflows (gsi1 keys, then the items by key).
    const listRead = (path: string) =>
      recording(ctx.runtime, indexes, async () => {
        const res = await fetch(`${ctx.base}${path}`, { headers: owners[0]!.headers });
        if (res.status !== 200) throw new Error(`${path} answered ${res.status}`);
        await res.arrayBuffer();
      });
    const lists = [
      ["GET /executions?limit=20", await listRead("/executions?limit=20")],
      ["GET /workflows?limit=20", await listRead("/workflows?limit=20")],
    ] as const;

    const lines = [
      `keys and write cost (GSI projections: ${[...indexes].map(([name, p]) => `${name} ${p.type}${p.include.length ? `(${p.include.join(",")})` : ""}`).join(", ")}):`,
      ...describeRun("warm one-node run, 1 KB script", one),
      ...describeRun("warm one-node run, 60 KB script", sixty),
      ...describeRun("warm one-node run, 1 KB script, 10 KB of manual data", withInput, false),
      `  a 60 KB script costs ${(runWru(sixty) / runWru(one)).toFixed(2)}x a 1 KB one per run (goal 1x: ${runWru(sixty) <= runWru(one) ? "met" : "NOT met"})`,
      `  cost per 1M executions (1 KB script, on-demand us-east-1 $${WRU_PRICE}/M WRU, $${RRU_PRICE}/M RRU, rate limiter included): ` +
        `${(runWru(one) + limiterWru(one)).toFixed(1)} WRU + ${one.rru.toFixed(1)} RRU per run = ` +
        `$${(((runWru(one) + limiterWru(one)) * WRU_PRICE + one.rru * RRU_PRICE) / 1).toFixed(2)}`,
      ...lists.map(
        ([what, r]) =>
          `  ${what}: ${r.rru.toFixed(1)} RRU, ${r.requests.length} requests (${r.requests.join(", ")}); the same items from an index holding every attribute: ~${(Math.max(1, Math.ceil(r.byKeyBytes / 4096)) * 0.5).toFixed(1)} RRU`,
      ),
      ...hotKeys(load, n, ids, owners, [...workflows, large]),
    ];
    console.log(lines.join("\n"));
  } finally {
    setRuntime(ctx.runtime);
    if (previousBus) setBus(previousBus);
  }
}

/** The table's GSIs and what each projects (DynamoDB Local answers as AWS would). */
async function projections(runtime: Runtime): Promise<Map<string, Projection>> {
  const { Table } = await runtime.db.send(new DescribeTableCommand({ TableName: runtime.config.tableName }));
  return new Map(
    (Table?.GlobalSecondaryIndexes ?? []).map((g) => [
      g.IndexName!,
      { type: g.Projection!.ProjectionType as Projection["type"], include: g.Projection!.NonKeyAttributes ?? [] },
    ]),
  );
}

/** A workflow of `who`'s wallet whose one customCode node's source is `bytes` long (a comment pads it). */
const createScriptWorkflow = (base: string, who: Owner, bytes: number): Promise<string> =>
  createOneNodeWorkflow(base, who, `return 1 // ${"x".repeat(Math.max(0, bytes - 14))}`);

async function triggerOnce(base: string, who: Owner, workflowId: string, data?: unknown): Promise<string | undefined> {
  const res = await fetch(`${base}/workflows/${workflowId}:trigger`, {
    method: "POST",
    headers: who.headers,
    body: JSON.stringify(data === undefined ? { triggerType: "manual" } : { triggerType: "manual", triggerOutput: { data } }),
  });
  const body = (await res.json()) as { executionId?: string };
  if (res.status !== 202) throw new Error(`:trigger answered ${res.status} ${JSON.stringify(body)}`);
  return body.executionId;
}

// ---------------------------------------------------------------------------------------------------------
// Recording

/** Runs `work` with a recording client installed: every request it sends, priced. */
async function recording(runtime: Runtime, indexes: Map<string, Projection>, work: () => Promise<void>): Promise<Recording> {
  const rec: Recording = { writes: [], rru: 0, requests: [], byKeyBytes: 0 };
  const db = runtime.db;
  const image = async (key: Item) =>
    (await db.send(new GetCommand({ TableName: runtime.config.tableName, Key: { pk: key.pk, sk: key.sk }, ConsistentRead: true }))).Item;
  const send = async (command: { constructor: { name: string }; input: Item }) => {
    const kind = command.constructor.name.replace(/Command$/, "");
    rec.requests.push(kind);
    const writes = writtenItems(kind, command.input);
    if (writes.length === 0) {
      const out = (await db.send(command as never)) as Item;
      rec.rru += readUnits(kind, command.input, out);
      if (kind === "BatchGet")
        rec.byKeyBytes += Object.values((out.Responses ?? {}) as Record<string, Item[]>)
          .flat()
          .reduce((a, i) => a + itemSize(i), 0);
      return out;
    }
    return withLocks(
      writes.map((w) => `${String(w.key.pk)}\u0000${String(w.key.sk)}`),
      async () => {
        const before = await Promise.all(writes.map((w) => image(w.key)));
        let failed = false;
        try {
          return await db.send(command as never);
        } catch (err) {
          failed = true;
          throw err;
        } finally {
          const after = await Promise.all(writes.map((w) => image(w.key)));
          writes.forEach((w, i) => rec.writes.push(...price(w, before[i], after[i], kind === "TransactWrite", failed, indexes)));
        }
      },
    );
  };
  setRuntime({ ...runtime, db: { send } as unknown as Runtime["db"] });
  try {
    await work();
  } finally {
    setRuntime(runtime);
  }
  return rec;
}

interface WrittenItem {
  key: Item;
  action: "Put" | "Update" | "Delete" | "ConditionCheck";
}

/** The items a write request names, with what it does to each. */
function writtenItems(kind: string, input: Item): WrittenItem[] {
  const keyOf = (o: Item) => (o.Key ?? { pk: (o.Item as Item).pk, sk: (o.Item as Item).sk }) as Item;
  if (kind === "Put" || kind === "Update" || kind === "Delete") return [{ key: keyOf(input), action: kind }];
  if (kind === "TransactWrite")
    return (input.TransactItems as Item[]).map((t) => {
      const [action, body] = Object.entries(t)[0]!;
      return { key: keyOf(body as Item), action: action as WrittenItem["action"] };
    });
  if (kind === "BatchWrite")
    return Object.values(input.RequestItems as Record<string, Item[]>)
      .flat()
      .map((r) =>
        r.PutRequest
          ? { key: keyOf(r.PutRequest as Item), action: "Put" }
          : { key: (r.DeleteRequest as Item).Key as Item, action: "Delete" },
      );
  return [];
}

/** The table's and each index's writes of one item, as DynamoDB bills them. */
function price(
  w: WrittenItem,
  before: Item | undefined,
  after: Item | undefined,
  transaction: boolean,
  failed: boolean,
  indexes: Map<string, Projection>,
): Write[] {
  const pk = String(w.key.pk);
  const what = `${w.action} ${String(w.key.pk)} ${String(w.key.sk)}`;
  const size = Math.max(before ? itemSize(before) : 0, w.action === "Delete" || failed ? 0 : after ? itemSize(after) : 0);
  const out: Write[] = [{ target: "table", pk, wru: Math.max(1, Math.ceil(size / 1024)) * (transaction ? 2 : 1), what }];
  if (failed || w.action === "ConditionCheck") return out;
  for (const [name, projection] of indexes) {
    const entry = (item: Item | undefined) =>
      item && typeof item[`${name}pk`] === "string" && typeof item[`${name}sk`] === "string"
        ? projected(item, name, projection)
        : undefined;
    const [old, now] = [entry(before), entry(after)];
    const add = (e: Item, verb: string) =>
      out.push({ target: name, pk: String(e[`${name}pk`]), wru: Math.ceil((itemSize(e) + 100) / 1024), what: `${verb} ${what}` });
    if (old && now && (old[`${name}pk`] !== now[`${name}pk`] || old[`${name}sk`] !== now[`${name}sk`])) {
      add(old, "index delete,");
      add(now, "index put,");
    } else if (old && now) {
      if (JSON.stringify(sorted(old)) !== JSON.stringify(sorted(now))) add(itemSize(now) >= itemSize(old) ? now : old, "index update,");
    } else if (old) add(old, "index delete,");
    else if (now) add(now, "index put,");
  }
  return out;
}

function projected(item: Item, index: string, projection: Projection): Item {
  if (projection.type === "ALL") return item;
  const keep = new Set(["pk", "sk", `${index}pk`, `${index}sk`, ...(projection.type === "INCLUDE" ? projection.include : [])]);
  return Object.fromEntries(Object.entries(item).filter(([k]) => keep.has(k)));
}

const sorted = (item: Item) => Object.fromEntries(Object.entries(item).sort(([a], [b]) => a.localeCompare(b)));

/** RRU of a read request from what it answered. */
function readUnits(kind: string, input: Item, out: Item): number {
  const half = (consistent: unknown) => (consistent === true ? 1 : 0.5);
  const units = (bytes: number) => Math.max(1, Math.ceil(bytes / 4096));
  if (kind === "Get") return units(out.Item ? itemSize(out.Item as Item) : 0) * half(input.ConsistentRead);
  if (kind === "Query")
    return units(((out.Items as Item[] | undefined) ?? []).reduce((a, i) => a + itemSize(i), 0)) * half(input.ConsistentRead);
  if (kind === "BatchGet") {
    const requested = Object.values(input.RequestItems as Record<string, Item>)[0] as Item;
    const items = Object.values((out.Responses ?? {}) as Record<string, Item[]>).flat();
    return items.reduce((a, i) => a + units(itemSize(i)), 0) * half(requested.ConsistentRead);
  }
  return 0;
}

/** An item's size as DynamoDB counts it: attribute names plus values (numbers about half their digits). */
function itemSize(item: Item): number {
  return Object.entries(item).reduce((a, [name, value]) => a + utf8(name) + valueSize(value), 0);
}

function valueSize(value: unknown): number {
  if (typeof value === "string") return utf8(value);
  if (typeof value === "number" || typeof value === "bigint") return Math.ceil(String(value).replace(/[-.]/g, "").length / 2) + 1;
  if (typeof value === "boolean" || value === null || value === undefined) return 1;
  if (value instanceof Uint8Array) return value.byteLength;
  if (value instanceof Set) return [...value].reduce((a: number, v) => a + valueSize(v), 0);
  if (Array.isArray(value)) return 3 + value.reduce((a: number, v) => a + 1 + valueSize(v), 0);
  if (typeof value === "object") return 3 + Object.entries(value).reduce((a, [k, v]) => a + 1 + utf8(k) + valueSize(v), 0);
  return 0;
}

const utf8 = (s: string) => Buffer.byteLength(s, "utf8");

/** Per-key locks taken in one order, so an item's before and after images are read around its write alone. */
const locks = new Map<string, Promise<void>>();
async function withLocks<T>(keys: string[], fn: () => Promise<T>): Promise<T> {
  const releases: (() => void)[] = [];
  for (const key of [...new Set(keys)].sort()) {
    const previous = locks.get(key) ?? Promise.resolve();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const tail = previous.then(() => gate);
    locks.set(key, tail);
    await previous;
    releases.push(() => {
      release();
      if (locks.get(key) === tail) locks.delete(key);
    });
  }
  try {
    return await fn();
  } finally {
    for (const release of releases) release();
  }
}

// ---------------------------------------------------------------------------------------------------------
// Reports

const isLimiter = (w: Write) => w.pk.startsWith("RATE#");
const runWru = (r: Recording) => r.writes.filter((w) => !isLimiter(w)).reduce((a, w) => a + w.wru, 0);
const limiterWru = (r: Recording) => r.writes.filter(isLimiter).reduce((a, w) => a + w.wru, 0);

/** `goal`: whether the ≤ WRU_GOAL goal (a warm one-node run's, issue 28) applies to this run. */
function describeRun(name: string, r: Recording, goal = true): string[] {
  const wru = runWru(r);
  const byTarget = (target: string) => r.writes.filter((w) => w.target === target && !isLimiter(w)).reduce((a, w) => a + w.wru, 0);
  const targets = [...new Set(r.writes.map((w) => w.target))];
  return [
    `  ${name}: ${wru} WRU (${targets.map((t) => `${t} ${byTarget(t)}`).join(", ")}${goal ? `; goal ≤ ${WRU_GOAL}: ${wru <= WRU_GOAL ? "met" : "NOT met"}` : ""}), ` +
      `+${limiterWru(r)} WRU the rate limiter; ${r.rru.toFixed(1)} RRU; ${r.requests.length} requests (${r.requests.join(", ")})`,
    ...r.writes
      .filter((w) => !isLimiter(w))
      .map((w) => `    ${String(w.wru).padStart(3)} WRU ${w.target.padEnd(5)} ${w.what.replace(/[0-9A-HJKMNP-TV-Z]{26}/g, "<id>")}`),
  ];
}

/** The top partition keys of the table and each index under the load, and their writes/s at scale. */
function hotKeys(r: Recording, runs: number, executionIds: Set<string>, owners: Owner[], workflows: string[]): string[] {
  const ownerKeys = [...owners.map((o) => o.address.toLowerCase()), ...workflows];
  const scope = (pk: string) => {
    if ([...executionIds].some((id) => pk.includes(id))) return "execution";
    if (ownerKeys.some((k) => pk.toLowerCase().includes(k.toLowerCase()))) return "owner";
    return "stage";
  };
  const perRun = (count: number) => count / runs;
  const atScale = (pk: string, count: number) => {
    const s = scope(pk);
    if (s === "execution") return count;
    if (s === "owner") return perRun(count) * owners.length * (STAGE_RATE / OWNERS_AT_SCALE);
    return perRun(count) * STAGE_RATE;
  };
  const lines = [
    `  hot keys: ${runs} runs over ${owners.length} owners (writes, share, writes/s at ${STAGE_RATE} executions/s over ${OWNERS_AT_SCALE} owners):`,
  ];
  let hottest = 0;
  for (const target of [...new Set(r.writes.map((w) => w.target))]) {
    const counts = new Map<string, number>();
    for (const w of r.writes.filter((x) => x.target === target)) counts.set(w.pk, (counts.get(w.pk) ?? 0) + 1);
    const total = [...counts.values()].reduce((a, b) => a + b, 0);
    const ranked = [...counts]
      .map(([pk, count]) => ({ pk, count, rate: atScale(pk, count) }))
      .sort((a, b) => b.rate - a.rate || b.count - a.count);
    hottest = Math.max(hottest, ranked[0]?.rate ?? 0);
    lines.push(`    ${target}: ${total} writes on ${counts.size} keys; hottest:`);
    for (const k of ranked.slice(0, 5))
      lines.push(
        `      ${k.pk
          .replace(/0x[0-9a-f]{40}/g, "<owner>")
          .replace(/[0-9A-HJKMNP-TV-Z]{26}/g, "<id>")
          .padEnd(
            40,
          )} ${String(k.count).padStart(5)} ${((100 * k.count) / total).toFixed(1).padStart(5)}%  ${k.rate.toFixed(0).padStart(6)}/s (${scope(k.pk)})`,
      );
  }
  lines.push(`  hottest key at scale: ${hottest.toFixed(0)} writes/s (goal ≤ ${KEY_GOAL}: ${hottest <= KEY_GOAL ? "met" : "NOT met"})`);
  return lines;
}
