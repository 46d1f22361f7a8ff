/**
 * Two local chains at once (API.md §21.4), on the `chains` project's stack (LOCAL_CHAIN_IDS=31337,11155111, tokens
 * planted): devnet.json names both, each is a configured chain with its own ports, Sepolia's USDC and WETH sit at
 * their public addresses with their public metadata, and through the real server a workflow reads and writes USDC
 * on 11155111 while another workflow sends ether on 31337, each owner signed in for its chain (token `aud`) and
 * withdrawing there, and an event trigger on 11155111 fires for a transfer there only.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { erc20Abi, getAddress, pad, parseAbi, parseEther, type Address } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { stackEnv } from "../support/runtime";
import { startService, type TestService } from "../support/service";
import { jsonClient, type Json, type Owner } from "../support/client";
import { signIn } from "../support/auth";
import { httpTarget } from "../support/server";
import { devnet, fundedAccount, plantedToken, setBalance, TRANSFER } from "../support/chain";
import { waitFor } from "../support/wait";
import { startWatching } from "../../shared/watch/loop";
import { readCheckpoint } from "../../shared/store/entities/checkpoint";
import { balanceOfFunction, transferFunction } from "../support/abis";

const SEPOLIA = 11155111;
const USDC = "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238";
const WETH = "0xfFf9976782d46CC05630D1f6eBAb18b2324d6B14";

let service: TestService;
beforeAll(async () => {
  service = await startService();
});
afterAll(async () => {
  await service?.close();
});

const { call } = jsonClient(() => service.url);
const newAddress = () => privateKeyToAccount(generatePrivateKey()).address;

/** A new owner signed in for `chainId` (the token's `aud`) with a wallet registered on that chain, holding 1 ETH. */
async function ownerOn(chainId: number): Promise<Owner> {
  const who = await signIn(httpTarget(service.url), { chainId, expiresInMs: 3600_000 });
  const res = await call(who, "POST", "/wallets", { salt: "1" });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  // Registered on the token's chain: listed there, not on the other one.
  const other = chainId === SEPOLIA ? 31337 : SEPOLIA;
  const on = async (id: number) => (await call(who, "GET", `/wallets?chainId=${id}`)).body.data.map((w: Json) => w.address);
  expect([await on(chainId), await on(other)]).toEqual([[res.body.address], []]);
  await setBalance(res.body.address, parseEther("1"), chainId);
  return { ...who, wallet: res.body.address as Address };
}

/** Creates a manual workflow of `nodes` on `chainId` for `who`'s wallet and runs it blocking; answers the execution. */
async function runOn(who: Owner, chainId: number, nodes: Json[]): Promise<Json> {
  const trigger = { id: "start", name: "start", type: "manual", config: { data: {} } };
  const created = await call(who, "POST", "/workflows", { chainId, smartWalletAddress: who.wallet, trigger, nodes });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const res = await call(who, "POST", `/workflows/${created.body.id}:trigger`, { triggerType: "manual", isBlocking: true });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return (await call(who, "GET", `/executions/${res.body.executionId}?workflowId=${created.body.id}`)).body;
}

describe("LOCAL_CHAIN_IDS=31337,11155111", () => {
  it("devnet.json lists both chains, the first also at the top level; both are configured chains on loopback ports of their own", () => {
    const written = JSON.parse(readFileSync(join(stackEnv().DATA_DIR!, "devnet.json"), "utf8")) as Json;
    const { chains, ...top } = written;
    expect(chains.map((c: Json) => c.chainId)).toEqual([31337, SEPOLIA]);
    expect(top).toEqual(chains[0]);
    const urls = chains.flatMap((c: Json) => [c.rpcUrl, c.bundlerUrl]);
    for (const url of urls) expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(new Set(urls).size).toBe(4);
    // The same deterministic contracts on both chains.
    expect(chains[1]).toMatchObject({ entryPoint: top.entryPoint, factory: top.factory, paymaster: top.paymaster });
    expect(chains[1].tokens).toEqual([
      { symbol: "USDC", name: "USDC", decimals: 6, address: USDC },
      { symbol: "WETH", name: "Wrapped Ether", decimals: 18, address: WETH },
      expect.objectContaining({ symbol: "LINK" }),
    ]);
    const configured = JSON.parse(stackEnv().CHAINS!) as Json[];
    expect(configured.map((c) => [c.chainId, c.rpcUrl, c.bundlerUrl])).toEqual(
      chains.map((c: Json) => [c.chainId, c.rpcUrl, c.bundlerUrl]),
    );
    expect(stackEnv().DEFAULT_CHAIN_ID).toBe("31337");
  });

  it("each anvil answers its own chain id", async () => {
    expect(await devnet(31337).client.getChainId()).toBe(31337);
    expect(await devnet(SEPOLIA).client.getChainId()).toBe(SEPOLIA);
  });

  it("Sepolia's USDC and WETH are working ERC-20s at their public addresses with their public metadata", async () => {
    const client = devnet(SEPOLIA).client;
    const read = (address: Address, functionName: "name" | "symbol" | "decimals") =>
      client.readContract({ address, abi: erc20Abi, functionName });
    expect([await read(USDC, "name"), await read(USDC, "symbol"), await read(USDC, "decimals")]).toEqual(["USDC", "USDC", 6]);
    expect([await read(WETH, "name"), await read(WETH, "symbol"), await read(WETH, "decimals")]).toEqual(["Wrapped Ether", "WETH", 18]);

    // WETH wraps ether as WETH9 does; USDC moves by transfer.
    const { account, wallet } = await fundedAccount(SEPOLIA);
    const weth = parseAbi(["function deposit() payable", "function withdraw(uint256)"]);
    await client.waitForTransactionReceipt({
      hash: await wallet.writeContract({ address: WETH, abi: weth, functionName: "deposit", value: parseEther("2") }),
    });
    await client.waitForTransactionReceipt({
      hash: await wallet.writeContract({ address: WETH, abi: weth, functionName: "withdraw", args: [parseEther("0.5")] }),
    });
    expect(await client.readContract({ address: WETH, abi: erc20Abi, functionName: "balanceOf", args: [account.address] })).toBe(
      parseEther("1.5"),
    );
    const usdc = await plantedToken("USDC", SEPOLIA);
    await usdc.mint(account.address, 5_000_000n);
    const to = newAddress();
    await client.waitForTransactionReceipt({
      hash: await wallet.writeContract({ address: USDC, abi: erc20Abi, functionName: "transfer", args: [to, 1_250_000n] }),
    });
    expect([await usdc.balanceOf(account.address), await usdc.balanceOf(to)]).toEqual([3_750_000n, 1_250_000n]);
  });

  it("a workflow reads and writes USDC on 11155111 while another sends ether on 31337", async () => {
    const [alice, bob] = await Promise.all([ownerOn(SEPOLIA), ownerOn(31337)]);
    const usdc = await plantedToken("USDC", SEPOLIA);
    await usdc.mint(alice.wallet, 1_000_000n);
    const usdcRecipient = newAddress();
    const ethRecipient = newAddress();

    const [onSepolia, onDevnet] = await Promise.all([
      runOn(alice, SEPOLIA, [
        {
          id: "read",
          name: "read",
          type: "contractRead",
          config: {
            contractAddress: USDC,
            contractAbi: [...erc20Abi.filter((item) => item.type === "function" && item.name === "symbol"), balanceOfFunction],
            methodCalls: [{ methodName: "symbol" }, { methodName: "balanceOf", methodParams: [alice.wallet] }],
          },
        },
        {
          id: "send",
          name: "send",
          type: "contractWrite",
          config: {
            contractAddress: USDC,
            contractAbi: [transferFunction],
            methodCalls: [{ methodName: "transfer", methodParams: [usdcRecipient, "250000"] }],
          },
        },
      ]),
      runOn(bob, 31337, [{ id: "pay", name: "pay", type: "ethTransfer", config: { destination: ethRecipient, amount: "123456789" } }]),
    ]);

    expect(onSepolia.status, JSON.stringify(onSepolia)).toBe("success");
    const [, read, send] = onSepolia.steps as Json[];
    expect(read!.output.data).toEqual([
      { methodName: "symbol", contractAddress: getAddress(USDC), success: true, value: "USDC" },
      { methodName: "balanceOf", contractAddress: getAddress(USDC), success: true, value: "1000000" },
    ]);
    expect(send).toMatchObject({ success: true });
    expect(onSepolia.cogs).toEqual([expect.objectContaining({ nodeId: "send", costType: "gas", chainId: SEPOLIA })]);
    expect(await usdc.balanceOf(usdcRecipient)).toBe(250_000n);
    expect(await usdc.balanceOf(alice.wallet)).toBe(750_000n);
    // A withdrawal of USDC without a chainId: on the token's chain.
    const withdrawn = await call(alice, "POST", `/wallets/${alice.wallet}:withdraw`, {
      recipientAddress: usdcRecipient,
      amount: "100000",
      token: USDC,
    });
    expect(withdrawn.body).toMatchObject({ chainId: SEPOLIA, status: "confirmed" });
    expect(await usdc.balanceOf(usdcRecipient)).toBe(350_000n);
    // The operation landed on 11155111's chain, not on 31337's (where the same address holds no code).
    const receipt = await devnet(SEPOLIA).client.getTransactionReceipt({ hash: send!.output.data[0].transactionHash });
    expect(receipt.status).toBe("success");
    expect(await devnet(31337).client.getCode({ address: alice.wallet })).toBeUndefined();

    expect(onDevnet.status, JSON.stringify(onDevnet)).toBe("success");
    expect(onDevnet.steps[1].output.data).toMatchObject({ to: ethRecipient, value: "123456789", chainId: 31337 });
    expect(onDevnet.cogs).toEqual([expect.objectContaining({ nodeId: "pay", chainId: 31337 })]);
    expect(await devnet(31337).client.getBalance({ address: ethRecipient })).toBe(123_456_789n);
    expect(await devnet(SEPOLIA).client.getBalance({ address: ethRecipient })).toBe(0n);
  });

  it("an event trigger on 11155111 fires for a USDC transfer there, not for one at the same address on 31337", async () => {
    const alice = await ownerOn(SEPOLIA);
    const watched = newAddress();
    const trigger = {
      id: "watch",
      name: "watch",
      type: "event",
      config: { queries: [{ addresses: [USDC], topics: [TRANSFER, null, pad(watched)] }] },
    };
    const nodes = [{ id: "seen", name: "seen", type: "customCode", config: { source: "return 1" } }];
    const created = await call(alice, "POST", "/workflows", { chainId: SEPOLIA, smartWalletAddress: alice.wallet, trigger, nodes });
    expect(created.status, JSON.stringify(created.body)).toBe(201);

    const watcher = startWatching({ holder: "multi-chain", pollMs: 300 });
    try {
      const head = await devnet(SEPOLIA).client.getBlockNumber({ cacheTime: 0 });
      await waitFor(
        "the watcher's first pass on 11155111",
        async () => Number((await readCheckpoint(SEPOLIA))?.block ?? -1) >= Number(head),
      );
      const [onDevnet, onSepolia] = [await plantedToken("USDC", 31337), await plantedToken("USDC", SEPOLIA)];
      await onDevnet.mint(watched, 7n);
      const minted = await onSepolia.mint(watched, 11n);
      const executions = async () => (await call(alice, "GET", `/executions?workflowId=${created.body.id}`)).body.data as Json[];
      await waitFor("the event run", async () => (await executions()).length > 0, { timeoutMs: 30_000 });
      // A further pass or two: the mint on 31337 still fires nothing.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const runs = await executions();
      expect(runs).toHaveLength(1);
      const run = (await call(alice, "GET", `/executions/${runs[0]!.id}?workflowId=${created.body.id}`)).body;
      expect(run.steps[0].output.data).toMatchObject({ address: getAddress(USDC), transactionHash: minted });
    } finally {
      await watcher.stop();
    }
  });
});
