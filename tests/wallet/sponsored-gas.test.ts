/**
 * Sponsored-gas budgets on the real devnet (API.md §18.5): withdrawals and workflow steps are sponsored by the
 * VerifyingPaymaster while the owner's and the chain's budgets take their gas limits, paid by the wallet past
 * either, and refused with INSUFFICIENT_BALANCE (nothing sent) when the wallet cannot pay. The bundler is reached
 * through a recording proxy, so a test can see what was (not) sent and make the bundler refuse a send.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScanCommand } from "@aws-sdk/lib-dynamodb";
import { parseEther, type Address, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { entryPoint07Abi } from "viem/account-abstraction";
import { stackEnv, useTestRuntime } from "../support/runtime";
import { signIn, type SignedIn } from "../support/auth";
import { appCall, NO_WORKFLOW_COUNTS } from "../support/client";
import { startUpstream, type Upstream } from "../support/upstream";
import { deployTestToken, devnet, setBalance } from "../support/chain";
import { createServiceApp } from "../../shared/service/app";
import { Keys } from "../../shared/store/item-keys";
import { sponsoredGasOf } from "../../shared/wallet/sponsorship";
import { walletSender } from "../../shared/wallet/operation";
import { useRuntime } from "../../shared/current-runtime";
import { createBundler } from "../../shared/chain/userop-bundler";

const app = createServiceApp();

// ---------------------------------------------------------------------------------------------
// A recording proxy in front of Alto

let proxy: Upstream;
const seen: string[] = [];
let refuseSends = false;
/**
 * While set, the bundler simulates estimates of this sender on a chain where it holds nothing: the proxy empties its
 * balance for the time of each eth_estimateUserOperationGas and restores it before answering. That is the bundler's
 * view trailing ours, as seen under load (its simulation read a state without the wallet's funds).
 */
let staleSender: Address | undefined;

beforeAll(async () => {
  const target = devnet().bundlerUrl;
  proxy = await startUpstream((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString();
      const calls = ([] as { id: unknown; method: string; params?: unknown[] }[]).concat(JSON.parse(body));
      seen.push(...calls.map((c) => c.method));
      if (refuseSends && calls.length === 1 && calls[0]!.method === "eth_sendUserOperation") {
        res.setHeader("Content-Type", "application/json");
        res.end(JSON.stringify({ jsonrpc: "2.0", id: calls[0]!.id, error: { code: -32602, message: "refused by the test's proxy" } }));
        return;
      }
      const stale = staleSender;
      const hidden =
        stale &&
        calls.some(
          (c) =>
            c.method === "eth_estimateUserOperationGas" &&
            (c.params?.[0] as { sender?: string })?.sender?.toLowerCase() === stale.toLowerCase(),
        );
      const forward = async () => {
        const held = hidden ? await balance(stale) : undefined;
        if (hidden) await setBalance(stale, 0n);
        try {
          const answer = await fetch(target, { method: "POST", headers: { "Content-Type": "application/json" }, body });
          return { status: answer.status, text: await answer.text() };
        } finally {
          if (hidden) await setBalance(stale, held!);
        }
      };
      forward()
        .then(({ status, text }) => {
          res.statusCode = status;
          res.setHeader("Content-Type", "application/json");
          res.end(text);
        })
        .catch(() => res.destroy());
    });
  });
});

afterAll(() => proxy?.close());

const sends = () => seen.filter((m) => m === "eth_sendUserOperation").length;

function proxiedChains(): string {
  const chains = JSON.parse(stackEnv().CHAINS!) as Record<string, unknown>[];
  return JSON.stringify(chains.map((c) => (c.chainId === 31337 ? { ...c, bundlerUrl: `${proxy.url}/` } : c)));
}

async function budgets(perOwner: string, perChain: string) {
  await useTestRuntime({
    CHAINS: proxiedChains(),
    MAX_WALLETS_PER_OWNER: "100",
    SPONSORED_GAS_PER_OWNER_PER_DAY: perOwner,
    SPONSORED_GAS_PER_CHAIN_PER_DAY: perChain,
  });
}

// ---------------------------------------------------------------------------------------------
// Helpers

const call = appCall(app);

let saltCounter = 0;
async function newWallet(who: SignedIn): Promise<Address> {
  const { status, body } = await call(who, "POST", "/wallets", { salt: String(++saltCounter) });
  expect(status).toBe(201);
  return body.address;
}

const someone = () => privateKeyToAccount(generatePrivateKey()).address;
const balance = (address: Address) => devnet().client.getBalance({ address });
const nonceOf = (address: Address) =>
  devnet().client.readContract({ address: devnet().entryPoint, abi: entryPoint07Abi, functionName: "getNonce", args: [address, 0n] });

/** The operation as the bundler received it. */
async function sentOperation(hash: Hex) {
  const found = await createBundler(devnet().bundlerUrl).getUserOperation({ hash });
  return found.userOperation as unknown as Parameters<typeof sponsoredGasOf>[0] & { paymaster?: Address | null };
}

/** Gas counted in the counters under `prefix` (every bucket). */
async function counted(prefix: string) {
  const { db, config } = useRuntime();
  const out = await db.send(new ScanCommand({ TableName: config.tableName, ConsistentRead: true }));
  const items = (out.Items ?? []).filter((i) => String(i.pk).startsWith(prefix));
  return {
    items: items.length,
    gas: items.reduce((sum, i) => sum + Object.values(i.hours ?? {}).reduce((a: number, g) => a + Number(g), 0), 0),
  };
}
const ownerCounter = (who: SignedIn) => Keys.sponsoredGasOwner(31337, who.owner).pk;
const chainCounters = "SPONSOR#31337#SHARD#";

/** A withdrawal of `amount` wei: its result and what it took from the wallet. */
async function withdraw(who: SignedIn, wallet: Address, amount: bigint) {
  const before = await balance(wallet);
  const res = await call(who, "POST", `/wallets/${wallet}:withdraw`, { recipientAddress: someone(), amount: String(amount), token: "ETH" });
  expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: "confirmed" });
  const op = await sentOperation(res.body.userOpHash);
  return { res, op, took: before - (await balance(wallet)) };
}

// ---------------------------------------------------------------------------------------------

describe("an owner's budget", () => {
  let alice: SignedIn;
  let bob: SignedIn;
  beforeAll(async () => {
    await budgets("1000000", "unlimited");
    [alice, bob] = [await signIn(app), await signIn(app)];
  });

  it("sponsors withdrawals while the budget takes their gas limits, then the wallet pays; another owner is still sponsored", async () => {
    const wallet = await newWallet(alice);
    await setBalance(wallet, parseEther("1"));
    let sponsoredGas = 0n;
    let paidByWallet: Awaited<ReturnType<typeof withdraw>> | undefined;
    for (let i = 0; i < 10 && !paidByWallet; i++) {
      const sent = await withdraw(alice, wallet, 1000n);
      if (sent.op.paymaster) {
        expect(sent.took).toBe(1000n); // sponsored: the wallet lost exactly the amount
        sponsoredGas += sponsoredGasOf(sent.op);
        // counted at the gas limits the operation was sponsored for
        expect((await counted(ownerCounter(alice))).gas).toBe(Number(sponsoredGas));
      } else {
        paidByWallet = sent;
      }
    }
    expect(sponsoredGas).toBeGreaterThan(0n); // the first was sponsored
    expect(paidByWallet).toBeDefined();
    expect(paidByWallet!.took).toBeGreaterThan(1000n); // amount + gas
    expect(sponsoredGas).toBeLessThanOrEqual(1_000_000n);
    expect((await counted(ownerCounter(alice))).gas).toBe(Number(sponsoredGas)); // the unsponsored one counts nothing

    const other = await newWallet(bob);
    await setBalance(other, parseEther("1"));
    const bobs = await withdraw(bob, other, 1000n);
    expect(bobs.op.paymaster).toBeTruthy();
    expect(bobs.took).toBe(1000n);
  });

  it("past the budget, a wallet that cannot pay the gas is refused 400 INSUFFICIENT_BALANCE and nothing is sent", async () => {
    const wallet = await newWallet(alice); // alice's budget is used up by the test before
    await setBalance(wallet, 1000n); // exactly the amount: the balance preflight passes, the gas cannot be paid
    const sendsBefore = sends();
    const res = await call(alice, "POST", `/wallets/${wallet}:withdraw`, { recipientAddress: someone(), amount: "1000", token: "ETH" });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("INSUFFICIENT_BALANCE");
    expect(res.body.detail ?? res.body.message ?? "").toMatch(/sponsored-gas budget/);
    expect(sends()).toBe(sendsBefore); // the bundler saw no operation
    expect(await nonceOf(wallet)).toBe(0n);
    expect(await balance(wallet)).toBe(1000n);
    expect((await call(alice, "GET", `/wallets/${wallet}/withdrawals`)).body.data).toEqual([]);

    // a larger amount, exactly the balance: the simulation could pay its (1 wei per gas) prefund, the real operation not
    const rich = await newWallet(alice);
    await setBalance(rich, parseEther("0.1"));
    const all = await call(alice, "POST", `/wallets/${rich}:withdraw`, {
      recipientAddress: someone(),
      amount: parseEther("0.1").toString(),
      token: "ETH",
    });
    expect(all.status, JSON.stringify(all.body)).toBe(400);
    expect(all.body.code).toBe("INSUFFICIENT_BALANCE");
    expect(sends()).toBe(sendsBefore);
    expect(await nonceOf(rich)).toBe(0n);

    // an ERC-20 withdrawal from a wallet without ETH: the same
    const token = await deployTestToken();
    const holder = await newWallet(alice);
    await token.mint(holder, 500n);
    const tokens = await call(alice, "POST", `/wallets/${holder}:withdraw`, {
      recipientAddress: someone(),
      amount: "500",
      token: token.address,
    });
    expect(tokens.status).toBe(400);
    expect(tokens.body.code).toBe("INSUFFICIENT_BALANCE");
    expect(sends()).toBe(sendsBefore);
    expect(await token.balanceOf(holder)).toBe(500n);
  });

  it("past the budget, a workflow step is paid by the wallet, or fails INSUFFICIENT_BALANCE with nothing sent", async () => {
    const wallet = await newWallet(alice);
    await setBalance(wallet, parseEther("1"));
    const to = someone();
    const outcome = await walletSender({ owner: alice.owner, wallet })({ chainId: 31337, calls: [{ to, value: 1000n }] });
    expect(outcome).toMatchObject({ ok: true });
    expect(await balance(to)).toBe(1000n);
    expect(parseEther("1") - (await balance(wallet))).toBeGreaterThan(1000n);

    const poor = await newWallet(alice);
    await setBalance(poor, 1000n);
    const sendsBefore = sends();
    const refused = await walletSender({ owner: alice.owner, wallet: poor })({ chainId: 31337, calls: [{ to, value: 1000n }] });
    expect(refused).toMatchObject({ ok: false, errorCode: "INSUFFICIENT_BALANCE" });
    await setBalance(poor, parseEther("0.1"));
    const all = await walletSender({ owner: alice.owner, wallet: poor })({ chainId: 31337, calls: [{ to, value: parseEther("0.1") }] });
    expect(all).toMatchObject({ ok: false, errorCode: "INSUFFICIENT_BALANCE" });
    expect(sends()).toBe(sendsBefore);
    expect(await nonceOf(poor)).toBe(0n);
  });
});

describe("a bundler whose view of the wallet trails ours", () => {
  let alice: SignedIn;
  beforeAll(async () => {
    await budgets("1", "unlimited"); // asked, never taken: every operation is past the budget
    alice = await signIn(app);
  });

  it("past the budget, a wallet that cannot pay is refused INSUFFICIENT_BALANCE, nothing sent", async () => {
    const to = someone();
    const sendsBefore = sends();
    try {
      // a workflow step: 1000 wei of 1000 (the gas cannot be paid), then 0.1 ETH of 0.1 ETH
      for (const amount of [1000n, parseEther("0.1")]) {
        const poor = await newWallet(alice);
        await setBalance(poor, amount);
        staleSender = poor;
        const refused = await walletSender({ owner: alice.owner, wallet: poor })({ chainId: 31337, calls: [{ to, value: amount }] });
        expect(refused).toMatchObject({ ok: false, errorCode: "INSUFFICIENT_BALANCE" });
        expect(await nonceOf(poor)).toBe(0n);
        expect(await balance(poor)).toBe(amount);
      }
      // a withdrawal: the same
      const poor = await newWallet(alice);
      await setBalance(poor, 1000n);
      staleSender = poor;
      const res = await call(alice, "POST", `/wallets/${poor}:withdraw`, { recipientAddress: to, amount: "1000", token: "ETH" });
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.code).toBe("INSUFFICIENT_BALANCE");
      expect((await call(alice, "GET", `/wallets/${poor}/withdrawals`)).body.data).toEqual([]);
    } finally {
      staleSender = undefined;
    }
    expect(sends()).toBe(sendsBefore); // the bundler saw no operation
  });
});

describe("the chain's budget", () => {
  it("sponsors all owners together up to it, then wallets pay", async () => {
    await budgets("unlimited", "1000000");
    const owners = [await signIn(app), await signIn(app), await signIn(app), await signIn(app), await signIn(app)];
    let sponsoredGas = 0n;
    let unsponsored = 0;
    for (const who of owners) {
      const wallet = await newWallet(who);
      await setBalance(wallet, parseEther("1"));
      const sent = await withdraw(who, wallet, 1000n);
      if (sent.op.paymaster) {
        expect(unsponsored).toBe(0); // once past the budget, nobody is sponsored
        expect(sent.took).toBe(1000n);
        sponsoredGas += sponsoredGasOf(sent.op);
      } else {
        unsponsored += 1;
        expect(sent.took).toBeGreaterThan(1000n);
      }
    }
    expect(sponsoredGas).toBeGreaterThan(0n);
    expect(unsponsored).toBeGreaterThan(0);
    expect((await counted(chainCounters)).gas).toBe(Number(sponsoredGas));
    expect((await counted("SPONSOR#31337#OWNER#")).items).toBe(0); // unlimited per owner: never written
  });
});

describe("giving back", () => {
  it("an operation the bundler refuses gives its reservation back", async () => {
    await budgets("50000000", "5000000000");
    const carol = await signIn(app);
    const wallet = await newWallet(carol);
    await setBalance(wallet, parseEther("1"));
    const first = await withdraw(carol, wallet, 1000n);
    const after = (await counted(ownerCounter(carol))).gas;
    expect(after).toBe(Number(sponsoredGasOf(first.op)));
    refuseSends = true;
    try {
      const res = await call(carol, "POST", `/wallets/${wallet}:withdraw`, { recipientAddress: someone(), amount: "1000", token: "ETH" });
      expect(res.body).toMatchObject({ status: "failed", message: expect.stringMatching(/refused by the test's proxy/) });
      const step = await walletSender({ owner: carol.owner, wallet })({ chainId: 31337, calls: [{ to: someone(), value: 1n }] });
      expect(step).toMatchObject({ ok: false, errorCode: "USEROP_REJECTED" });
    } finally {
      refuseSends = false;
    }
    expect((await counted(ownerCounter(carol))).gas).toBe(after);
    expect((await counted(chainCounters)).gas).toBe(after);
  });
});

describe("0 and unlimited", () => {
  it("0: never sponsored, nothing counted", async () => {
    for (const [perOwner, perChain] of [
      ["0", "5000000000"],
      ["50000000", "0"],
    ] as const) {
      await budgets(perOwner, perChain);
      const dan = await signIn(app);
      const wallet = await newWallet(dan);
      await setBalance(wallet, parseEther("1"));
      const sent = await withdraw(dan, wallet, 1000n);
      expect(sent.op.paymaster ?? undefined).toBeUndefined();
      expect(sent.took).toBeGreaterThan(1000n);
      expect((await counted("SPONSOR#")).items).toBe(0);
    }
  });

  it("unlimited: always sponsored, no table writes at all", async () => {
    await budgets("unlimited", "unlimited");
    const erin = await signIn(app);
    const wallet = await newWallet(erin);
    await setBalance(wallet, parseEther("1"));
    for (let i = 0; i < 2; i++) {
      const sent = await withdraw(erin, wallet, 1000n);
      expect(sent.op.paymaster).toBeTruthy();
      expect(sent.took).toBe(1000n);
    }
    expect((await counted("SPONSOR#")).items).toBe(0);
  });
});

describe("GET /wallets", () => {
  it("answers as before: the owner's use of the day is not exposed", async () => {
    await budgets("1", "unlimited");
    const fay = await signIn(app);
    const wallet = await newWallet(fay);
    const listed = await call(fay, "GET", "/wallets");
    expect(listed.status).toBe(200);
    expect(listed.body).toEqual({
      data: [
        {
          address: wallet,
          salt: String(saltCounter),
          factoryAddress: devnet().factory,
          isHidden: false,
          ...NO_WORKFLOW_COUNTS,
        },
      ],
    });
  });
});
