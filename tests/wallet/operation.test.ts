/**
 * The sender of workflow runs (shared/wallet/operation.ts walletSender) on the real devnet: user operations from a
 * registered wallet, signed by the controller only after the ownership check, sponsored by the VerifyingPaymaster
 * (or paid by the wallet), bundled by Alto and included by anvil. Effects are read back from the chain.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PutCommand } from "@aws-sdk/lib-dynamodb";
import { encodeFunctionData, getAddress, http, parseEther, type Address } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createBundlerClient, entryPoint07Abi } from "viem/account-abstraction";
import { stackEnv, useTestRuntime } from "../support/runtime";
import { signIn, type SignedIn } from "../support/auth";
import { deployTestToken, devnet, fundedAccount, includedOperations, setBalance } from "../support/chain";
import { createAccountThrough, deployHostileFactory } from "../support/hostile-factory";
import { createServiceApp } from "../../shared/service/app";
import { Keys } from "../../shared/store/item-keys";
import { erc20Transfer } from "../../shared/chain/account";
import { controlledAccountAbi } from "../../shared/chain/solidity/artifacts";
import { walletSender } from "../../shared/wallet/operation";
import { nonceKeyOf, stepIdentity } from "../../shared/chain/nonce";
import type { WalletRecord } from "../../shared/wallet/wallet";
import { useRuntime } from "../../shared/current-runtime";
import { getAccountAddress } from "../../shared/chain/userop-account";
import type { SendOutcome } from "../../shared/wallet/send";

const app = createServiceApp();
const DEAD_CHAIN = 424242; // configured, but its RPC and bundler refuse connections
let alice: SignedIn;

function chainsWith({ paymaster }: { paymaster: boolean }): string {
  const chains = JSON.parse(stackEnv().CHAINS!) as Record<string, unknown>[];
  const dev = chains.find((c) => c.chainId === 31337)!;
  return JSON.stringify([
    ...chains.map(({ paymaster: p, ...rest }) => (paymaster ? { ...rest, paymaster: p } : rest)),
    { chainId: DEAD_CHAIN, rpcUrl: "http://127.0.0.1:9/", bundlerUrl: "http://127.0.0.1:9/", factory: dev.factory },
  ]);
}

async function useRuntimeWith(paymaster: boolean) {
  await useTestRuntime({ CHAINS: chainsWith({ paymaster }), MAX_WALLETS_PER_OWNER: "100" });
  alice = await signIn(app);
}

beforeAll(() => useRuntimeWith(true));

let saltCounter = 0;
async function newWallet(who: SignedIn = alice, chainId = 31337): Promise<Address> {
  const res = await app.request("/wallets", {
    method: "POST",
    headers: { ...who.headers, "Content-Type": "application/json" },
    body: JSON.stringify({ salt: String(++saltCounter), chainId }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { address: Address }).address;
}

const someone = () => privateKeyToAccount(generatePrivateKey()).address;
const balance = (address: Address) => devnet().client.getBalance({ address });
const code = (address: Address) => devnet().client.getCode({ address });
/** How many user operations of `address` the EntryPoint included (each under a nonce key of its own, API.md §19). */
const included = async (address: Address) => (await includedOperations(address)).length;

function ok(outcome: SendOutcome): Extract<SendOutcome, { ok: true }> {
  expect(
    outcome,
    JSON.stringify(outcome, (_k, v) => (typeof v === "bigint" ? v.toString() : v)),
  ).toMatchObject({ ok: true });
  return outcome as Extract<SendOutcome, { ok: true }>;
}

describe("walletSender (sponsored by the paymaster)", () => {
  it("sends ETH in a first operation that deploys the account, with consistent hashes and gas", async () => {
    const wallet = await newWallet();
    const to = someone();
    await setBalance(wallet, parseEther("1"));
    expect(await code(wallet)).toBeUndefined();

    const send = walletSender({ owner: alice.owner, wallet });
    const first = ok(await send({ chainId: 31337, calls: [{ to, value: 123456789n }] }));
    expect(first.deployed).toBe(true);
    expect(await code(wallet)).not.toBeUndefined();
    expect(await balance(to)).toBe(123456789n);
    expect(await balance(wallet)).toBe(parseEther("1") - 123456789n); // the paymaster paid the gas

    const tx = await devnet().client.getTransactionReceipt({ hash: first.transactionHash });
    expect(tx.status).toBe("success");
    expect(tx.blockNumber).toBe(first.blockNumber);
    expect(first.userOpHash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(first.gasUsed).toBeGreaterThan(21_000n);
    expect(first.gasUsed).toBeLessThanOrEqual(tx.gasUsed + 100_000n);
    expect(first.gasPrice).toBe(first.totalGasCost / first.gasUsed);
    expect(first.gasPrice).toBeGreaterThan(0n);

    const second = ok(await send({ chainId: 31337, calls: [{ to, value: 1n }] }));
    expect(second.deployed).toBe(false);
    expect(second.gasUsed).toBeLessThan(first.gasUsed); // no deployment inside
    expect(await balance(to)).toBe(123456790n);
    expect(await included(wallet)).toBe(2);
  });

  it("transfers an ERC-20 through contract call data", async () => {
    const token = await deployTestToken();
    const wallet = await newWallet();
    const to = someone();
    await token.mint(wallet, 1000n);
    ok(
      await walletSender({ owner: alice.owner, wallet })({ chainId: 31337, calls: [{ to: token.address, data: erc20Transfer(to, 250n) }] }),
    );
    expect(await token.balanceOf(to)).toBe(250n);
    expect(await token.balanceOf(wallet)).toBe(750n);
  });

  it("batches two calls into one operation: one userOpHash, both effects", async () => {
    const token = await deployTestToken();
    const wallet = await newWallet();
    const [a, b] = [someone(), someone()];
    await token.mint(wallet, 1000n);
    await setBalance(wallet, parseEther("1"));
    const sent = ok(
      await walletSender({ owner: alice.owner, wallet })({
        chainId: 31337,
        calls: [
          { to: a, value: 5000n },
          { to: token.address, data: erc20Transfer(b, 400n) },
        ],
      }),
    );
    expect(await balance(a)).toBe(5000n);
    expect(await token.balanceOf(b)).toBe(400n);
    expect(await included(wallet)).toBe(1); // one operation
    const logs = await devnet().client.getContractEvents({
      address: devnet().entryPoint,
      abi: entryPoint07Abi,
      eventName: "UserOperationEvent",
      args: { userOpHash: sent.userOpHash },
      fromBlock: sent.blockNumber,
      toBlock: sent.blockNumber,
    });
    expect(logs).toHaveLength(1);
    expect(logs[0]!.args.success).toBe(true);
  });

  it("reverts the whole batch when one call reverts: USEROP_REVERTED and neither effect", async () => {
    const token = await deployTestToken();
    const wallet = await newWallet();
    const [a, b] = [someone(), someone()];
    await token.mint(wallet, 100n);
    await setBalance(wallet, parseEther("1"));
    const send = walletSender({ owner: alice.owner, wallet });
    ok(await send({ chainId: 31337, calls: [{ to: a, value: 1n }] })); // deployed first
    const outcome = await send({
      chainId: 31337,
      calls: [
        { to: a, value: 5000n },
        { to: token.address, data: erc20Transfer(b, 400n) }, // more than the wallet holds
      ],
    });
    expect(outcome).toMatchObject({ ok: false, errorCode: "USEROP_REVERTED", error: "user operation reverted: insufficient balance" });
    expect(await balance(a)).toBe(1n);
    expect(await token.balanceOf(b)).toBe(0n);
    expect(await token.balanceOf(wallet)).toBe(100n);
  });

  it("fails USEROP_REVERTED with hashes and gas when the operation is included and reverts (gasLimit too low)", async () => {
    const token = await deployTestToken();
    const wallet = await newWallet();
    const to = someone();
    await token.mint(wallet, 100n);
    const send = walletSender({ owner: alice.owner, wallet });
    ok(await send({ chainId: 31337, calls: [{ to: token.address, data: erc20Transfer(to, 1n) }] }));
    const outcome = await send({ chainId: 31337, calls: [{ to: token.address, data: erc20Transfer(to, 10n) }], gasLimit: 5_000n });
    expect(outcome).toMatchObject({ ok: false, errorCode: "USEROP_REVERTED" });
    if (outcome.ok) return;
    expect(outcome.error).toMatch(/reverted/);
    expect(outcome.userOpHash).toMatch(/^0x[0-9a-f]{64}$/);
    const tx = await devnet().client.getTransactionReceipt({ hash: outcome.transactionHash! });
    expect(tx.blockNumber).toBe(outcome.blockNumber);
    expect(outcome.gasUsed).toBeGreaterThan(0n);
    expect(outcome.gasPrice).toBe(outcome.totalGasCost! / outcome.gasUsed!);
    expect(await token.balanceOf(to)).toBe(1n); // only the first transfer
    expect(await included(wallet)).toBe(2); // included: its nonce was used
  });

  it("sends the whole balance for sendMax when the paymaster sponsors gas", async () => {
    const wallet = await newWallet();
    const to = someone();
    await setBalance(wallet, parseEther("0.5"));
    ok(await walletSender({ owner: alice.owner, wallet })({ chainId: 31337, calls: [{ to }], sendMax: true }));
    expect(await balance(to)).toBe(parseEther("0.5"));
    expect(await balance(wallet)).toBe(0n);
  });

  it("refuses a value above the balance, and sendMax of an empty wallet, with INSUFFICIENT_BALANCE and sends nothing", async () => {
    const wallet = await newWallet();
    const to = someone();
    await setBalance(wallet, 1000n);
    const send = walletSender({ owner: alice.owner, wallet });
    expect(
      await send({
        chainId: 31337,
        calls: [
          { to, value: 600n },
          { to, value: 600n },
        ],
      }),
    ).toMatchObject({
      ok: false,
      errorCode: "INSUFFICIENT_BALANCE",
      error: expect.stringContaining("1200 wei"),
    });
    const empty = await newWallet();
    expect(await walletSender({ owner: alice.owner, wallet: empty })({ chainId: 31337, calls: [{ to }], sendMax: true })).toMatchObject({
      ok: false,
      errorCode: "INSUFFICIENT_BALANCE",
    });
    expect(await balance(to)).toBe(0n);
    expect(await included(wallet)).toBe(0);
    expect(await code(wallet)).toBeUndefined();
  });

  it("refuses a runner that is not registered to the owner on that chain with WALLET_NOT_OWNED and sends nothing", async () => {
    const bob = await signIn(app);
    const bobs = await newWallet(bob);
    await setBalance(bobs, parseEther("1"));
    const to = someone();
    const outcome = await walletSender({ owner: alice.owner, wallet: bobs })({ chainId: 31337, calls: [{ to, value: 1n }] });
    expect(outcome).toMatchObject({ ok: false, errorCode: "WALLET_NOT_OWNED" });
    // registered, but on another chain only
    const elsewhere = await newWallet(alice, DEAD_CHAIN);
    expect(await walletSender({ owner: alice.owner, wallet: elsewhere })({ chainId: 31337, calls: [{ to, value: 1n }] })).toMatchObject({
      ok: false,
      errorCode: "WALLET_NOT_OWNED",
    });
    expect(await balance(to)).toBe(0n);
    expect(await balance(bobs)).toBe(parseEther("1"));
    expect(await included(bobs)).toBe(0);
  });

  it("refuses a wallet of a hostile factory naming another owner's account (WALLET_NOT_OWNED): no wei moves", async () => {
    const d = devnet();
    const victimOwner = someone();
    const victim = await getAccountAddress(d.client, { factory: d.factory, owner: victimOwner, salt: 0n });
    await createAccountThrough(d.factory, victimOwner, 0n);
    await setBalance(victim, parseEther("1"));
    const hostile = await deployHostileFactory({ claim: victim, victim: { owner: victimOwner, salt: 0n } });
    const attacker = await signIn(app);
    // a record as one registered before the ownership checks existed: the hostile factory's claim, then the default factory
    for (const factory of [hostile, d.factory]) {
      const { db, config, now } = useRuntime();
      const record: WalletRecord = {
        owner: attacker.owner,
        chainId: 31337,
        address: victim,
        salt: "0",
        factoryAddress: getAddress(factory),
        isHidden: false,
        createdAt: now(),
      };
      await db.send(
        new PutCommand({
          TableName: config.tableName,
          Item: { ...Keys.wallet(attacker.owner, 31337, victim), type: "wallet", v: 1, ...record },
        }),
      );
      const to = someone();
      const outcome = await walletSender({ owner: attacker.owner, wallet: victim })({ chainId: 31337, calls: [{ to }], sendMax: true });
      expect(outcome).toMatchObject({ ok: false, errorCode: "WALLET_NOT_OWNED" });
      expect(await balance(to)).toBe(0n);
    }
    expect(await balance(victim)).toBe(parseEther("1"));
    expect(await included(victim)).toBe(0);
  });

  it("lands concurrent sends from one wallet side by side, each under a nonce key of its own, all included", async () => {
    const wallet = await newWallet();
    await setBalance(wallet, parseEther("1"));
    const send = walletSender({ owner: alice.owner, wallet });
    const recipients = Array.from({ length: 5 }, someone);
    const outcomes = await Promise.all(recipients.map((to, i) => send({ chainId: 31337, calls: [{ to, value: BigInt(i + 1) }] })));
    const sent = outcomes.map(ok);
    expect(new Set(sent.map((s) => s.userOpHash)).size).toBe(5);
    expect(sent.filter((s) => s.deployed)).toHaveLength(1);
    const ops = await includedOperations(wallet);
    expect(ops).toHaveLength(5);
    expect(new Set(ops.map((o) => o.key)).size).toBe(5);
    expect(ops.every((o) => o.sequence === 0n && o.key !== 0n)).toBe(true);
    for (const [i, to] of recipients.entries()) expect(await balance(to)).toBe(BigInt(i + 1));
  });

  it("keys a step's operation by execution, node and iteration: a repeat sends nothing, another iteration is its own", async () => {
    const wallet = await newWallet();
    await setBalance(wallet, parseEther("1"));
    const to = someone();
    const send = walletSender({ owner: alice.owner, wallet, executionId: "01JEXECUTION0000000000000A" });
    ok(await send({ chainId: 31337, calls: [{ to, value: 7n }], nodeId: "pay", iteration: 0 }));
    const again = await send({ chainId: 31337, calls: [{ to, value: 7n }], nodeId: "pay", iteration: 0 });
    expect(again).toMatchObject({
      ok: false,
      errorCode: "USEROP_REJECTED",
      error: expect.stringMatching(/used already.*nothing was sent again/),
    });
    ok(await send({ chainId: 31337, calls: [{ to, value: 7n }], nodeId: "pay", iteration: 1 }));
    ok(await send({ chainId: 31337, calls: [{ to, value: 7n }], nodeId: "other" }));
    expect(await balance(to)).toBe(21n);
    const ops = await includedOperations(wallet);
    expect(ops.map((o) => o.key)).toEqual([
      nonceKeyOf(stepIdentity("01JEXECUTION0000000000000A", "pay", 0)),
      nonceKeyOf(stepIdentity("01JEXECUTION0000000000000A", "pay", 1)),
      nonceKeyOf(stepIdentity("01JEXECUTION0000000000000A", "other")),
    ]);
  });

  it("reports a bundler refusal as USEROP_REJECTED with its message (the owner removed the controller)", async () => {
    const owner = await fundedAccount();
    const dan = await signIn(app, { privateKey: owner.privateKey });
    const wallet = await newWallet(dan);
    await setBalance(wallet, parseEther("1"));
    const send = walletSender({ owner: dan.owner, wallet });
    ok(await send({ chainId: 31337, calls: [{ to: someone(), value: 1n }] }));
    const tx = await owner.wallet.writeContract({
      address: wallet,
      abi: controlledAccountAbi,
      functionName: "setController",
      args: ["0x0000000000000000000000000000000000000000"],
    });
    await devnet().client.waitForTransactionReceipt({ hash: tx });
    const outcome = await send({ chainId: 31337, calls: [{ to: someone(), value: 1n }] });
    expect(outcome).toMatchObject({ ok: false, errorCode: "USEROP_REJECTED", error: expect.stringMatching(/AA24|signature/i) });
    expect(await included(wallet)).toBe(1);
  });

  it("answers RPC_ERROR when the chain's RPC and bundler cannot be reached", async () => {
    const wallet = await newWallet(alice, DEAD_CHAIN); // the built-in factory derives offline
    const outcome = await walletSender({ owner: alice.owner, wallet })({ chainId: DEAD_CHAIN, calls: [{ to: someone(), value: 1n }] });
    expect(outcome).toMatchObject({ ok: false, errorCode: "RPC_ERROR" });
  });
});

describe("walletSender (the wallet pays its own gas)", () => {
  beforeAll(() => useRuntimeWith(false));
  afterAll(() => useRuntimeWith(true));

  it("refuses a value the wallet holds but cannot also pay gas for (INSUFFICIENT_BALANCE), sending nothing", async () => {
    const wallet = await newWallet();
    await setBalance(wallet, 1000n);
    const to = someone();
    const outcome = await walletSender({ owner: alice.owner, wallet })({ chainId: 31337, calls: [{ to, value: 1000n }] });
    expect(outcome).toMatchObject({ ok: false, errorCode: "INSUFFICIENT_BALANCE", error: expect.stringMatching(/gas/) });
    expect(await balance(to)).toBe(0n);
    expect(await included(wallet)).toBe(0);
  });

  it("sends the balance minus the operation's maximum gas cost for sendMax, leaving the wallet empty", async () => {
    const wallet = await newWallet();
    await setBalance(wallet, parseEther("0.2"));
    const to = someone();
    const sent = ok(await walletSender({ owner: alice.owner, wallet })({ chainId: 31337, calls: [{ to }], sendMax: true }));
    const received = await balance(to);
    expect(received).toBeGreaterThan(0n);
    expect(received).toBeLessThan(parseEther("0.2"));
    expect(sent.totalGasCost).toBeLessThanOrEqual(parseEther("0.2") - received); // the rest was the prefund
    expect(await balance(wallet)).toBe(0n);
  });

  it("pays for a plain call out of the wallet's balance", async () => {
    const wallet = await newWallet();
    await setBalance(wallet, parseEther("0.2"));
    const to = someone();
    const sent = ok(
      await walletSender({ owner: alice.owner, wallet })({
        chainId: 31337,
        calls: [
          {
            to,
            value: 7n,
            data: encodeFunctionData({
              abi: [{ type: "function", name: "ping", inputs: [], outputs: [], stateMutability: "payable" }],
              functionName: "ping",
            }),
          },
        ],
      }),
    );
    expect(await balance(to)).toBe(7n);
    // the prefund left the wallet; what was not used went to its EntryPoint deposit
    const deposit = await devnet().client.readContract({
      address: devnet().entryPoint,
      abi: entryPoint07Abi,
      functionName: "balanceOf",
      args: [wallet],
    });
    expect((await balance(wallet)) + deposit).toBe(parseEther("0.2") - 7n - sent.totalGasCost);
  });
});

describe("walletSender (no receipt in time)", () => {
  beforeAll(async () => {
    await useTestRuntime({ CHAINS: chainsWith({ paymaster: true }), MAX_WALLETS_PER_OWNER: "100", USEROP_RECEIPT_WAIT_MS: "0" });
    alice = await signIn(app);
  });
  afterAll(() => useRuntimeWith(true));

  it("answers USEROP_TIMEOUT with the userOpHash; the operation still lands, and the wallet's next one follows it", async () => {
    const wallet = await newWallet();
    await setBalance(wallet, parseEther("1"));
    const [a, b] = [someone(), someone()];
    const send = walletSender({ owner: alice.owner, wallet });
    const first = await send({ chainId: 31337, calls: [{ to: a, value: 10n }] });
    expect(first).toMatchObject({ ok: false, errorCode: "USEROP_TIMEOUT", error: expect.stringContaining("no receipt") });
    if (first.ok) return;
    expect(first.userOpHash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(first.transactionHash).toBeUndefined();
    const bundler = createBundlerClient({ transport: http(devnet().bundlerUrl), pollingInterval: 100 });
    const landed = await bundler.waitForUserOperationReceipt({ hash: first.userOpHash!, timeout: 30_000 });
    expect(landed.success).toBe(true);
    expect(await balance(a)).toBe(10n);

    const second = await send({ chainId: 31337, calls: [{ to: b, value: 20n }] });
    if (!second.ok) await bundler.waitForUserOperationReceipt({ hash: second.userOpHash!, timeout: 30_000 });
    expect(await balance(b)).toBe(20n);
    expect(await included(wallet)).toBe(2);
  });
});
