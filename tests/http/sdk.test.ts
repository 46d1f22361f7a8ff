/**
 * The public npm client `@avaprotocol/sdk-js` against a real HTTP server of the whole service: sign-in,
 * secrets and wallets (including a withdrawal on the devnet) through the SDK's own calls.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@avaprotocol/sdk-js";
import { parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { useTestRuntime } from "../support/runtime";
import { devnet, setBalance } from "../support/chain";
import { createServiceApp } from "../../shared/service/app";
import { startTestServer, type TestServer } from "../support/server";

let server: TestServer;
let client: Client;

beforeAll(async () => {
  await useTestRuntime();
  server = await startTestServer(createServiceApp());
  client = new Client({ baseUrl: server.url });
  await client.auth.exchangeWithKey(generatePrivateKey(), { uri: "https://app.example.com", chainId: devnet().chainId, version: "0.1.0" });
});

afterAll(async () => {
  await server.close();
});

describe("@avaprotocol/sdk-js as a client", () => {
  it("puts, lists and deletes secrets", async () => {
    await client.secrets.put("SDK_TOKEN", { value: "sdk-secret-value" });
    const list = (await client.secrets.list()) as unknown as { data: { name: string; scope: string }[] };
    expect(list.data).toEqual([expect.objectContaining({ name: "SDK_TOKEN", scope: "user" })]);
    expect(JSON.stringify(list)).not.toContain("sdk-secret-value");
    await client.secrets.delete("SDK_TOKEN");
    expect(((await client.secrets.list()) as unknown as { data: unknown[] }).data).toEqual([]);
  });

  it("registers a wallet, reads its nonce and withdraws from it", async () => {
    const wallet = (await client.wallets.create({ salt: "7" } as never)) as unknown as { address: `0x${string}`; salt: string };
    expect(wallet.salt).toBe("7");
    const list = (await client.wallets.list()) as unknown as { data: { address: string }[] };
    expect(list.data.map((w) => w.address)).toEqual([wallet.address]);
    expect(((await client.wallets.getNonce(wallet.address)) as unknown as { nonce: string }).nonce).toBe("0");

    await setBalance(wallet.address, parseEther("1"));
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const result = (await client.wallets.withdraw(wallet.address, {
      recipientAddress: recipient,
      amount: "4242",
      token: "ETH",
    } as never)) as unknown as {
      status: string;
    };
    expect(result.status).toBe("confirmed");
    expect(await devnet().client.getBalance({ address: recipient })).toBe(4242n);
    // the withdrawal used a nonce key of its own (API.md §19): key 0, which getNonce reports, is untouched
    expect(((await client.wallets.getNonce(wallet.address)) as unknown as { nonce: string }).nonce).toBe("0");
  });
});
