/**
 * Parallel user operations from one wallet (API.md §19) on the real devnet: every withdrawal and every step's
 * operation goes under a nonce key of its own, derived from its identity, so operations of one wallet travel side
 * by side; an undeployed account is deployed by one of them while the others wait for its code, in one process or
 * several; a lost bundler answer is followed by the very same operation (same key, same sequence), never a second
 * one; and a process that dies between recording a withdrawal and sending it loses nothing and blocks nothing.
 * What reached the chain is read back from the EntryPoint's events.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseEther, toHex, type Address, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { entryPoint07Abi } from "viem/account-abstraction";
import { stackEnv, useTestRuntime } from "../support/runtime";
import { signIn, type SignedIn } from "../support/auth";
import { devnet, includedOperations, setBalance } from "../support/chain";
import { startRpcProxy, type RpcProxy } from "../support/rpc-proxy";
import { startServiceChild, type ServiceChild } from "../support/service-child";
import { createServiceApp } from "../../shared/service/app";
import { getWithdrawal, listWithdrawals } from "../../shared/store/entities/withdrawal";
import { walletSender } from "../../shared/wallet/operation";
import { composeNonce, nonceKeyOf, withdrawalIdentity } from "../../shared/chain/nonce";
import type { Runtime } from "../../shared/current-runtime";
import { followUpPending } from "../../shared/wallet/withdraw-followup";

const app = createServiceApp();
const LIMITS = { MAX_WALLETS_PER_OWNER: "100", RATE_LIMIT_BURST: "100000", RATE_LIMIT_RPS: "10000" };
let runtime: Runtime;
let alice: SignedIn;
let proxy: RpcProxy;
const children: ServiceChild[] = [];

/** The devnet's chains with the bundler behind the proxy. */
function chainsThroughProxy(): string {
  const chains = JSON.parse(stackEnv().CHAINS!) as { chainId: number; bundlerUrl?: string }[];
  return JSON.stringify(chains.map((c) => (c.chainId === 31337 ? { ...c, bundlerUrl: proxy.url } : c)));
}

async function useRuntime(env: Record<string, string> = {}) {
  runtime = await useTestRuntime({ ...LIMITS, ...env });
  alice = await signIn(app);
}

beforeAll(async () => {
  proxy = await startRpcProxy(devnet().bundlerUrl);
  await useRuntime();
});

afterAll(async () => {
  for (const child of children) await child.kill();
  await proxy.close();
});

interface Withdrawal {
  id: string;
  status: string;
  userOpHash?: Hex;
  message?: string;
}

/**
 * POST :withdraw of `amount` wei to `to`, through this process's app or another process's `base` URL; an answer
 * still pending (a loaded machine can take longer than `withdraw_confirm_wait_ms`) is read again until it settles.
 */
async function withdraw(wallet: Address, to: Address, amount: string, base?: string): Promise<Withdrawal> {
  const init = {
    method: "POST",
    headers: { ...alice.headers, "Content-Type": "application/json" },
    body: JSON.stringify({ recipientAddress: to, amount, token: "ETH" }),
  };
  const res = base ? await fetch(`${base}/wallets/${wallet}:withdraw`, init) : await app.request(`/wallets/${wallet}:withdraw`, init);
  const body = (await res.json()) as Withdrawal;
  expect(res.status, JSON.stringify(body)).toBe(200);
  return body.status === "pending" ? settled(wallet, body.id) : body;
}

/** GET of the withdrawal until it is no longer pending, for up to a minute (a read follows it up at most every 5 s). */
async function settled(wallet: Address, id: string): Promise<Withdrawal> {
  for (let i = 0; ; i++) {
    const read = (await (await app.request(`/wallets/${wallet}/withdrawals/${id}`, { headers: alice.headers })).json()) as Withdrawal;
    if (read.status !== "pending" || i >= 120) return read;
    await new Promise((r) => setTimeout(r, 500));
  }
}

let salt = 0;
async function newWallet(): Promise<Address> {
  const res = await app.request("/wallets", {
    method: "POST",
    headers: { ...alice.headers, "Content-Type": "application/json" },
    body: JSON.stringify({ salt: String(++salt) }),
  });
  expect(res.status).toBe(201);
  const { address } = (await res.json()) as { address: Address };
  await setBalance(address, parseEther("1"));
  return address;
}

const someone = () => privateKeyToAccount(generatePrivateKey()).address;
const balance = (address: Address) => devnet().client.getBalance({ address });
const amounts = (n: number) => Array.from({ length: n }, (_, i) => 1000n + BigInt(i));
const sum = (values: bigint[]) => values.reduce((a, b) => a + b, 0n);

/** How many times the EntryPoint deployed `sender` (AccountDeployed events). */
async function deployments(sender: Address): Promise<number> {
  const d = devnet();
  const logs = await d.client.getContractEvents({
    address: d.entryPoint,
    abi: entryPoint07Abi,
    eventName: "AccountDeployed",
    args: { sender },
    fromBlock: 0n,
  });
  return logs.length;
}

/**
 * Every withdrawal confirmed, and the wallet's included operations exactly these, one each, with distinct
 * (key, sequence) pairs: each withdrawal's key derived from its id (and recorded before it was sent), sequence 0.
 */
async function expectSideBySide(wallet: Address, withdrawals: Withdrawal[]) {
  for (const w of withdrawals) expect(w, JSON.stringify(w)).toMatchObject({ status: "confirmed" });
  const ops = await includedOperations(wallet);
  expect(ops).toHaveLength(withdrawals.length);
  expect(new Set(ops.map((o) => `${o.key}:${o.sequence}`)).size).toBe(withdrawals.length);
  const byHash = new Map(ops.map((o) => [o.userOpHash, o]));
  for (const w of withdrawals) {
    const key = nonceKeyOf(withdrawalIdentity(w.id));
    expect(byHash.get(w.userOpHash!)).toMatchObject({ key, sequence: 0n, success: true });
    const stored = await getWithdrawal({ owner: alice.owner, chainId: 31337, wallet, id: w.id });
    expect(stored?.nonceKey).toBe(toHex(key));
  }
}

describe("concurrent withdrawals from one wallet (API.md §19)", () => {
  it(
    "confirms 30 concurrent withdrawals from one deployed wallet with distinct (key, sequence) pairs and exact balances",
    { timeout: 120_000 },
    async () => {
      const wallet = await newWallet();
      const first = await withdraw(wallet, someone(), "1"); // deploys the account
      const to = amounts(30).map(() => someone());
      const results = await Promise.all(to.map((r, i) => withdraw(wallet, r, String(amounts(30)[i]))));
      await expectSideBySide(wallet, [first, ...results]);
      for (const [i, r] of to.entries()) expect(await balance(r)).toBe(amounts(30)[i]);
      expect(await balance(wallet)).toBe(parseEther("1") - 1n - sum(amounts(30))); // the paymaster paid the gas
      expect(await deployments(wallet)).toBe(1);
    },
  );

  it(
    "confirms 30 concurrent withdrawals from one undeployed wallet: one deploys it, the others follow it side by side",
    { timeout: 120_000 },
    async () => {
      const wallet = await newWallet();
      expect(await devnet().client.getCode({ address: wallet })).toBeUndefined();
      const to = amounts(30).map(() => someone());
      const results = await Promise.all(to.map((r, i) => withdraw(wallet, r, String(amounts(30)[i]))));
      await expectSideBySide(wallet, results);
      for (const [i, r] of to.entries()) expect(await balance(r)).toBe(amounts(30)[i]);
      expect(await balance(wallet)).toBe(parseEther("1") - sum(amounts(30)));
      expect(await deployments(wallet)).toBe(1);
    },
  );

  it(
    "deploys an undeployed wallet once when two processes withdraw from it at once (the turn is held in the table)",
    { timeout: 120_000 },
    async () => {
      const other = await startServiceChild(runtime.config.tableName, LIMITS);
      children.push(other);
      const wallet = await newWallet();
      const to = amounts(20).map(() => someone());
      const results = await Promise.all(to.map((r, i) => withdraw(wallet, r, String(amounts(20)[i]), i % 2 ? other.url : undefined)));
      await expectSideBySide(wallet, results);
      for (const [i, r] of to.entries()) expect(await balance(r)).toBe(amounts(20)[i]);
      expect(await deployments(wallet)).toBe(1);
      await other.kill();
    },
  );
});

describe("a lost bundler answer (API.md §11.5, §19)", () => {
  beforeAll(() => useRuntime({ CHAINS: chainsThroughProxy() }));
  afterAll(async () => {
    proxy.rules.faults = {};
    await useRuntime();
  });

  /** The eth_sendUserOperation calls the bundler's proxy received since `from`. */
  const sendsSince = (from: number) => proxy.calls.slice(from).filter((c) => c.method === "eth_sendUserOperation");

  it("follows a withdrawal whose send answers were all lost under the same key: one operation, sent as the same one", async () => {
    const wallet = await newWallet();
    const to = someone();
    const from = proxy.calls.length;
    proxy.rules.faults = { eth_sendUserOperation: { kind: "lose-answer" } }; // forwarded, every answer lost
    const result = await withdraw(wallet, to, "777");
    proxy.rules.faults = {};
    await expectSideBySide(wallet, [result]);
    const sends = sendsSince(from);
    expect(sends.length).toBeGreaterThanOrEqual(1);
    // however often it was sent (again after each lost answer while no receipt came), it was the very same operation
    expect(new Set(sends.map((c) => JSON.stringify(c.params[0]))).size).toBe(1);
    expect(BigInt((sends[0]!.params[0] as { nonce: Hex }).nonce)).toBe(composeNonce(nonceKeyOf(withdrawalIdentity(result.id))));
    expect(await balance(to)).toBe(777n);
  });

  it("sends a step's operation again, the same one, when the first sends never reached the bundler: included once", async () => {
    const wallet = await newWallet();
    const to = someone();
    const send = walletSender({ owner: alice.owner, wallet, executionId: "01JLOSTANSWER0000000000000" });
    const from = proxy.calls.length;
    proxy.rules.faults = { eth_sendUserOperation: { kind: "lose-request", count: 4 } }; // the first send and three sent again
    const outcome = await send({ chainId: 31337, calls: [{ to, value: 555n }], nodeId: "pay" });
    proxy.rules.faults = {};
    expect(outcome).toMatchObject({ ok: true, deployed: true });
    const sends = sendsSince(from);
    expect(sends.length).toBeGreaterThanOrEqual(5); // sent again (every second) until the bundler answered
    expect(new Set(sends.map((c) => JSON.stringify(c.params[0]))).size).toBe(1);
    const ops = await includedOperations(wallet);
    expect(ops).toHaveLength(1);
    expect(ops[0]).toMatchObject({ userOpHash: (outcome as { userOpHash: Hex }).userOpHash, sequence: 0n, success: true });
    expect(await balance(to)).toBe(555n);
  });

  it("sends a withdrawal again while the bundler defers it for the sender's other operations (ERC-7562 per-sender limit)", async () => {
    const wallet = await newWallet();
    const to = someone();
    const from = proxy.calls.length;
    // Rundler's words for an unstaked sender with SAME_SENDER_MEMPOOL_COUNT operations in its mempool
    const message = `Max operations (4) reached for sender ${wallet}`;
    proxy.rules.faults = { eth_sendUserOperation: { kind: "refuse", message, count: 3 } };
    const result = await withdraw(wallet, to, "888");
    proxy.rules.faults = {};
    await expectSideBySide(wallet, [result]); // confirmed, as the one operation it recorded
    const sends = sendsSince(from);
    expect(sends).toHaveLength(4); // deferred three times, then taken
    expect(new Set(sends.map((c) => JSON.stringify(c.params[0]))).size).toBe(1);
    expect(await balance(to)).toBe(888n);
  });
});

describe("a crash between recording a withdrawal and sending it", () => {
  afterAll(() => {
    proxy.rules.faults = {};
  });

  /**
   * Another process withdraws through the proxy, which holds its send: the withdrawal is recorded (with its key and
   * signed operation) and the process is killed before the bundler got anything.
   */
  async function crashWhileSending(wallet: Address, to: Address, amount: string): Promise<string> {
    const other = await startServiceChild(runtime.config.tableName, { ...LIMITS, CHAINS: chainsThroughProxy() });
    children.push(other);
    const from = proxy.calls.length;
    proxy.rules.faults = { eth_sendUserOperation: { kind: "hold" } };
    void withdraw(wallet, to, amount, other.url).catch(() => undefined);
    for (let i = 0; i < 600 && !proxy.calls.slice(from).some((c) => c.method === "eth_sendUserOperation"); i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    await other.kill();
    proxy.rules.faults = {};
    // read from the table as recorded (a GET would follow it up, and send it)
    const { items } = await listWithdrawals(alice.owner, 31337, wallet, ["pending"], { limit: 10 });
    expect(items).toEqual([
      expect.objectContaining({ status: "pending", userOpHash: expect.stringMatching(/^0x/), userOp: expect.any(String) }),
    ]);
    return items[0]!.id as string;
  }

  it(
    "loses nothing and blocks no later send: a later withdrawal confirms at once, the follow-up sends the recorded one",
    { timeout: 120_000 },
    async () => {
      const wallet = await newWallet();
      const deployed = await withdraw(wallet, someone(), "1");
      const [a, b] = [someone(), someone()];
      const crashedId = await crashWhileSending(wallet, a, "4242");
      expect(await includedOperations(wallet)).toHaveLength(1); // only the deploying one: nothing of the crashed was sent

      const later = await withdraw(wallet, b, "31"); // its own key: nothing to wait for
      expect(later.status).toBe("confirmed");
      await followUpPending(); // the background follow-up (every 5 s under npm start) sends the recorded operation
      await expectSideBySide(wallet, [deployed, await settled(wallet, crashedId), later]);
      expect(await balance(a)).toBe(4242n);
      expect(await balance(b)).toBe(31n);
    },
  );

  it(
    "of an undeployed wallet's deploying withdrawal: the follow-up's send deploys it and the waiting withdrawal follows",
    { timeout: 120_000 },
    async () => {
      const wallet = await newWallet();
      const [a, b] = [someone(), someone()];
      const crashedId = await crashWhileSending(wallet, a, "4242"); // held the deployment turn
      const later = withdraw(wallet, b, "31"); // waits for the account's code
      await new Promise((r) => setTimeout(r, 500));
      await followUpPending();
      const laterResult = await later;
      const crashed = await settled(wallet, crashedId);
      await expectSideBySide(wallet, [crashed, laterResult]);
      expect(await deployments(wallet)).toBe(1);
      expect(await balance(a)).toBe(4242n);
      expect(await balance(b)).toBe(31n);
    },
  );
});
