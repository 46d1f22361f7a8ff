/**
 * On-chain nodes of a triggered run on the devnet, through the real HTTP server (API.md §8.4.1, §8.4.2, §9.6):
 * a contractWrite with two method calls (mint + transfer on a TestToken) is ONE user operation from the
 * registered, funded runner wallet — both calls change the token's state, both output elements carry the same
 * userOpHash/transactionHash, the step has its gas and the execution's cogs one gas element for it; an ethTransfer
 * moves exactly its amount. A batch whose second call reverts changes nothing (all succeed or all revert).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getAddress, parseEther, parseEventLogs, type Address, type Hex } from "viem";
import { entryPoint07Abi } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { useTestRuntime } from "../support/runtime";
import { startTestServer, type TestServer } from "../support/server";
import { jsonClient, type Json, type Owner } from "../support/client";
import { deployTestToken, devnet, gasCogs, includedOperations, setBalance } from "../support/chain";
import { balanceOfFunction, mintFunction, transferFunction } from "../support/abis";
import { createServiceApp } from "../../shared/service/app";
import { setBus } from "../../shared/execution/bus/install";
import { createInProcessBus, type InProcessBus } from "../../shared/execution/bus/in-process";
import { withRunner } from "../../shared/execution/runner";

/** The TestToken's ABI as a client sends it in `contractAbi` (named inputs, the calls this file makes). */
const tokenAbi = [mintFunction, transferFunction, balanceOfFunction];

let server: TestServer;
let bus: InProcessBus;

beforeAll(async () => {
  await useTestRuntime({ RATE_LIMIT_BURST: "100000", RATE_LIMIT_RPS: "10000" });
  bus = setBus(withRunner(createInProcessBus()));
  server = await startTestServer(createServiceApp());
});

afterAll(async () => {
  await bus?.idle();
  await server?.close();
});

const { call, ownerWithWallet } = jsonClient(() => server.url);

/** A signed-in owner with a registered runner wallet holding 1 ETH (not deployed yet: the first operation deploys it). */
async function fundedOwner(): Promise<Owner> {
  const who = await ownerWithWallet();
  await setBalance(who.wallet, parseEther("1"));
  return who;
}

/** Creates a manual-trigger workflow, triggers it blocking over HTTP and reads the resulting execution. */
async function runOnce(who: Owner, trigger: Json, nodes: Json[]): Promise<Json> {
  const created = await call(who, "POST", "/workflows", { smartWalletAddress: who.wallet, trigger, nodes });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const res = await call(who, "POST", `/workflows/${created.body.id}:trigger`, { triggerType: "manual", isBlocking: true });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const execution = await call(who, "GET", `/executions/${res.body.executionId}?workflowId=${created.body.id}`);
  expect(execution.status).toBe(200);
  expect(execution.body).toMatchObject({ id: res.body.executionId, status: res.body.status });
  return execution.body;
}

const newRecipient = () => privateKeyToAccount(generatePrivateKey()).address;
const ethBalance = (address: Address) => devnet().client.getBalance({ address });
const HASH = /^0x[0-9a-f]{64}$/;

/** The EntryPoint's UserOperationEvents in a transaction. */
async function userOperationsIn(transactionHash: Hex) {
  const receipt = await devnet().client.getTransactionReceipt({ hash: transactionHash });
  expect(receipt.status).toBe("success");
  const events = parseEventLogs({ abi: entryPoint07Abi, eventName: "UserOperationEvent", logs: receipt.logs });
  return { receipt, events };
}

describe("contractWrite with two method calls, then an ethTransfer, in one triggered run", () => {
  it("both calls change the token in one user operation; the transfer moves exactly its amount; hashes, gas and cogs are recorded", async () => {
    const alice = await fundedOwner();
    const token = await deployTestToken();
    const tokenAddress = getAddress(token.address);
    const tokenRecipient = newRecipient();
    const ethRecipient = newRecipient();
    await setBalance(ethRecipient, 5n); // a non-zero start, so the delta is what is checked
    const walletBefore = await ethBalance(alice.wallet);
    const nonceBefore = (await call(alice, "GET", `/wallets/${alice.wallet}:getNonce`)).body.nonce;
    expect(nonceBefore).toBe("0");
    expect(await devnet().client.getCode({ address: alice.wallet })).toBeUndefined();

    const execution = await runOnce(alice, { id: "start", name: "start", type: "manual", config: { data: { amount: "400" } } }, [
      {
        id: "mintAndSend",
        name: "mintAndSend",
        type: "contractWrite",
        config: {
          contractAddress: token.address,
          contractAbi: tokenAbi,
          methodCalls: [
            { methodName: "mint", methodParams: [alice.wallet, "1000"] },
            // A template param (expanded, then parsed as uint256) and a full signature as the method name.
            { methodName: "transfer(address,uint256)", methodParams: [tokenRecipient, "{{ start.data.amount }}"] },
          ],
        },
      },
      { id: "pay", name: "pay", type: "ethTransfer", config: { destination: ethRecipient, amount: "987654321" } },
    ]);
    expect(execution.status, JSON.stringify(execution)).toBe("success");
    expect(execution.steps.map((s: Json) => [s.id, s.success])).toEqual([
      ["start", true],
      ["mintAndSend", true],
      ["pay", true],
    ]);
    const [, write, transfer] = execution.steps as [Json, Json, Json];

    // The devnet state changed by both calls: 1000 minted to the wallet, 400 of them transferred on.
    expect(await token.balanceOf(alice.wallet)).toBe(600n);
    expect(await token.balanceOf(tokenRecipient)).toBe(400n);

    // Both elements carry the same operation: one userOpHash, one transaction, one block.
    const elements = write.output.data as Json[];
    expect(elements).toEqual([
      {
        methodName: "mint",
        contractAddress: tokenAddress,
        success: true,
        value: null,
        isSimulated: false,
        userOpHash: expect.stringMatching(HASH),
        transactionHash: expect.stringMatching(HASH),
        blockNumber: expect.any(Number),
      },
      {
        methodName: "transfer(address,uint256)",
        contractAddress: tokenAddress,
        success: true,
        value: null,
        isSimulated: false,
        userOpHash: elements[0]!.userOpHash,
        transactionHash: elements[0]!.transactionHash,
        blockNumber: elements[0]!.blockNumber,
      },
    ]);
    expect(write.inputs).toEqual(["start.data.amount"]);

    // On chain it is exactly one user operation from the runner, which ran both calls (two Transfer logs).
    // The shared bundler may put other test files' operations in the same bundle: count only this wallet's.
    const { receipt, events: all } = await userOperationsIn(elements[0]!.transactionHash);
    const events = all.filter((event) => getAddress(event.args.sender) === getAddress(alice.wallet));
    expect(Number(receipt.blockNumber)).toBe(elements[0]!.blockNumber);
    expect(events).toHaveLength(1);
    const op = events[0]!.args;
    expect(op).toMatchObject({ userOpHash: elements[0]!.userOpHash, sender: alice.wallet, success: true });
    const tokenLogs = receipt.logs.filter((log) => getAddress(log.address) === tokenAddress);
    expect(tokenLogs).toHaveLength(2);

    // The step's gas is the operation's actual gas; gasPrice is their quotient rounded down.
    expect(write.gasUsed).toBe(op.actualGasUsed.toString());
    expect(write.totalGasCost).toBe(op.actualGasCost.toString());
    expect(write.gasPrice).toBe((op.actualGasCost / op.actualGasUsed).toString());
    expect(BigInt(write.gasUsed)).toBeGreaterThan(0n);

    // The ethTransfer: its own operation, exactly the amount moved.
    expect(await ethBalance(ethRecipient)).toBe(5n + 987654321n);
    expect(transfer.output.data).toEqual({
      from: alice.wallet,
      to: ethRecipient,
      value: "987654321",
      chainId: devnet().chainId,
      isSimulated: false,
      userOpHash: expect.stringMatching(HASH),
      transactionHash: expect.stringMatching(HASH),
    });
    expect(transfer.output.data.userOpHash).not.toBe(elements[0]!.userOpHash);
    const bundle = await userOperationsIn(transfer.output.data.transactionHash);
    const second = bundle.events.filter((e) => getAddress(e.args.sender) === getAddress(alice.wallet)); // the bundle may hold others' operations
    expect(second.map((e) => [e.args.userOpHash, e.args.sender, e.args.success])).toEqual([
      [transfer.output.data.userOpHash, alice.wallet, true],
    ]);
    expect(transfer.totalGasCost).toBe(second[0]!.args.actualGasCost.toString());

    // The first operation deployed the runner (its gas is inside that step's). Two nodes, two operations, each under
    // a nonce key of its own (API.md §19): key 0, which getNonce reports, stays at 0.
    expect(await devnet().client.getCode({ address: alice.wallet })).toMatch(/^0x[0-9a-f]+$/);
    const ops = await includedOperations(alice.wallet);
    expect(ops.map((o) => o.userOpHash)).toEqual([elements[0]!.userOpHash, transfer.output.data.userOpHash]);
    expect(new Set(ops.map((o) => o.key)).size).toBe(2);
    expect((await call(alice, "GET", `/wallets/${alice.wallet}:getNonce`)).body.nonce).toBe("0");
    // The wallet paid the transferred amount, plus the gas unless the chain's paymaster sponsored it.
    const paidGas = devnet().paymaster ? 0n : BigInt(write.totalGasCost) + BigInt(transfer.totalGasCost);
    expect(await ethBalance(alice.wallet)).toBe(walletBefore - 987654321n - paidGas);

    // cogs: one gas element per step that sent an operation, matching that step's gas.
    expect(execution.cogs).toEqual([gasCogs("mintAndSend", write), gasCogs("pay", transfer)]);
    expect(execution.valueFee).toMatchObject({ tier: "tier1", fee: { amount: "0.03", unit: "PERCENTAGE" } });
  });

  it("a batch whose second call reverts changes nothing: the mint of the first call does not happen either", async () => {
    const bob = await fundedOwner();
    const token = await deployTestToken();
    const tokenRecipient = newRecipient();

    const execution = await runOnce(bob, { id: "start", name: "start", type: "manual", config: {} }, [
      {
        id: "overdraw",
        name: "overdraw",
        type: "contractWrite",
        config: {
          contractAddress: token.address,
          contractAbi: tokenAbi,
          methodCalls: [
            { methodName: "mint", methodParams: [bob.wallet, "10"] },
            { methodName: "transfer", methodParams: [tokenRecipient, "11"] },
          ],
        },
      },
    ]);
    expect(execution.status).toBe("failed");
    expect(execution.error).toBe("1 of 1 steps failed: overdraw");
    const step = execution.steps[1] as Json;
    // The bundler's estimate already finds the batch reverting (ERC-7769 "reverted", not an AAxx validation code):
    // the step fails USEROP_REVERTED with the contract's reason and nothing is sent, so no hashes, no gas, no cogs.
    const error = "user operation reverted: insufficient balance";
    expect(step).toMatchObject({ id: "overdraw", success: false, errorCode: "USEROP_REVERTED", error });
    const element = { contractAddress: getAddress(token.address), success: false, error, value: null, isSimulated: false };
    expect(step.output.data).toEqual([
      { methodName: "mint", ...element },
      { methodName: "transfer", ...element },
    ]);
    expect(step.gasUsed).toBeUndefined();
    expect(execution.cogs).toEqual([]);
    expect(await token.balanceOf(bob.wallet)).toBe(0n);
    expect(await token.balanceOf(tokenRecipient)).toBe(0n);
    expect((await call(bob, "GET", `/wallets/${bob.wallet}:getNonce`)).body.nonce).toBe("0");
  });
});
