/**
 * Issue 10's benchmarks (automatic triggers), part of `npm run bench`, called from bench/run.ts with its server,
 * runtime and table. Each side is measured round by round in turn with its baseline:
 *
 *   block mined → execution        the watcher loop (startWatching, pollMs 100) on a block-triggered workflow
 *                                  (interval 1); evm_mine, then until the fire's execution.requested is published
 *                                  (after the claim committed the pending record)  vs  the pass's own RPC
 *                                  round trips issued directly (eth_blockNumber + eth_getBlockByNumber)
 *   fixedTime instant → execution  the local scheduler's tick(instant) under a fake clock (called at the instant)
 *                                  until execution.requested  vs  the DynamoDB requests that tick made up to then
 *                                  (due Query, workflow reads, the claim's TransactWriteItems), replayed
 *   watcher RPC calls per pass     1, 100 and 1,000 event-triggered workflows on one chain (registry entries
 *                                  written directly): RPC calls per pass and per block (eth_getLogs apart), and
 *                                  the pass's time  vs  its RPC calls issued directly (eth_blockNumber + eth_getLogs)
 *
 *   BENCH_TRIGGER_ROUNDS (default min(40, BENCH_ROUNDS)).
 */
import { ulid } from "ulid";
import {
  createPublicClient,
  createTestClient,
  custom,
  encodeEventTopics,
  erc20Abi,
  http,
  type Address,
  type Hex,
  type PublicClient,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { signInWithAccount } from "../local/client";
import { chainSettings, publicClient } from "../shared/chain/chains";
import { currentBus, setBus } from "../shared/execution/bus/install";
import { type BusEvent, type EventBus } from "../shared/execution/bus/event-bus";
import { createLocalScheduler } from "../shared/workflow/scheduler/local";
import { setScheduler } from "../shared/workflow/scheduler/install";
import { unwatch, watch, type ChainTrigger } from "../shared/workflow/watch-registry";
import type { BenchContext } from "./workflows";
import { interleaved, stat, timed, type Round } from "./stats";
import { fireTimeTrigger } from "../shared/execution/time-fire";
import { setRuntime, type Runtime } from "../shared/current-runtime";
import { getRecord } from "../shared/execution/execution-read";
import { mergedFilter } from "../shared/watch/match";
import { release } from "../shared/watch/checkpoint";
import { startWatching } from "../shared/watch/loop";
import { watchChain } from "../shared/watch/pass";

export async function benchTriggers(ctx: BenchContext): Promise<void> {
  const rounds = Number(process.env.BENCH_TRIGGER_ROUNDS ?? Math.min(40, Number(process.env.BENCH_ROUNDS ?? 40)));
  const began = performance.now();
  const { runtime } = ctx;
  const chainId = runtime.config.defaultChainId;
  // Block triggers with interval 1 are below the production floor (MIN_BLOCK_INTERVAL_S): lifted for the bench.
  const benchRuntime = setRuntime({
    ...runtime,
    config: { ...runtime.config, limits: { ...runtime.config.limits, minBlockIntervalS: 0 } },
  });
  const previousBus = currentBus();
  const bus = recordingBus();
  setBus(bus);
  // The devnet also mines a block every blockTimeSeconds by itself: paused, so only the bench's blocks exist.
  const chain = chainSettings(chainId);
  const testClient = createTestClient({ mode: "anvil", transport: http(chain.rpcUrl) });
  await testClient.setIntervalMining({ interval: 0 });
  try {
    const who = await newOwner(ctx.base);
    await benchBlockFire(ctx, rounds, who, chainId, bus);
    await benchFixedTime(ctx, benchRuntime, rounds, who, bus);
    await benchWatcherCalls(ctx, benchRuntime, chainId);
    console.log(`trigger benches: ${((performance.now() - began) / 1000).toFixed(1)} s (rounds ${rounds})`);
  } finally {
    await testClient.setIntervalMining({ interval: chain.blockTimeSeconds ?? 2 });
    if (previousBus) setBus(previousBus);
    setRuntime(runtime);
  }
}

const note = (ctx: BenchContext, text: string) => ctx.rows[ctx.rows.length - 1]!.push(text);

/**
 * A bus that runs nothing: it notes when each execution.requested is published (the fire's claim has committed
 * the pending record by then) and tells whoever waits. Executions stay pending: no runner adds load to the clock.
 */
function recordingBus() {
  const waiters = new Set<(event: BusEvent, at: number) => void>();
  const bus: EventBus & { next(accept: (event: BusEvent) => Promise<boolean>): Promise<number> } = {
    async publish(event) {
      const at = performance.now();
      for (const waiter of waiters) waiter(event, at);
    },
    subscribe: () => () => undefined,
    /** The publish time of the first event `accept` answers true for. */
    next(accept) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => (waiters.delete(waiter), reject(new Error("no execution.requested within 10 s"))), 10_000);
        const waiter = (event: BusEvent, at: number) =>
          void accept(event).then((yes) => {
            if (!yes || !waiters.delete(waiter)) return;
            clearTimeout(timer);
            resolve(at);
          }, reject);
        waiters.add(waiter);
      });
    },
  };
  return bus;
}
type RecordingBus = ReturnType<typeof recordingBus>;

interface Owner {
  headers: Record<string, string>;
  wallet: string;
}

async function newOwner(base: string): Promise<Owner> {
  const account = privateKeyToAccount(generatePrivateKey());
  const headers = { Authorization: `Bearer ${await signInWithAccount(base, account)}`, "Content-Type": "application/json" };
  const res = await fetch(`${base}/wallets`, { method: "POST", headers, body: JSON.stringify({ salt: "10" }) });
  const { address } = (await res.json()) as { address: string };
  return { headers, wallet: address };
}

async function createWorkflow(base: string, who: Owner, trigger: unknown): Promise<string> {
  const res = await fetch(`${base}/workflows`, {
    method: "POST",
    headers: who.headers,
    body: JSON.stringify({
      smartWalletAddress: who.wallet,
      trigger,
      nodes: [{ id: "one", name: "one", type: "customCode", config: { source: "return 1" } }],
      maxExecution: 1_000_000,
    }),
  });
  const body = (await res.json()) as { id?: string };
  if (res.status !== 201 || !body.id) throw new Error(`POST /workflows: ${res.status} ${JSON.stringify(body)}`);
  return body.id;
}

async function deleteWorkflow(base: string, who: Owner, id: string) {
  const res = await fetch(`${base}/workflows/${id}`, { method: "DELETE", headers: who.headers });
  await res.arrayBuffer();
  if (res.status !== 204) throw new Error(`DELETE /workflows/${id}: ${res.status}`);
}

const triggerData = async (workflowId: string, executionId: string) => {
  const record = await getRecord(workflowId, executionId);
  const execution = record?.execution as unknown as { status: string; steps: { output: { data: Record<string, unknown> } }[] } | undefined;
  if (!execution || !["pending", "started"].includes(execution.status))
    throw new Error(`execution ${executionId}: ${execution?.status ?? "missing"}`);
  return execution.steps[0]!.output.data;
};

// ---------------------------------------------------------------------------------------------------------
// 1a. Block mined → execution

const POLL_MS = 100;

async function benchBlockFire(ctx: BenchContext, rounds: number, who: Owner, chainId: number, bus: RecordingBus) {
  const chain = chainSettings(chainId);
  const client = publicClient(chain);
  const testClient = createTestClient({ mode: "anvil", transport: http(chain.rpcUrl) });
  const workflowId = await createWorkflow(ctx.base, who, { id: "b", name: "everyBlock", type: "block", config: { interval: 1 } });
  const loop = startWatching({ holder: `bench-${ulid()}`, pollMs: POLL_MS });
  try {
    await sleep(3 * POLL_MS); // the first pass sets the checkpoint at the head
    const viaWatcher: Round = async (i) => {
      const target = Number(await client.getBlockNumber({ cacheTime: 0 })) + 1;
      const fired = bus.next(
        async (e) => e.workflowId === workflowId && (await triggerData(workflowId, e.executionId)).blockNumber === target,
      );
      await sleep(Math.abs(i * 37) % POLL_MS); // blocks land at a spread of phases of the poll period
      await testClient.mine({ blocks: 1 });
      const start = performance.now();
      return (await fired) - start;
    };
    const direct = timed(async () => {
      const head = await client.getBlockNumber({ cacheTime: 0 });
      await client.getBlock({ blockNumber: head });
    });
    const [fire, rpc] = await interleaved(rounds, [viaWatcher, direct]);
    ctx.report("block mined → execution (watcher loop)", fire, "eth_blockNumber+getBlock", rpc);
    note(ctx, `poll ${POLL_MS} ms (default for 2 s blocks: 1000 ms)`);
  } finally {
    await loop.stop();
    await deleteWorkflow(ctx.base, who, workflowId);
  }
}

// ---------------------------------------------------------------------------------------------------------
// 1b. fixedTime instant → execution

/**
 * One fixedTime workflow with an epoch per round, a minute apart, a day ahead; the bench is the clock: each round
 * calls tick(epoch) as the loop would at that instant (the real loop ticks every second, so add up to 1 s).
 * Baseline: the DynamoDB requests one tick made before the hand-over (due Query, the workflow reads, the claim's
 * TransactWriteItems), recorded and replayed directly; the replayed claim fails its condition (the fire record
 * exists) after the same round trip; a cancelled transaction costs DynamoDB Local somewhat more than a committed
 * one, so this baseline leans high (the tick can come out below it).
 */
async function benchFixedTime(ctx: BenchContext, runtime: Runtime, rounds: number, who: Owner, bus: RecordingBus) {
  const scheduler = setScheduler(createLocalScheduler(fireTimeTrigger));
  const first = Date.now() + 24 * 3600_000;
  const warmups = Math.min(5, rounds);
  const epochs = Array.from({ length: rounds + warmups + 1 }, (_, i) => first + i * 60_000);
  const workflowId = await createWorkflow(ctx.base, who, { id: "f", name: "at", type: "fixedTime", config: { epochs } });
  let next = 0;
  const recorded: object[] = [];
  /** How many of the recorded requests came before the execution was handed over (the rest advance the schedule). */
  let toClaim = 0;
  const db = runtime.db;
  const recorder = { send: (command: never) => (recorded.push(command), db.send(command)) } as unknown as Runtime["db"];
  const viaTick: Round = async () => {
    const instant = epochs[next++]!;
    let executionId = "";
    const fired = bus.next(
      async (e) => e.workflowId === workflowId && Boolean((executionId = e.executionId)) && Boolean((toClaim ||= recorded.length)),
    );
    if (next === 1) setRuntime({ ...runtime, db: recorder });
    const start = performance.now();
    const done = await scheduler.tick(instant);
    setRuntime(runtime);
    const at = await fired;
    if (done.length !== 1 || done[0]!.result.outcome !== "fired") throw new Error(`tick(${instant}): ${JSON.stringify(done)}`);
    if ((await triggerData(workflowId, executionId)).timestamp !== instant) throw new Error("the fire's trigger output is not its instant");
    return at - start;
  };
  await viaTick(-1); // records the requests of one tick
  const replay = timed(async () => {
    for (const command of recorded.slice(0, toClaim)) {
      await db.send(command as never).catch((err: { name?: string }) => {
        if (err.name !== "ConditionalCheckFailedException" && err.name !== "TransactionCanceledException") throw err;
      });
    }
  });
  const [tick, requests] = await interleaved(rounds, [viaTick, replay]);
  const kinds = recorded
    .slice(0, toClaim)
    .map((c) => c.constructor.name.replace(/Command$/, ""))
    .join("+");
  ctx.report("fixedTime instant → execution (tick)", tick, `its ${toClaim} req replayed`, requests);
  note(ctx, `+${(tick.p50 - requests.p50).toFixed(2)} ms; ${kinds} (then ${recorded.length - toClaim} more advance the schedule)`);
  await deleteWorkflow(ctx.base, who, workflowId);
}

// ---------------------------------------------------------------------------------------------------------
// 2. Watcher RPC calls per block with 1, 100, 1,000 event-triggered workflows

const TRANSFER = encodeEventTopics({ abi: erc20Abi, eventName: "Transfer" })[0];

/**
 * The entries are written straight into the registry (watch(), what create and resume call), each on a contract
 * address of its own that emits nothing, so the merged eth_getLogs filter grows with the count and no fire is
 * claimed: what is measured is the cost of watching, not of firing. Passes get a client whose transport counts
 * every JSON-RPC call.
 */
async function benchWatcherCalls(ctx: BenchContext, runtime: Runtime, chainId: number) {
  const chain = chainSettings(chainId);
  const plain = publicClient(chain);
  const testClient = createTestClient({ mode: "anvil", transport: http(chain.rpcUrl) });
  const calls = new Map<string, number>();
  const counting = createPublicClient({
    transport: custom({
      request: ({ method, params }: { method: string; params?: unknown }) => {
        calls.set(method, (calls.get(method) ?? 0) + 1);
        return plain.request({ method, params } as never);
      },
    }),
  }) as PublicClient;
  let dbRequests = 0;
  const counted = { send: (command: never) => (dbRequests++, runtime.db.send(command)) } as unknown as Runtime["db"];
  const holder = `bench-calls-${ulid()}`;
  const ids: string[] = [];
  const queries: { addresses: Address[]; topics: (Hex | null)[] }[] = [];
  const now = Date.now();
  const PASSES = 5;
  const BLOCKS = 10;
  try {
    await watchChain(chainId, { holder, client: counting }); // the checkpoint at the head
    for (const count of [1, 100, 1000]) {
      const writeStart = performance.now();
      const added = Array.from({ length: count - ids.length }, () => ({
        id: ulid(),
        query: { addresses: [privateKeyToAccount(generatePrivateKey()).address], topics: [TRANSFER, null, null] },
      }));
      await forEachLimited(added, 16, ({ id, query }) =>
        watch(
          { id, chainId, trigger: { id: "e", name: "transfer", type: "event", config: { queries: [query] } } as unknown as ChainTrigger },
          now,
        ),
      );
      const writeMs = performance.now() - writeStart;
      ids.push(...added.map((a) => a.id));
      queries.push(...added.map((a) => a.query));

      // PASSES passes over one new block each, then one pass over BLOCKS new blocks.
      calls.clear();
      dbRequests = 0;
      const times: number[] = [];
      const filter = mergedFilter(queries as never);
      const baseline: number[] = [];
      setRuntime({ ...runtime, db: counted });
      try {
        for (let p = 0; p < PASSES; p++) {
          await testClient.mine({ blocks: 1 });
          let start = performance.now();
          const r = await watchChain(chainId, { holder, client: counting });
          times.push(performance.now() - start);
          if (r.status !== "processed" || r.to! - r.from! !== 0 || r.fired.length !== 0) throw new Error(`pass: ${JSON.stringify(r)}`);
          start = performance.now();
          const head = await plain.getBlockNumber({ cacheTime: 0 });
          await plain.request({
            method: "eth_getLogs",
            params: [{ fromBlock: `0x${head.toString(16)}`, toBlock: `0x${head.toString(16)}`, ...filter }],
          } as never);
          baseline.push(performance.now() - start);
        }
      } finally {
        setRuntime(runtime);
      }
      const perPass = sum(calls) / PASSES;
      const methods = [...calls].map(([m, n]) => `${m} ${n / PASSES}`).join(", ");
      const logsPerPass = (calls.get("eth_getLogs") ?? 0) / PASSES;
      const dbPerPass = dbRequests / PASSES;
      calls.clear();
      await testClient.mine({ blocks: BLOCKS });
      const wide = await watchChain(chainId, { holder, client: counting });
      const blocks = wide.to! - wide.from! + 1;
      const perBlockWide = sum(calls) / blocks;

      ctx.report(`watcher pass, ${count} event wf`, stat(times), "eth_blockNumber+getLogs", stat(baseline));
      note(
        ctx,
        `${perPass} RPC/pass of 1 block (eth_getLogs ${logsPerPass}), ${perBlockWide.toFixed(2)} RPC/block over ${blocks}; ${dbPerPass} DB req/pass; ${count - (ids.length - added.length)} entries written in ${writeMs.toFixed(0)} ms`,
      );
      console.log(
        `watcher, ${count} event workflows: per 1-block pass ${perPass} RPC (${methods}), ${dbPerPass} DB req; over ${blocks} blocks ${perBlockWide.toFixed(2)} RPC/block`,
      );
    }
  } finally {
    await release(chainId, holder);
    await forEachLimited(ids, 16, (id) => unwatch(id));
  }
}

const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

// ---------------------------------------------------------------------------------------------------------

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function forEachLimited<T>(items: readonly T[], limit: number, run: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await run(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
