/**
 * Following pending withdrawals (API.md §11.6): a withdrawal answered `pending` becomes `confirmed` when
 * read after its receipt arrives, the background follow-up settles it without a read, and one without a
 * receipt 30 minutes after submission becomes `failed` ("user operation was not included").
 */
import { beforeAll, describe, expect, it } from "vitest";
import { parseEther, type Address } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { PutCommand } from "@aws-sdk/lib-dynamodb";
import { ulid } from "ulid";
import { useTestRuntime } from "../support/runtime";
import { signIn, type SignedIn } from "../support/auth";
import { devnet, includedOperations, setBalance } from "../support/chain";
import { createServiceApp } from "../../shared/service/app";
import { Keys } from "../../shared/store/item-keys";
import { followUpPending } from "../../shared/wallet/withdraw-followup";
import { useRuntime } from "../../shared/current-runtime";

const app = createServiceApp();
let alice: SignedIn;

beforeAll(async () => {
  // Answer at once instead of waiting for the receipt, so every withdrawal starts out pending.
  await useTestRuntime({ WITHDRAW_CONFIRM_WAIT_MS: "0", MAX_WALLETS_PER_OWNER: "50" });
  alice = await signIn(app);
});

async function call(method: string, path: string, body?: unknown) {
  const res = await app.request(path, {
    method,
    headers: { ...alice.headers, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: JSON.parse(await res.text()) };
}

let salt = 0;
async function fundedWallet(): Promise<Address> {
  const { body } = await call("POST", "/wallets", { salt: String(++salt) });
  await setBalance(body.address, parseEther("1"));
  return body.address;
}

const to = () => privateKeyToAccount(generatePrivateKey()).address;

async function untilReceipt(hash: `0x${string}`) {
  const bundler = devnet().bundlerUrl;
  for (let i = 0; i < 100; i++) {
    const res = await fetch(bundler, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_getUserOperationReceipt", params: [hash] }),
    });
    if (JSON.parse(await res.text()).result) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("no receipt");
}

describe("pending withdrawals", () => {
  it("answers pending with the userOpHash, and a later read stores confirmed with the transaction hash", async () => {
    const wallet = await fundedWallet();
    const sent = await call("POST", `/wallets/${wallet}:withdraw`, { recipientAddress: to(), amount: "1000", token: "ETH" });
    expect(sent.status).toBe(200);
    expect(sent.body.status).toBe("pending");
    expect(sent.body.userOpHash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(sent.body.transactionHash).toBeUndefined();
    await untilReceipt(sent.body.userOpHash);
    const read = await call("GET", `/wallets/${wallet}/withdrawals/${sent.body.id}`);
    expect(read.body).toMatchObject({ id: sent.body.id, status: "confirmed", userOpHash: sent.body.userOpHash });
    expect(read.body.transactionHash).toMatch(/^0x[0-9a-f]{64}$/);
  });

  it("is settled by the background follow-up without any read", async () => {
    const wallet = await fundedWallet();
    const sent = await call("POST", `/wallets/${wallet}:withdraw`, { recipientAddress: to(), amount: "1000", token: "ETH" });
    await untilReceipt(sent.body.userOpHash);
    const { settled } = await followUpPending();
    expect(settled).toBeGreaterThanOrEqual(1);
    const listed = await call("GET", `/wallets/${wallet}/withdrawals?status=confirmed`);
    expect(listed.body.data.map((w: { id: string }) => w.id)).toEqual([sent.body.id]);
  });

  it("sends back-to-back withdrawals answered pending side by side under keys of their own; key 0 stays at 0", async () => {
    const wallet = await fundedWallet();
    const sent = [];
    for (let i = 0; i < 3; i++) {
      const res = await call("POST", `/wallets/${wallet}:withdraw`, { recipientAddress: to(), amount: String(100 + i), token: "ETH" });
      expect(res.body.status, JSON.stringify(res.body)).toBe("pending"); // answered at once (WITHDRAW_CONFIRM_WAIT_MS=0)
      sent.push(res.body);
    }
    for (const w of sent) await untilReceipt(w.userOpHash);
    const listed = await call("GET", `/wallets/${wallet}/withdrawals`);
    expect(listed.body.data.map((w: { status: string }) => w.status)).toEqual(["confirmed", "confirmed", "confirmed"]);
    expect((await call("GET", `/wallets/${wallet}:getNonce`)).body.nonce).toBe("0");
    const ops = await includedOperations(wallet);
    expect(new Set(ops.map((o) => o.key)).size).toBe(3);
  });

  it('gives up 30 minutes after submission: failed, "user operation was not included"', async () => {
    const wallet = await fundedWallet();
    const { db, config, now } = useRuntime();
    const id = ulid();
    const submittedAt = now() - 31 * 60_000;
    await db.send(
      new PutCommand({
        TableName: config.tableName,
        Item: {
          ...Keys.withdrawal(alice.owner, 31337, wallet, id),
          ...Keys.pendingWithdrawal(submittedAt, id),
          type: "withdrawal",
          v: 1,
          id,
          owner: alice.owner,
          chainId: 31337,
          status: "pending",
          userOpHash: `0x${"ab".repeat(32)}`, // never sent: the bundler has no receipt for it
          submittedAt,
          smartWalletAddress: wallet,
          recipientAddress: to(),
          amount: "1",
          token: "ETH",
        },
      }),
    );
    const read = await call("GET", `/wallets/${wallet}/withdrawals/${id}`);
    expect(read.body).toMatchObject({ id, status: "failed", message: "user operation was not included" });
    // final: a later read does not change it
    expect((await call("GET", `/wallets/${wallet}/withdrawals`)).body.data[0]).toMatchObject({ id, status: "failed" });
  });
});
