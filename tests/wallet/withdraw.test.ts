/**
 * Withdrawals on the real devnet: user operations signed by the service's controller, sponsored by the
 * VerifyingPaymaster, bundled by Alto and included by anvil. Balances are checked on chain.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { getAddress, parseEther, zeroAddress, type Address } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { useTestRuntime, stackEnv } from "../support/runtime";
import { signIn, type SignedIn } from "../support/auth";
import { deployTestToken, devnet, fundedAccount, includedOperations, setBalance } from "../support/chain";
import { nonceKeyOf, withdrawalIdentity } from "../../shared/chain/nonce";
import { createServiceApp } from "../../shared/service/app";
import { controlledAccountAbi } from "../../shared/chain/solidity/artifacts";
import { encodeFunctionData, getAddress as checksum } from "viem";
import { executeUserOperation } from "../../shared/chain/userop";
import { createBundler } from "../../shared/chain/userop-bundler";
import { localDigestSigner } from "../../shared/chain/userop-signer";

const app = createServiceApp();
let alice: SignedIn;

beforeAll(async () => {
  await useTestRuntime({ MAX_WALLETS_PER_OWNER: "100" });
  alice = await signIn(app);
});

async function call(who: SignedIn, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await app.request(path, {
    method,
    headers: { ...who.headers, ...headers, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

let saltCounter = 0;
async function newWallet(who: SignedIn = alice): Promise<Address> {
  const { status, body } = await call(who, "POST", "/wallets", { salt: String(++saltCounter) });
  expect(status).toBe(201);
  return body.address;
}

const recipient = () => privateKeyToAccount(generatePrivateKey()).address;
const balance = (address: Address) => devnet().client.getBalance({ address });

describe("POST /wallets/{address}:withdraw (sponsored by the paymaster)", () => {
  it("sends ETH in the first operation, which deploys the account, and moves exactly the amount", async () => {
    const wallet = await newWallet();
    const to = recipient();
    await setBalance(wallet, parseEther("1"));
    expect(await devnet().client.getCode({ address: wallet })).toBeUndefined();

    const res = await call(alice, "POST", `/wallets/${wallet}:withdraw`, { recipientAddress: to, amount: "123456789", token: "ETH" });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      status: "confirmed",
      chainId: 31337,
      smartWalletAddress: wallet,
      recipientAddress: to,
      amount: "123456789",
      token: "ETH",
    });
    expect(res.body.id).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(res.body.userOpHash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(res.body.transactionHash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(res.body.message).toBeUndefined();
    expect(await devnet().client.getCode({ address: wallet })).not.toBeUndefined();
    expect(await balance(to)).toBe(123456789n);
    // the paymaster paid the gas: the wallet lost exactly the amount
    expect(await balance(wallet)).toBe(parseEther("1") - 123456789n);
    // sent under a nonce key of its own (API.md §19): key 0, which getNonce reports, is untouched
    expect((await call(alice, "GET", `/wallets/${wallet}:getNonce`)).body).toEqual({ nonce: "0" });
    expect(await includedOperations(wallet)).toEqual([
      expect.objectContaining({ userOpHash: res.body.userOpHash, key: nonceKeyOf(withdrawalIdentity(res.body.id)), sequence: 0n }),
    ]);
  });

  it('sends the whole balance for "max" when the paymaster sponsors gas', async () => {
    const wallet = await newWallet();
    const to = recipient();
    await setBalance(wallet, parseEther("0.5"));
    const res = await call(alice, "POST", `/wallets/${wallet}:withdraw`, { recipientAddress: to, amount: "max", token: "ETH" });
    expect(res.body).toMatchObject({ status: "confirmed", amount: parseEther("0.5").toString() });
    expect(await balance(to)).toBe(parseEther("0.5"));
    expect(await balance(wallet)).toBe(0n);
  });

  it("sends an ERC-20 amount and an ERC-20 max", async () => {
    const token = await deployTestToken();
    const wallet = await newWallet();
    const to = recipient();
    await token.mint(wallet, 1000n);
    const part = await call(alice, "POST", `/wallets/${wallet}:withdraw`, {
      recipientAddress: to,
      amount: "250",
      token: token.address.toLowerCase(),
    });
    expect(part.body).toMatchObject({ status: "confirmed", amount: "250", token: getAddress(token.address) });
    expect(await token.balanceOf(to)).toBe(250n);
    const rest = await call(alice, "POST", `/wallets/${wallet}:withdraw`, { recipientAddress: to, amount: "max", token: token.address });
    expect(rest.body).toMatchObject({ status: "confirmed", amount: "750" });
    expect(await token.balanceOf(to)).toBe(1000n);
    expect(await token.balanceOf(wallet)).toBe(0n);
  });

  it("returns the first result for a repeated Idempotency-Key and sends nothing twice", async () => {
    const wallet = await newWallet();
    const to = recipient();
    await setBalance(wallet, parseEther("1"));
    const body = { recipientAddress: to, amount: "5000", token: "ETH" };
    const first = await call(alice, "POST", `/wallets/${wallet}:withdraw`, body, { "Idempotency-Key": "withdraw-1" });
    const again = await call(alice, "POST", `/wallets/${wallet}:withdraw`, body, { "Idempotency-Key": "withdraw-1" });
    expect(first.body.status).toBe("confirmed");
    expect(again.status).toBe(200);
    expect(again.headers.get("Idempotency-Replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
    expect(await balance(to)).toBe(5000n);
    const other = await call(
      alice,
      "POST",
      `/wallets/${wallet}:withdraw`,
      { ...body, amount: "6000" },
      { "Idempotency-Key": "withdraw-1" },
    );
    expect(other.status).toBe(422);
    expect(other.body.code).toBe("IDEMPOTENCY_KEY_MISMATCH");
    const bad = await call(alice, "POST", `/wallets/${wallet}:withdraw`, body, { "Idempotency-Key": "has space" });
    expect(bad.body.errors[0].path).toBe("header.Idempotency-Key");
  });

  it("does not remember a preflight 400 under the key", async () => {
    const wallet = await newWallet();
    const body = { recipientAddress: recipient(), amount: "1000", token: "ETH" };
    const poor = await call(alice, "POST", `/wallets/${wallet}:withdraw`, body, { "Idempotency-Key": "k-preflight" });
    expect(poor.body.code).toBe("INSUFFICIENT_BALANCE");
    await setBalance(wallet, 10_000n);
    const rich = await call(alice, "POST", `/wallets/${wallet}:withdraw`, body, { "Idempotency-Key": "k-preflight" });
    expect(rich.body.status).toBe("confirmed");
  });
});

describe("withdraw refusals", () => {
  it("answers the specific codes in API.md's order", async () => {
    const wallet = await newWallet();
    const ok = { recipientAddress: recipient(), amount: "1", token: "ETH" };
    const cases: [Record<string, unknown>, number, string][] = [
      [{ amount: "1", token: "ETH" }, 400, "WITHDRAW_MISSING_FIELDS"],
      [{ ...ok, recipientAddress: "0x1234", amount: "bad" }, 400, "WITHDRAW_BAD_RECIPIENT"],
      [{ ...ok, recipientAddress: zeroAddress }, 400, "WITHDRAW_BAD_RECIPIENT"],
      [{ ...ok, recipientAddress: wallet.toLowerCase() }, 400, "WITHDRAW_BAD_RECIPIENT"],
      [{ ...ok, amount: "0" }, 400, "WITHDRAW_BAD_AMOUNT"],
      [{ ...ok, amount: "-5" }, 400, "WITHDRAW_BAD_AMOUNT"],
      [{ ...ok, amount: 5 }, 400, "WITHDRAW_BAD_AMOUNT"],
      [{ ...ok, token: "eth" }, 400, "WITHDRAW_BAD_TOKEN"],
      [{ ...ok, token: zeroAddress }, 400, "WITHDRAW_BAD_TOKEN"],
      [{ ...ok, extra: 1 }, 400, "VALIDATION_FAILED"],
      [{ ...ok, chainId: "1" }, 400, "VALIDATION_FAILED"],
      [{ ...ok, chainId: 5 }, 400, "UNSUPPORTED_CHAIN"],
      [{ ...ok, token: "0x000000000000000000000000000000000000dEaD" }, 400, "WITHDRAW_BAD_TOKEN"],
      [ok, 400, "INSUFFICIENT_BALANCE"],
      [{ ...ok, amount: "max" }, 400, "INSUFFICIENT_BALANCE"],
    ];
    for (const [body, status, code] of cases) {
      const res = await call(alice, "POST", `/wallets/${wallet}:withdraw`, body);
      expect({ body, status: res.status, code: res.body.code }).toEqual({ body, status, code });
    }
    expect((await call(alice, "GET", `/wallets/${wallet}/withdrawals`)).body.data).toEqual([]);
  });

  it("reports a bundler rejection as failed with its message, recorded without a userOpHash", async () => {
    // Wallets pay their own gas on this chain; one holding exactly the amount cannot pay the prefund.
    await useTestRuntime({ CHAINS: withoutPaymaster(), MAX_WALLETS_PER_OWNER: "100" });
    const bob = await signIn(app);
    const wallet = await newWallet(bob);
    await setBalance(wallet, 1000n);
    const res = await call(bob, "POST", `/wallets/${wallet}:withdraw`, { recipientAddress: recipient(), amount: "1000", token: "ETH" });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe("failed");
    expect(res.body.message).toMatch(/AA21|prefund|funds/i);
    expect(res.body.userOpHash).toBeUndefined();
    const listed = await call(bob, "GET", `/wallets/${wallet}/withdrawals`);
    expect(listed.body.data).toEqual([res.body]);
    await useTestRuntime({ MAX_WALLETS_PER_OWNER: "100" });
  });

  it('leaves exactly the gas for "max" when the wallet pays its own gas', async () => {
    await useTestRuntime({ CHAINS: withoutPaymaster(), MAX_WALLETS_PER_OWNER: "100" });
    const carol = await signIn(app);
    const wallet = await newWallet(carol);
    const to = recipient();
    await setBalance(wallet, parseEther("0.2"));
    const res = await call(carol, "POST", `/wallets/${wallet}:withdraw`, { recipientAddress: to, amount: "max", token: "ETH" });
    expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: "confirmed" });
    const sent = BigInt(res.body.amount);
    expect(await balance(to)).toBe(sent);
    expect(sent).toBeLessThan(parseEther("0.2"));
    // everything else went to the EntryPoint as the prefund: the wallet's own balance is empty
    expect(await balance(wallet)).toBe(0n);
    await useTestRuntime({ MAX_WALLETS_PER_OWNER: "100" });
  });

  it("is refused on chain once the owner removes the controller", async () => {
    const owner = await fundedAccount();
    const dan = await signIn(app, { privateKey: owner.privateKey });
    const wallet = await newWallet(dan);
    await setBalance(wallet, parseEther("1"));
    const first = await call(dan, "POST", `/wallets/${wallet}:withdraw`, { recipientAddress: recipient(), amount: "1", token: "ETH" });
    expect(first.body.status).toBe("confirmed"); // deploys the account
    const tx = await owner.wallet.writeContract({
      address: wallet,
      abi: controlledAccountAbi,
      functionName: "setController",
      args: [zeroAddress],
    });
    await devnet().client.waitForTransactionReceipt({ hash: tx });
    const refused = await call(dan, "POST", `/wallets/${wallet}:withdraw`, { recipientAddress: recipient(), amount: "1", token: "ETH" });
    expect(refused.body.status).toBe("failed");
    expect(refused.body.message).toMatch(/AA24|signature/i);
  });
});

describe("what the controller may sign", () => {
  it("never an operation that makes the account call itself (setController, upgrades); the owner may", async () => {
    const owner = await fundedAccount();
    const erin = await signIn(app, { privateKey: owner.privateKey });
    const wallet = await newWallet(erin);
    await setBalance(wallet, parseEther("1"));
    expect(
      (await call(erin, "POST", `/wallets/${wallet}:withdraw`, { recipientAddress: recipient(), amount: "1", token: "ETH" })).body.status,
    ).toBe("confirmed");
    const d = devnet();
    const selfCall = {
      to: wallet,
      data: encodeFunctionData({ abi: controlledAccountAbi, functionName: "setController", args: [recipient()] }),
    };
    const common = {
      client: d.client,
      bundler: createBundler(d.bundlerUrl),
      chainId: d.chainId,
      entryPoint: d.entryPoint,
      factory: checksum(d.factory),
      owner: owner.account.address,
      salt: BigInt(saltCounter),
      sender: wallet,
      calls: [selfCall],
    };
    const controller = localDigestSigner(stackEnv().CONTROLLER_PRIVATE_KEY as `0x${string}`);
    await expect(
      executeUserOperation({ ...common, signer: controller, paymaster: { address: d.paymaster, signer: controller } }),
    ).rejects.toThrow(/AA24|signature/i);
    const byOwner = await executeUserOperation({
      ...common,
      signer: localDigestSigner(owner.privateKey),
      paymaster: { address: d.paymaster, signer: controller },
    });
    expect(byOwner.receipt.success).toBe(true);
  });
});

describe("GET /wallets/{address}/withdrawals", () => {
  it("lists newest first with paging and a status filter, and retrieves one", async () => {
    const wallet = await newWallet();
    await setBalance(wallet, parseEther("1"));
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push(
        (await call(alice, "POST", `/wallets/${wallet}:withdraw`, { recipientAddress: recipient(), amount: "1", token: "ETH" })).body.id,
      );
    }
    const page1 = await call(alice, "GET", `/wallets/${wallet}/withdrawals?limit=2`);
    expect(page1.body.data.map((w: { id: string }) => w.id)).toEqual([ids[2], ids[1]]);
    expect(page1.body.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    const page2 = await call(alice, "GET", `/wallets/${wallet}/withdrawals?limit=2&after=${page1.body.pageInfo.endCursor}`);
    expect(page2.body.data.map((w: { id: string }) => w.id)).toEqual([ids[0]]);
    expect(page2.body.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });
    expect((await call(alice, "GET", `/wallets/${wallet}/withdrawals?status=failed`)).body.data).toEqual([]);
    expect((await call(alice, "GET", `/wallets/${wallet}/withdrawals?status=confirmed,pending`)).body.data).toHaveLength(3);
    expect((await call(alice, "GET", `/wallets/${wallet}/withdrawals?status=done`)).body.code).toBe("VALIDATION_FAILED");
    const one = await call(alice, "GET", `/wallets/${wallet}/withdrawals/${ids[1]!.toLowerCase()}`);
    expect(one.body).toMatchObject({ id: ids[1], status: "confirmed" });
    const missing = await call(alice, "GET", `/wallets/${wallet}/withdrawals/01JD7Q0S7W3C2Y8K5N6M4P1R9T`);
    expect(missing.body.code).toBe("WITHDRAWAL_NOT_FOUND");
    const foreignCursor = await call(alice, "GET", `/wallets/${wallet}/withdrawals?after=abc`);
    expect(foreignCursor.body.code).toBe("INVALID_CURSOR");
  });
});

function withoutPaymaster(): string {
  const chains = JSON.parse(stackEnv().CHAINS!) as Record<string, unknown>[];
  return JSON.stringify(chains.map(({ paymaster: _paymaster, ...rest }) => rest));
}
