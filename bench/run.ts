/**
 * `npm run bench`: latency through the full local stack (real HTTP server, DynamoDB Local on disk, the KMS
 * endpoint, the devnet), each compared with a baseline measured in the same run:
 *   PUT /secrets/{name}, POST /wallets vs  raw DynamoDB PutItem
 *   GET /secrets, GET /wallets         vs  exactly the DynamoDB requests each makes, issued directly
 *   withdraw (request → confirmed)     vs  the same user operation sent straight to the bundler
 *   rate limiter take (busy, after idle, denied)  vs  a plain UpdateItem on one item
 *   30 withdrawals at once from one wallet  vs  one withdrawal (bench/user-ops.ts, BENCH_ONLY=userops)
 * Ratios matter more than absolute numbers: both sides share this machine's load.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { serveApp } from "../local/http-server";
import { PutCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { createTestClient, http, parseEther, getAddress, type Address } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { startLocalStack } from "../local/stack";
import { freePort } from "../local/processes";
import { signInWithAccount } from "../local/client";
import { buildConfig } from "../shared/config";
import { createRuntime } from "../shared/runtime";
import { ensureTable } from "../shared/store/table";
import { createServiceApp } from "../shared/service/app";
import { wireLocal } from "../shared/service/wire-local";
import { RateLimiter } from "../shared/http/rate-limit";
import { setLogLevel } from "../shared/log";
import { publicClient, bundlerClient, controllerSigner } from "../shared/chain/chains";
import { executeUserOperation } from "../shared/chain/userop";
import { stat, statCells, type Stat } from "./stats";
import { sameWriteEveryTime } from "./replay";
import { setRuntime, type Runtime } from "../shared/current-runtime";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 200);
const CHAIN_ROUNDS = Number(process.env.BENCH_CHAIN_ROUNDS ?? 15);

async function measure(rounds: number, fn: (i: number) => Promise<void>) {
  for (let i = 0; i < Math.min(10, rounds); i++) await fn(-1 - i); // warm-up
  const times: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const start = performance.now();
    await fn(i);
    times.push(performance.now() - start);
  }
  return stat(times);
}

const rows: string[][] = [];
function report(name: string, s: Stat, baselineName: string, baseline: Stat) {
  rows.push([
    ...statCells(name, s, baselineName, baseline),
    `${(s.p50 / baseline.p50).toFixed(1)}x`,
    `${(s.p99 / baseline.p99).toFixed(1)}x`,
  ]);
}

async function main() {
  setLogLevel("error");
  const dataDir = mkdtempSync(join(tmpdir(), "wa-bench-"));
  const stack = await startLocalStack({ dataDir, persist: true });
  try {
    const config = buildConfig({
      ...process.env,
      ...stack.env,
      LOG_LEVEL: "error",
      TABLE_NAME: `bench-${randomUUID()}`,
      MAX_WALLETS_PER_OWNER: "100000",
      RATE_LIMIT_BURST: "1000000",
      // 10,000 a second refill a million tokens in 100 s: a request whose clock reading is a second stale under load
      // (event-loop and DynamoDB Local lag) still finds its token (at 1,000,000/s the whole bucket spans 1 s).
      RATE_LIMIT_RPS: "10000",
    });
    const runtime = setRuntime(createRuntime({ config }));
    wireLocal();
    await ensureTable(runtime.db, config.tableName);
    const port = await freePort();
    const server = await serveApp(createServiceApp(), { port, hostname: "127.0.0.1" });
    const base = `http://127.0.0.1:${port}`;

    const owner = privateKeyToAccount(generatePrivateKey());
    const token = await signInWithAccount(base, owner);
    const headers = { Authorization: `Bearer ${token}`, "Content-Type": "application/json" };
    const request = async (method: string, path: string, body?: unknown, expected = [200, 201, 204]) => {
      const res = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      await res.arrayBuffer();
      if (!expected.includes(res.status)) throw new Error(`${method} ${path}: ${res.status}`);
      return res;
    };

    // BENCH_ONLY=isolation (or any part's name) runs that part alone.
    const only = process.env.BENCH_ONLY;
    const part = (name: string) => only === undefined || only === name;
    if (part("core")) await benchCore(runtime, config, stack, base, owner, headers, request);
    setRuntime(runtime);
    if (part("workflows")) await (await import("./workflows")).benchWorkflows({ base, runtime, report, rows });
    if (part("triggers")) await (await import("./triggers")).benchTriggers({ base, runtime, report, rows });
    if (part("claims")) await (await import("./claims")).benchClaims({ base, runtime, report, rows });
    if (part("cron")) await (await import("./cron-floor")).benchCronFloor(report);
    if (part("isolation")) await (await import("./isolation")).benchIsolation({ base, runtime, report, rows });
    setRuntime(runtime);
    if (part("waits")) await (await import("./waits")).benchWaits({ base, runtime, report, rows });
    setRuntime(runtime);
    if (part("userops")) await (await import("./user-ops")).benchUserOps({ base, runtime, report, rows });
    setRuntime(runtime);
    if (part("load")) await (await import("./load")).benchLoad({ base, runtime, report, rows });
    setRuntime(runtime);
    if (only === "keys") await (await import("./keys")).benchKeys({ base, runtime, report, rows });

    printTable();
    await server.close();
  } finally {
    await stack.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
  if (process.env.BENCH_ONLY === undefined || process.env.BENCH_ONLY === "bundles") await (await import("./bundles")).benchBundles(); // bundle sizes and cold imports, with the local stack stopped
}

/** Secrets, wallets, withdraw and the rate limiter, each against its baseline. */
async function benchCore(
  runtime: Runtime,
  config: ReturnType<typeof buildConfig>,
  stack: Awaited<ReturnType<typeof startLocalStack>>,
  base: string,
  owner: ReturnType<typeof privateKeyToAccount>,
  headers: Record<string, string>,
  request: (method: string, path: string, body?: unknown, expected?: number[]) => Promise<Response>,
) {
  // --- secrets vs raw DynamoDB ---
  const rawPut = await measure(ROUNDS, async (i) => {
    await runtime.db.send(
      new PutCommand({ TableName: config.tableName, Item: { pk: `BENCH#${owner.address}`, sk: `RAW#${i}`, value: "x".repeat(64) } }),
    );
  });
  const putSecret = await measure(ROUNDS, (i) =>
    request("PUT", `/secrets/BENCH_${i < 0 ? `W${-i}` : i}`, { value: "x".repeat(64) }).then(() => undefined),
  );
  report("PUT /secrets/{name}", putSecret, "PutItem", rawPut);

  // --- reads vs exactly the DynamoDB requests they make (rate-limit write included), issued directly ---
  await againstItsOwnRequests(runtime, "GET /secrets (20)", () => request("GET", "/secrets?limit=20"));

  // --- wallet create vs raw PutItem ---
  const createWallet = await measure(ROUNDS, (i) => request("POST", "/wallets", { salt: String(i + 1000) }).then(() => undefined));
  report("POST /wallets", createWallet, "PutItem", rawPut);
  const walletsOwner = privateKeyToAccount(generatePrivateKey());
  const walletsHeaders = { Authorization: `Bearer ${await signInWithAccount(base, walletsOwner)}`, "Content-Type": "application/json" };
  for (const salt of ["1", "2", "3"])
    await fetch(`${base}/wallets`, { method: "POST", headers: walletsHeaders, body: JSON.stringify({ salt }) });
  await againstItsOwnRequests(runtime, "GET /wallets (3)", () => fetch(`${base}/wallets`, { headers: walletsHeaders }));

  // --- withdraw vs the same operation sent straight to the bundler ---
  const chain = config.chains.find((c) => c.chainId === stack.devnet!.chainId)!;
  const testClient = createTestClient({ mode: "anvil", transport: http(chain.rpcUrl) });
  const walletRes = await fetch(`${base}/wallets`, { method: "POST", headers, body: JSON.stringify({ salt: "1" }) });
  const wallet = getAddress(((await walletRes.json()) as { address: Address }).address);
  await testClient.setBalance({ address: wallet, value: parseEther("100") });
  const recipient = privateKeyToAccount(generatePrivateKey()).address;
  const viaService = await measure(CHAIN_ROUNDS, async () => {
    const res = await fetch(`${base}/wallets/${wallet}:withdraw`, {
      method: "POST",
      headers,
      body: JSON.stringify({ recipientAddress: recipient, amount: "1000", token: "ETH" }),
    });
    const body = (await res.json()) as { status: string };
    if (body.status !== "confirmed") throw new Error(`withdraw ended ${body.status}`);
  });
  const signer = await controllerSigner();
  const direct = await measure(CHAIN_ROUNDS, async () => {
    const { receipt } = await executeUserOperation({
      client: publicClient(chain),
      bundler: bundlerClient(chain),
      chainId: chain.chainId,
      entryPoint: getAddress(chain.entryPoint),
      factory: getAddress(chain.factory!),
      owner: owner.address,
      salt: 1n,
      sender: wallet,
      calls: [{ to: recipient, value: 1000n }],
      signer,
      paymaster: { address: getAddress(chain.paymaster!), signer },
    });
    if (!receipt.success) throw new Error("direct user operation reverted");
  });
  report("withdraw → confirmed", viaService, "raw bundler op", direct);

  await benchRateLimiter(runtime);
}

/**
 * A route against exactly the DynamoDB requests it makes: one request is recorded (every command the table
 * client sends while it runs), then the route and a direct replay of those commands, in the same order, are
 * timed in the same run. The difference is what our own code costs (token check, validation, serialisation,
 * HTTP). Conditional writes are replayed without their condition (sameWriteEveryTime): replayed as recorded,
 * the rate limiter's write fails its condition once the route has moved the bucket on, and a refused write
 * is a cheaper request than the write the route makes.
 */
async function againstItsOwnRequests(runtime: Runtime, name: string, call: () => Promise<Response>) {
  const recorded: object[] = [];
  const db = runtime.db;
  const recorder = { send: (command: never) => (recorded.push(command), db.send(command)) } as unknown as Runtime["db"];
  setRuntime({ ...runtime, db: recorder });
  const first = await call();
  if (!first.bodyUsed) await first.arrayBuffer();
  setRuntime(runtime);
  if (first.status !== 200) throw new Error(`${name}: ${first.status}`);
  const commands = recorded.map(sameWriteEveryTime);
  const replay = async () => {
    for (const command of commands) await db.send(command as never);
  };
  // Interleaved round by round (route, then replay), so load swings on this shared machine hit both sides alike.
  // 100 warm-up rounds: both sides' first few hundred requests still run DynamoDB Local's cold (JIT) paths.
  const viaRouteTimes: number[] = [];
  const directTimes: number[] = [];
  for (let i = -100; i < ROUNDS; i++) {
    let start = performance.now();
    const res = await call();
    if (!res.bodyUsed) await res.arrayBuffer();
    if (i >= 0) viaRouteTimes.push(performance.now() - start);
    start = performance.now();
    await replay();
    if (i >= 0) directTimes.push(performance.now() - start);
  }
  const viaRoute = stat(viaRouteTimes);
  const direct = stat(directTimes);
  const kinds = recorded.map((c) => c.constructor.name.replace(/Command$/, "")).join("+");
  report(name, viaRoute, kinds, direct);
  rows[rows.length - 1]!.push(`+${(viaRoute.p50 - direct.p50).toFixed(2)} ms`);
}

/**
 * The rate limiter's own cost per request (shared/http/rate-limit.ts): sequential take() calls on one subject
 * with the default limits (50, 10/s), under a clock moved by hand, vs plain UpdateItem calls on one item of
 * the same table. Also counts the DynamoDB requests each take() sent.
 */
async function benchRateLimiter(runtime: Runtime) {
  let clock = Date.now();
  const config = { ...runtime.config, limits: { ...runtime.config.limits, rateLimitBurst: 50, rateLimitRps: 10 } };
  let requests = 0;
  const db = runtime.db;
  const counted = { send: (command: never) => (requests++, db.send(command)) } as unknown as Runtime["db"];
  setRuntime({ ...runtime, config, db: counted, now: () => clock });
  const interval = 1000 / config.limits.rateLimitRps;
  const limiter = new RateLimiter();
  const take = async (subject: string, expectAllowed: boolean) => {
    const decision = await limiter.take(subject);
    if (decision?.allowed !== expectAllowed)
      throw new Error(`rate limiter: expected allowed=${expectAllowed}, got ${JSON.stringify(decision)}`);
  };

  const plainUpdate = await measure(ROUNDS, async (i) => {
    await db.send(
      new UpdateCommand({
        TableName: config.tableName,
        Key: { pk: "BENCH#RATE", sk: "PLAIN" },
        UpdateExpression: "SET n = :n",
        ExpressionAttributeValues: { ":n": i },
      }),
    );
  });
  const perTake = async (name: string, run: () => Promise<Stat>) => {
    const before = requests;
    const stat = await run();
    const takes = ROUNDS + Math.min(10, ROUNDS);
    report(`${name} (${((requests - before) / takes).toFixed(2)} req)`, stat, "UpdateItem", plainUpdate);
  };
  // A busy subject: one token per interval, so every take is allowed and "advance"s the stored tat.
  await perTake("rate limit take, busy", () =>
    measure(ROUNDS, async () => {
      clock += interval;
      await take("ip:bench-busy", true);
    }),
  );
  // A subject idle longer than the bucket takes to fill: every take "reset"s.
  await perTake("rate limit take, after idle", () =>
    measure(ROUNDS, async () => {
      clock += 60_000;
      await take("ip:bench-idle", true);
    }),
  );
  // An empty bucket: every take is a failed condition (denied, nothing written).
  for (let i = 0; i < 50; i++) await take("ip:bench-denied", true);
  await perTake("rate limit take, denied", () => measure(ROUNDS, () => take("ip:bench-denied", false)));
}

function printTable() {
  const header = ["operation", "p50 ms", "p99 ms", "baseline", "p50 ms", "p99 ms", "p50 ratio", "p99 ratio", "p50 overhead"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) => header.map((_, i) => (cells[i] ?? "").padEnd(widths[i]!)).join("  ");
  console.log(`\nrounds: ${ROUNDS} (chain: ${CHAIN_ROUNDS}); machine: 2 cores\n`);
  console.log(line(header));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const r of rows) console.log(line(r));
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
