/**
 * Parallel user operations (API.md §19), part of `npm run bench` (alone: BENCH_ONLY=userops), called from
 * bench/run.ts with its server and runtime. Every withdrawal goes through the HTTP server to `confirmed`:
 *
 *   30 withdrawals at once from one deployed wallet     the burst's time until the last is confirmed  vs  one
 *                                                       withdrawal alone from a deployed wallet (goal ≤ 2x)
 *   30 withdrawals at once from one undeployed wallet   the same, the first operation deploying the account while
 *                                                       the others wait for it  vs  the same one alone (goal ≤ 3x)
 *
 * Each burst is checked: all confirmed, every operation under a key of its own. BENCH_USEROP_ROUNDS (default 5)
 * rounds, each timing three single withdrawals from a deployed wallet, one from an undeployed one, then a burst of
 * each kind.
 */
import { createTestClient, getAddress, http, parseEther, type Address } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { signInWithAccount } from "../local/client";
import { getWithdrawal } from "../shared/store/entities/withdrawal";
import { stat, type Stat } from "./stats";
import { note, type BenchContext } from "./workflows";

const BURST = 30;
const GOALS = { deployed: 2, undeployed: 3 };

export async function benchUserOps(ctx: BenchContext): Promise<void> {
  const rounds = Number(process.env.BENCH_USEROP_ROUNDS ?? 5);
  const chain = ctx.runtime.config.chains.find((c) => c.chainId === 31337);
  if (!chain) throw new Error("the devnet is not configured");
  const testClient = createTestClient({ mode: "anvil", transport: http(chain.rpcUrl) });
  const account = privateKeyToAccount(generatePrivateKey());
  const owner = account.address;
  const headers = { Authorization: `Bearer ${await signInWithAccount(ctx.base, account)}`, "Content-Type": "application/json" };

  let salt = 0;
  const newWallet = async (): Promise<Address> => {
    const res = await fetch(`${ctx.base}/wallets`, { method: "POST", headers, body: JSON.stringify({ salt: String(++salt) }) });
    const wallet = getAddress(((await res.json()) as { address: Address }).address);
    await testClient.setBalance({ address: wallet, value: parseEther("10") });
    return wallet;
  };
  /** One withdrawal, timed to `confirmed` (read again while the answer was pending: a burst may outlast its wait). */
  const withdraw = async (wallet: Address): Promise<string> => {
    const res = await fetch(`${ctx.base}/wallets/${wallet}:withdraw`, {
      method: "POST",
      headers,
      body: JSON.stringify({ recipientAddress: privateKeyToAccount(generatePrivateKey()).address, amount: "1000", token: "ETH" }),
    });
    let body = (await res.json()) as { id: string; status: string; message?: string };
    while (body.status === "pending") {
      await new Promise((resolve) => setTimeout(resolve, 100));
      body = (await (await fetch(`${ctx.base}/wallets/${wallet}/withdrawals/${body.id}`, { headers })).json()) as typeof body;
    }
    if (body.status !== "confirmed") throw new Error(`withdraw ended ${res.status} ${JSON.stringify(body)}`);
    return body.id;
  };
  const timed = async (fn: () => Promise<unknown>) => {
    const start = performance.now();
    await fn();
    return performance.now() - start;
  };
  /** A burst of BURST withdrawals from `wallet`, checked: every one under a key of its own. */
  const burst = async (wallet: Address) => {
    let ids: string[] = [];
    const ms = await timed(async () => (ids = await Promise.all(Array.from({ length: BURST }, () => withdraw(wallet)))));
    const keys = await Promise.all(ids.map(async (id) => (await getWithdrawal({ owner, chainId: 31337, wallet, id }))?.nonceKey));
    if (new Set(keys).size !== BURST) throw new Error("two withdrawals of a burst shared a nonce key");
    return ms;
  };

  const deployed = await newWallet();
  await withdraw(deployed); // deploys it; warm-up
  const aloneDeployed: number[] = [];
  const aloneUndeployed: number[] = [];
  const burstDeployed: number[] = [];
  const burstUndeployed: number[] = [];
  // Round by round, so both sides share whatever else the machine is doing at the time.
  for (let i = 0; i < rounds; i++) {
    for (let j = 0; j < 3; j++) aloneDeployed.push(await timed(() => withdraw(deployed)));
    const fresh = await newWallet();
    aloneUndeployed.push(await timed(() => withdraw(fresh)));
    const wallet = await newWallet();
    await withdraw(wallet);
    burstDeployed.push(await burst(wallet));
    burstUndeployed.push(await burst(await newWallet()));
  }

  const one = stat(aloneDeployed);
  const verdict = (s: Stat, goal: number) =>
    `${BURST} confirmed in ${(s.p50 / one.p50).toFixed(1)}x the time of one (p50), goal ≤ ${goal}x ${s.p50 / one.p50 <= goal ? "met" : "NOT met"}`;
  const deployedBurst = stat(burstDeployed);
  ctx.report(`${BURST} withdrawals at once, deployed wallet`, deployedBurst, "one withdrawal, deployed wallet", one);
  note(ctx, verdict(deployedBurst, GOALS.deployed));
  const undeployedBurst = stat(burstUndeployed);
  ctx.report(`${BURST} withdrawals at once, undeployed wallet`, undeployedBurst, "one withdrawal, deployed wallet", one);
  const deploying = stat(aloneUndeployed);
  note(
    ctx,
    `${verdict(undeployedBurst, GOALS.undeployed)}; one deploying withdrawal alone: ${deploying.p50.toFixed(0)} ms p50 (${(undeployedBurst.p50 / deploying.p50).toFixed(1)}x)`,
  );
}
