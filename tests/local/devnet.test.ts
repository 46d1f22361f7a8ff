/**
 * The local ERC-4337 devnet end to end (real anvil + EntryPoint v0.7 + Alto, no mocks):
 * deterministic deployment, mining, counterfactual addresses, sponsored user operations signed
 * by the controller and by the owner, controller removal, and state persistence across restarts.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createPublicClient,
  createWalletClient,
  encodeFunctionData,
  erc20Abi,
  http,
  parseAbi,
  parseEther,
  parseEventLogs,
  slice,
  zeroAddress,
  type Address,
  type Hex,
  type PublicClient,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { toPackedUserOperation, type BundlerClient, entryPoint07Abi, entryPoint07Address } from "viem/account-abstraction";
import { foundry } from "viem/chains";
import { waitFor } from "../support/wait";
import { ANVIL_KEYS, devnetAddresses, startDevnet, type Devnet } from "../../local/devnet/devnet";
import { localTokens } from "../../local/devnet/tokens";
import { controlledAccountAbi, controlledAccountFactoryAbi, verifyingPaymasterAbi } from "../../shared/chain/solidity/artifacts";
import { executeUserOperation } from "../../shared/chain/userop";
import {
  buildUserOperation,
  encodeCreateAccount,
  getAccountAddress,
  getSenderAddress,
  predictAccountAddress,
} from "../../shared/chain/userop-account";
import { createBundler, estimateUserOperationGas, sendUserOperation, waitForUserOperationReceipt } from "../../shared/chain/userop-bundler";
import {
  DUMMY_SIGNATURE,
  getUserOperationHashV07,
  localDigestSigner,
  signUserOperation,
  type UserOperationV07,
} from "../../shared/chain/userop-signer";
import {
  getVerifyingPaymasterHash,
  packPaymasterAndData,
  sponsorUserOperation,
  withVerifyingPaymasterStub,
} from "../../shared/chain/userop-paymaster";

const log = process.env.DEVNET_LOG ? (line: string) => console.log(line) : undefined;

async function setBalance(client: PublicClient, address: Address, wei: bigint) {
  await client.request({ method: "anvil_setBalance" as never, params: [address, `0x${wei.toString(16)}`] as never });
}

describe("devnet: anvil + EntryPoint v0.7 + ControlledAccountFactory + VerifyingPaymaster + Alto", () => {
  const controllerKey = generatePrivateKey();
  const paymasterKey = generatePrivateKey();
  const ownerKey = generatePrivateKey();
  const controller = localDigestSigner(controllerKey);
  const paymasterSigner = localDigestSigner(paymasterKey);
  const owner = localDigestSigner(ownerKey);
  const salt = 7n;

  let devnet: Devnet;
  let client: PublicClient;
  let bundler: BundlerClient;
  let account: Address;

  beforeAll(async () => {
    const t0 = Date.now();
    devnet = await startDevnet({ controllerPrivateKey: controllerKey, paymasterSignerPrivateKey: paymasterKey, log });
    console.log(`devnet started in ${Date.now() - t0} ms (rpc ${devnet.rpcUrl}, bundler ${devnet.bundlerUrl})`);
    client = createPublicClient({ chain: foundry, transport: http(devnet.rpcUrl), pollingInterval: 50 });
    bundler = createBundler(devnet.bundlerUrl);
  }, 120_000);

  afterAll(async () => {
    await devnet?.stop();
  }, 30_000);

  /** Builds, sponsors, signs and sends an operation of the account `owner`/`salt` making `calls`, signed by `signer`. */
  const execute = (calls: { to: Address; value?: bigint; data?: Hex }[], signer: typeof owner) =>
    executeUserOperation({
      client,
      bundler,
      chainId: devnet.chainId,
      factory: devnet.factory,
      owner: owner.address,
      salt,
      calls,
      signer,
      paymaster: { address: devnet.paymaster, signer: paymasterSigner },
    });

  /** Sponsored, signed op for the test account running `calls` (helpers from shared/chain/userop). */
  async function prepareOp(signerKey: Hex, calls: { to: Address; value?: bigint; data?: Hex }[]) {
    let op = await buildUserOperation({ client, factory: devnet.factory, owner: owner.address, salt, calls, bundler });
    op = withVerifyingPaymasterStub(op, { paymaster: devnet.paymaster });
    op = await estimateUserOperationGas({ bundler, userOp: op });
    op = await sponsorUserOperation({ userOp: op, paymaster: devnet.paymaster, signer: paymasterSigner, chainId: devnet.chainId });
    return signUserOperation({ userOp: op, signer: localDigestSigner(signerKey), chainId: devnet.chainId });
  }

  it("deploys at deterministic addresses, stakes and funds the paymaster", async () => {
    expect(devnet.chainId).toBe(31337);
    expect(await client.getChainId()).toBe(31337);
    expect(devnet.entryPoint).toBe(entryPoint07Address);
    expect(devnet.create2Deployer).toBe("0x4e59b44847b379578588920cA78FbF26c0B4956C");
    expect(devnet.controller).toBe(controller.address);
    const expected = devnetAddresses(controller.address, paymasterSigner.address);
    expect(devnet.factory).toBe(expected.factory);
    expect(devnet.paymaster).toBe(expected.paymaster);

    expect(await client.readContract({ address: devnet.factory, abi: controlledAccountFactoryAbi, functionName: "controller" })).toBe(
      controller.address,
    );
    const implementation = await client.readContract({
      address: devnet.factory,
      abi: controlledAccountFactoryAbi,
      functionName: "accountImplementation",
    });
    expect(await client.readContract({ address: implementation, abi: controlledAccountAbi, functionName: "entryPoint" })).toBe(
      entryPoint07Address,
    );
    expect(await client.readContract({ address: devnet.paymaster, abi: verifyingPaymasterAbi, functionName: "verifyingSigner" })).toBe(
      paymasterSigner.address,
    );
    expect(await client.readContract({ address: devnet.paymaster, abi: verifyingPaymasterAbi, functionName: "owner" })).toBe(
      privateKeyToAccount(ANVIL_KEYS.deployer).address,
    );
    const info = await client.readContract({
      address: devnet.entryPoint,
      abi: entryPoint07Abi,
      functionName: "getDepositInfo",
      args: [devnet.paymaster],
    });
    expect(info.staked).toBe(true);
    expect(info.unstakeDelaySec).toBe(86_400);
    expect(info.deposit).toBeGreaterThanOrEqual(parseEther("10"));
    expect(await client.getBalance({ address: controller.address })).toBeGreaterThanOrEqual(parseEther("10"));
    expect(await bundler.getSupportedEntryPoints()).toEqual([entryPoint07Address]);
  });

  it("plants the chain id's well-known tokens at their public addresses: working ERC-20s with their metadata", async () => {
    expect(devnet.tokens).toEqual(localTokens(31337));
    expect(devnet.tokens.map((t) => t.symbol)).toEqual(expect.arrayContaining(["USDC", "WETH"]));
    for (const token of devnet.tokens) {
      const read = (functionName: "name" | "symbol" | "decimals") =>
        client.readContract({ address: token.address, abi: erc20Abi, functionName });
      expect([await read("name"), await read("symbol"), await read("decimals")]).toEqual([token.name, token.symbol, token.decimals]);
    }
  });

  it("mines transactions immediately and still produces a block every blockTimeSeconds", async () => {
    const funder = createWalletClient({
      chain: foundry,
      transport: http(devnet.rpcUrl),
      account: privateKeyToAccount(ANVIL_KEYS.deployer),
    });
    const t0 = Date.now();
    const hash = await funder.sendTransaction({ to: owner.address, value: 1n });
    const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 20 });
    expect(receipt.status).toBe("success");
    expect(Date.now() - t0).toBeLessThan(1_000);
    const before = await client.getBlockNumber({ cacheTime: 0 });
    const twoMore = async () => (await client.getBlockNumber({ cacheTime: 0 })) - before >= 2n;
    await waitFor("two blocks mined with no transaction", twoMore, { timeoutMs: 4_500, intervalMs: 100 });
  });

  it("factory.getAddress == EntryPoint.getSenderAddress(initCode) == offline prediction", async () => {
    account = await getAccountAddress(client, { factory: devnet.factory, owner: owner.address, salt });
    const sender = await getSenderAddress(client, { factory: devnet.factory, factoryData: encodeCreateAccount(owner.address, salt) });
    expect(sender).toBe(account);
    const implementation = await client.readContract({
      address: devnet.factory,
      abi: controlledAccountFactoryAbi,
      functionName: "accountImplementation",
    });
    expect(
      predictAccountAddress({ factory: devnet.factory, implementation, controller: controller.address, owner: owner.address, salt }),
    ).toBe(account);
    // another salt / owner gives another address
    expect(await getAccountAddress(client, { factory: devnet.factory, owner: owner.address, salt: salt + 1n })).not.toBe(account);
    expect(await client.getCode({ address: account })).toBeUndefined();
  });

  it("paymasterAndData packing and the offline paymaster hash match the contract", async () => {
    const op: UserOperationV07 = {
      sender: account,
      nonce: 5n,
      factory: devnet.factory,
      factoryData: encodeCreateAccount(owner.address, salt),
      callData: "0x1234",
      callGasLimit: 100_000n,
      verificationGasLimit: 400_000n,
      preVerificationGas: 50_000n,
      maxFeePerGas: 3_000_000_000n,
      maxPriorityFeePerGas: 1_000_000_000n,
      paymaster: devnet.paymaster,
      paymasterVerificationGasLimit: 70_000n,
      paymasterPostOpGasLimit: 1n,
      paymasterData: "0x",
      signature: "0x",
    };
    const sponsored = await sponsorUserOperation({
      userOp: op,
      paymaster: devnet.paymaster,
      signer: paymasterSigner,
      chainId: devnet.chainId,
      validUntil: 2_000_000_000,
      validAfter: 10,
    });
    const packed = toPackedUserOperation(sponsored);
    expect(packed.paymasterAndData).toBe(
      packPaymasterAndData({
        paymaster: devnet.paymaster,
        paymasterVerificationGasLimit: 70_000n,
        paymasterPostOpGasLimit: 1n,
        paymasterData: sponsored.paymasterData!,
      }),
    );
    // layout: paymaster(20) | 16 | 16 | validUntil/validAfter (64) | signature (65)
    expect((packed.paymasterAndData.length - 2) / 2).toBe(20 + 16 + 16 + 64 + 65);
    const [validUntil, validAfter, signature] = await client.readContract({
      address: devnet.paymaster,
      abi: verifyingPaymasterAbi,
      functionName: "parsePaymasterAndData",
      args: [packed.paymasterAndData],
    });
    expect([validUntil, validAfter]).toEqual([2_000_000_000, 10]);
    expect(signature).toBe(slice(sponsored.paymasterData!, 64));
    const onChain = await client.readContract({
      address: devnet.paymaster,
      abi: verifyingPaymasterAbi,
      functionName: "getHash",
      args: [packed, 2_000_000_000, 10],
    });
    expect(
      getVerifyingPaymasterHash({
        userOp: op,
        paymaster: devnet.paymaster,
        chainId: devnet.chainId,
        validUntil: 2_000_000_000,
        validAfter: 10,
      }),
    ).toBe(onChain);
    const onChainOpHash = await client.readContract({
      address: devnet.entryPoint,
      abi: entryPoint07Abi,
      functionName: "getUserOpHash",
      args: [packed],
    });
    expect(getUserOperationHashV07(sponsored, { chainId: devnet.chainId })).toBe(onChainOpHash);
  });

  it("a sponsored op signed by the CONTROLLER deploys the account and moves ETH", async () => {
    await setBalance(client, account, parseEther("1"));
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const value = parseEther("0.25");

    // Built by hand: initCode = factory + createAccount(owner, salt); callData = execute(recipient, value, "0x").
    const fees = (await bundler.request({ method: "pimlico_getUserOperationGasPrice" as never, params: [] as never })) as {
      fast: { maxFeePerGas: Hex; maxPriorityFeePerGas: Hex };
    };
    let op: UserOperationV07 = {
      sender: account,
      nonce: await client.readContract({ address: devnet.entryPoint, abi: entryPoint07Abi, functionName: "getNonce", args: [account, 0n] }),
      factory: devnet.factory,
      factoryData: encodeFunctionData({ abi: controlledAccountFactoryAbi, functionName: "createAccount", args: [owner.address, salt] }),
      callData: encodeFunctionData({ abi: controlledAccountAbi, functionName: "execute", args: [recipient, value, "0x"] }),
      callGasLimit: 0n,
      verificationGasLimit: 0n,
      preVerificationGas: 0n,
      maxFeePerGas: BigInt(fees.fast.maxFeePerGas),
      maxPriorityFeePerGas: BigInt(fees.fast.maxPriorityFeePerGas),
      signature: DUMMY_SIGNATURE,
    };
    expect(op.nonce).toBe(0n);
    op = withVerifyingPaymasterStub(op, { paymaster: devnet.paymaster });
    op = await estimateUserOperationGas({ bundler, userOp: op }); // eth_estimateUserOperationGas
    expect(op.verificationGasLimit).toBeGreaterThan(100_000n); // includes the deployment
    expect(op.callGasLimit).toBeGreaterThan(0n);
    expect(op.paymasterVerificationGasLimit).toBeGreaterThan(0n);
    op = await sponsorUserOperation({ userOp: op, paymaster: devnet.paymaster, signer: paymasterSigner, chainId: devnet.chainId });
    op = await signUserOperation({ userOp: op, signer: controller, chainId: devnet.chainId });

    const paymasterDepositBefore = await client.readContract({
      address: devnet.entryPoint,
      abi: entryPoint07Abi,
      functionName: "balanceOf",
      args: [devnet.paymaster],
    });
    const hash = await sendUserOperation({ bundler, userOp: op }); // eth_sendUserOperation
    expect(hash).toBe(getUserOperationHashV07(op, { chainId: devnet.chainId }));
    const t0 = Date.now();
    const receipt = await waitForUserOperationReceipt({ bundler, hash, pollingIntervalMs: 100 });
    console.log(`controller op included in ${Date.now() - t0} ms after submission`);
    expect(receipt.success).toBe(true);
    expect(receipt.sender).toBe(account);
    expect(receipt.paymaster).toBe(devnet.paymaster);

    expect(await client.getCode({ address: account })).toMatch(/^0x.+/);
    expect(await client.getBalance({ address: recipient })).toBe(value);
    expect(await client.getBalance({ address: account })).toBe(parseEther("1") - value); // gas paid by the paymaster
    expect(await client.readContract({ address: account, abi: controlledAccountAbi, functionName: "owner" })).toBe(owner.address);
    expect(await client.readContract({ address: account, abi: controlledAccountAbi, functionName: "controller" })).toBe(controller.address);
    const paymasterDepositAfter = await client.readContract({
      address: devnet.entryPoint,
      abi: entryPoint07Abi,
      functionName: "balanceOf",
      args: [devnet.paymaster],
    });
    expect(paymasterDepositAfter).toBeLessThan(paymasterDepositBefore);
  });

  it("an op signed by the OWNER works too (executeBatch, account already deployed)", async () => {
    const r1 = privateKeyToAccount(generatePrivateKey()).address;
    const r2 = privateKeyToAccount(generatePrivateKey()).address;
    const { receipt, userOp } = await execute(
      [
        { to: r1, value: 1000n },
        { to: r2, value: 2000n },
      ],
      owner,
    );
    expect(userOp.factory).toBeUndefined();
    expect(userOp.nonce).toBe(1n);
    expect(receipt.success).toBe(true);
    expect(await client.getBalance({ address: r1 })).toBe(1000n);
    expect(await client.getBalance({ address: r2 })).toBe(2000n);
  });

  it("ops signed by anyone else, or with a bad paymaster signature, are refused", async () => {
    const stranger = generatePrivateKey();
    const op = await prepareOp(stranger, [{ to: owner.address, value: 1n }]);
    await expect(sendUserOperation({ bundler, userOp: op })).rejects.toThrow(/AA24|signature/i);

    const good = await prepareOp(controllerKey, [{ to: owner.address, value: 1n }]);
    const forged = await sponsorUserOperation({
      userOp: good,
      paymaster: devnet.paymaster,
      signer: localDigestSigner(stranger),
      chainId: devnet.chainId,
    });
    await expect(
      sendUserOperation({ bundler, userOp: await signUserOperation({ userOp: forged, signer: controller, chainId: devnet.chainId }) }),
    ).rejects.toThrow(/AA34|signature/i);
  });

  it("after the owner calls setController(address(0)) a controller-signed op is refused; the owner can set it back via execute", async () => {
    // The owner EOA removes the controller directly.
    await setBalance(client, owner.address, parseEther("1"));
    const ownerWallet = createWalletClient({ chain: foundry, transport: http(devnet.rpcUrl), account: privateKeyToAccount(ownerKey) });
    const txHash = await ownerWallet.writeContract({
      address: account,
      abi: controlledAccountAbi,
      functionName: "setController",
      args: [zeroAddress],
    });
    const txReceipt = await client.waitForTransactionReceipt({ hash: txHash, pollingInterval: 50 });
    const [changed] = parseEventLogs({ abi: controlledAccountAbi, logs: txReceipt.logs, eventName: "ControllerChanged" });
    expect(changed?.args).toEqual({ previousController: controller.address, newController: zeroAddress });
    expect(await client.readContract({ address: account, abi: controlledAccountAbi, functionName: "controller" })).toBe(zeroAddress);

    // Nobody but the owner or the account itself may change it.
    const controllerWallet = createWalletClient({
      chain: foundry,
      transport: http(devnet.rpcUrl),
      account: privateKeyToAccount(controllerKey),
    });
    await expect(
      controllerWallet.writeContract({
        address: account,
        abi: controlledAccountAbi,
        functionName: "setController",
        args: [controller.address],
      }),
    ).rejects.toThrow(/only owner/);

    const refused = await prepareOp(controllerKey, [{ to: owner.address, value: 1n }]);
    await expect(sendUserOperation({ bundler, userOp: refused })).rejects.toThrow(/AA24|signature/i);

    // The owner restores the controller through the account itself (user op -> execute -> setController).
    const { receipt } = await execute(
      [{ to: account, data: encodeFunctionData({ abi: controlledAccountAbi, functionName: "setController", args: [controller.address] }) }],
      owner,
    );
    expect(receipt.success).toBe(true);
    expect(await client.readContract({ address: account, abi: controlledAccountAbi, functionName: "controller" })).toBe(controller.address);
    const again = await execute([{ to: owner.address, value: 1n }], controller);
    expect(again.receipt.success).toBe(true);
  });

  it("the SimpleAccount initializer is disabled and the implementation cannot be initialized", async () => {
    const implementation = await client.readContract({
      address: devnet.factory,
      abi: controlledAccountFactoryAbi,
      functionName: "accountImplementation",
    });
    await expect(
      client.simulateContract({
        address: implementation,
        abi: controlledAccountAbi,
        functionName: "initialize",
        args: [owner.address, owner.address],
        account: owner.address,
      }),
    ).rejects.toThrow();
    await expect(
      client.call({
        to: account,
        data: encodeFunctionData({
          abi: [
            { type: "function", name: "initialize", inputs: [{ type: "address", name: "o" }], outputs: [], stateMutability: "nonpayable" },
          ],
          functionName: "initialize",
          args: [owner.address],
        }),
      }),
    ).rejects.toThrow(/use initialize\(owner, controller\)/);
  });
});

describe("devnet: persisted state survives a restart", () => {
  const controllerKey = generatePrivateKey();
  const stateDir = mkdtempSync(join(tmpdir(), "devnet-state-"));
  let devnet: Devnet | undefined;

  afterAll(async () => {
    await devnet?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  }, 30_000);

  it("keeps contracts, accounts and balances, and the bundler works again", async () => {
    const controller = localDigestSigner(controllerKey);
    const owner = privateKeyToAccount(generatePrivateKey()).address;
    const recipient = privateKeyToAccount(generatePrivateKey()).address;

    devnet = await startDevnet({ stateDir, controllerPrivateKey: controllerKey, log });
    const first = { ...devnet };
    let client = createPublicClient({ chain: foundry, transport: http(devnet.rpcUrl), pollingInterval: 50 });
    let bundler = createBundler(devnet.bundlerUrl);
    const account = await getAccountAddress(client, { factory: devnet.factory, owner, salt: 0n });
    await setBalance(client, account, parseEther("1"));
    const run = () =>
      executeUserOperation({
        client,
        bundler,
        chainId: devnet!.chainId,
        factory: devnet!.factory,
        owner,
        salt: 0n,
        calls: [{ to: recipient, value: 1n }],
        signer: controller,
        paymaster: { address: devnet!.paymaster, signer: controller },
      });
    expect((await run()).receipt.success).toBe(true);
    // A planted token's balances are the chain's own storage: kept too (planting again writes code only).
    const usdc = devnet.tokens.find((t) => t.symbol === "USDC")!.address;
    const minter = privateKeyToAccount(generatePrivateKey());
    await setBalance(client, minter.address, parseEther("1"));
    const mint = parseAbi(["function mint(address to, uint256 amount)"]);
    const minted = await createWalletClient({ chain: foundry, transport: http(devnet.rpcUrl), account: minter }).writeContract({
      address: usdc,
      abi: mint,
      functionName: "mint",
      args: [recipient, 4_200_000n],
    });
    await client.waitForTransactionReceipt({ hash: minted });
    const blockBefore = await client.getBlockNumber({ cacheTime: 0 });
    await devnet.stop();

    const t0 = Date.now();
    devnet = await startDevnet({ stateDir, controllerPrivateKey: controllerKey, log });
    console.log(`devnet restarted from persisted state in ${Date.now() - t0} ms`);
    expect({ ...devnet, rpcUrl: "", bundlerUrl: "", stop: undefined }).toEqual({ ...first, rpcUrl: "", bundlerUrl: "", stop: undefined });
    client = createPublicClient({ chain: foundry, transport: http(devnet.rpcUrl), pollingInterval: 50 });
    bundler = createBundler(devnet.bundlerUrl);
    expect(await client.getBlockNumber({ cacheTime: 0 })).toBeGreaterThanOrEqual(blockBefore);
    expect(await client.getCode({ address: account })).toMatch(/^0x.+/);
    expect(await client.getBalance({ address: recipient })).toBe(1n);
    expect(await client.readContract({ address: usdc, abi: erc20Abi, functionName: "balanceOf", args: [recipient] })).toBe(4_200_000n);
    const second = await run();
    expect(second.userOp.nonce).toBe(1n);
    expect(second.receipt.success).toBe(true);
    expect(await client.getBalance({ address: recipient })).toBe(2n);
  }, 120_000);
});
