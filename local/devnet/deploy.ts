/**
 * The devnet's contracts and accounts (devnet.ts deploys them): well-known keys, deterministic CREATE2 addresses,
 * idempotent deployment of EntryPoint, factory and paymaster (staked and funded), funding of the controller and
 * the bundler's keys.
 */
import {
  concat,
  createWalletClient,
  encodeAbiParameters,
  encodeFunctionData,
  getContractAddress,
  http,
  parseEther,
  zeroHash,
  type Address,
  type Hex,
  type PublicClient,
  type WalletClient,
  type Account,
  type Chain,
  type Transport,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import {
  artifacts,
  CREATE2_DEPLOYER,
  CREATE2_DEPLOYER_RUNTIME_CODE,
  ENTRYPOINT_V07_SALT,
  loadEntryPointArtifact,
  loadVerifyingPaymasterArtifact,
  verifyingPaymasterAbi,
} from "../../shared/chain/solidity/artifacts";
import { entryPoint07Abi, entryPoint07Address } from "viem/account-abstraction";

export const DEVNET_CHAIN_ID = 31337;
/** Well-known anvil dev keys (mnemonic "test test ... junk"). */
export const ANVIL_KEYS = {
  /** #0: deployer / funder, owner of the paymaster. */
  deployer: "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
  /** #8: Alto executor. */
  bundlerExecutor: "0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97",
  /** #9: Alto utility wallet (deploys Alto's simulation contracts). */
  bundlerUtility: "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6",
} as const satisfies Record<string, Hex>;

/** CREATE2 salt of our factory and paymaster (addresses still depend on constructor args). */
const DEVNET_SALT: Hex = zeroHash;
const PAYMASTER_UNSTAKE_DELAY_SECONDS = 86_400;
const PAYMASTER_STAKE = parseEther("1");
const PAYMASTER_MIN_DEPOSIT = parseEther("10");
const PAYMASTER_DEPOSIT = parseEther("100");
const CONTROLLER_MIN_BALANCE = parseEther("10");
const CONTROLLER_FUNDING = parseEther("100");
const BUNDLER_MIN_BALANCE = parseEther("100");
const BUNDLER_FUNDING = parseEther("1000");

/** Constructor-args-included init code of the factory for a controller. */
function factoryInitCode(entryPoint: Address, controller: Address): Hex {
  return concat([
    artifacts.ControlledAccountFactory.bytecode,
    encodeAbiParameters([{ type: "address" }, { type: "address" }], [entryPoint, controller]),
  ]);
}

/** Init code of the VerifyingPaymaster for a signer. */
function paymasterInitCode(entryPoint: Address, signer: Address): Hex {
  return concat([
    loadVerifyingPaymasterArtifact().bytecode,
    encodeAbiParameters([{ type: "address" }, { type: "address" }], [entryPoint, signer]),
  ]);
}

/** Deterministic devnet addresses for a controller / paymaster signer, without starting anything. */
export function devnetAddresses(controller: Address, paymasterSigner: Address = controller) {
  const create2 = (salt: Hex, bytecode: Hex) => getContractAddress({ opcode: "CREATE2", from: CREATE2_DEPLOYER, salt, bytecode });
  const entryPoint = entryPoint07Address;
  return {
    entryPoint,
    factory: create2(DEVNET_SALT, factoryInitCode(entryPoint, controller)),
    paymaster: create2(DEVNET_SALT, paymasterInitCode(entryPoint, paymasterSigner)),
  };
}
// ---------------------------------------------------------------------------------------------
// Contracts

type Wallet = WalletClient<Transport, Chain, Account>;

async function hasCode(client: PublicClient, address: Address): Promise<boolean> {
  const code = await client.getCode({ address });
  return code !== undefined && code !== "0x";
}

async function sendAndWait(client: PublicClient, wallet: Wallet, tx: Parameters<Wallet["sendTransaction"]>[0]) {
  const hash = await wallet.sendTransaction(tx);
  const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  if (receipt.status !== "success") throw new Error(`devnet: transaction ${hash} reverted`);
  return receipt;
}

async function deployCreate2(
  client: PublicClient,
  wallet: Wallet,
  name: string,
  salt: Hex,
  initCode: Hex,
  note: (l: string) => void,
): Promise<Address> {
  const address = getContractAddress({ opcode: "CREATE2", from: CREATE2_DEPLOYER, salt, bytecode: initCode });
  if (await hasCode(client, address)) return address;
  await sendAndWait(client, wallet, { to: CREATE2_DEPLOYER, data: concat([salt, initCode]) });
  if (!(await hasCode(client, address))) throw new Error(`devnet: CREATE2 deployment of ${name} failed`);
  note(`deployed ${name} at ${address}`);
  return address;
}

export async function deployContracts(
  client: PublicClient,
  wallet: Wallet,
  { controller, paymasterSigner, note }: { controller: Address; paymasterSigner: Address; note: (l: string) => void },
) {
  if (!(await hasCode(client, CREATE2_DEPLOYER))) {
    await client.request({
      method: "anvil_setCode" as never,
      params: [CREATE2_DEPLOYER, CREATE2_DEPLOYER_RUNTIME_CODE] as never,
    });
  }
  const entryPoint = await deployCreate2(client, wallet, "EntryPoint v0.7", ENTRYPOINT_V07_SALT, loadEntryPointArtifact().bytecode, note);
  if (entryPoint.toLowerCase() !== entryPoint07Address.toLowerCase()) {
    throw new Error(`devnet: EntryPoint landed at ${entryPoint}, expected ${entryPoint07Address}`);
  }
  const factory = await deployCreate2(
    client,
    wallet,
    "ControlledAccountFactory",
    DEVNET_SALT,
    factoryInitCode(entryPoint, controller),
    note,
  );
  const paymaster = await deployCreate2(
    client,
    wallet,
    "VerifyingPaymaster",
    DEVNET_SALT,
    paymasterInitCode(entryPoint, paymasterSigner),
    note,
  );

  // The paymaster's Ownable owner is its deployer, i.e. the CREATE2 deployer contract: hand
  // ownership to anvil account #0 (by impersonation) so it can stake and withdraw.
  const owner = await client.readContract({ address: paymaster, abi: verifyingPaymasterAbi, functionName: "owner" });
  if (owner.toLowerCase() === CREATE2_DEPLOYER.toLowerCase()) {
    await anvil(client, "anvil_setBalance", [CREATE2_DEPLOYER, "0xde0b6b3a7640000"]);
    await anvil(client, "anvil_impersonateAccount", [CREATE2_DEPLOYER]);
    try {
      const impersonated = createWalletClient({
        chain: wallet.chain,
        transport: http(wallet.transport.url as string),
        account: CREATE2_DEPLOYER,
      });
      const hash = await impersonated.writeContract({
        address: paymaster,
        abi: verifyingPaymasterAbi,
        functionName: "transferOwnership",
        args: [wallet.account.address],
      });
      const r = await client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
      if (r.status !== "success") throw new Error("devnet: paymaster transferOwnership reverted");
    } finally {
      await anvil(client, "anvil_stopImpersonatingAccount", [CREATE2_DEPLOYER]);
    }
    note(`paymaster owner is now ${wallet.account.address}`);
  }

  const info = await client.readContract({
    address: entryPoint,
    abi: entryPoint07Abi,
    functionName: "getDepositInfo",
    args: [paymaster],
  });
  if (!info.staked) {
    await sendAndWait(client, wallet, {
      to: paymaster,
      value: PAYMASTER_STAKE,
      data: encodeFunctionData({
        abi: verifyingPaymasterAbi,
        functionName: "addStake",
        args: [PAYMASTER_UNSTAKE_DELAY_SECONDS],
      }),
    });
    note(`paymaster staked (${PAYMASTER_UNSTAKE_DELAY_SECONDS}s unstake delay)`);
  }
  if (info.deposit < PAYMASTER_MIN_DEPOSIT) {
    await sendAndWait(client, wallet, {
      to: paymaster,
      value: PAYMASTER_DEPOSIT,
      data: encodeFunctionData({ abi: verifyingPaymasterAbi, functionName: "deposit" }),
    });
    note("paymaster deposit topped up");
  }
  return { entryPoint, factory, paymaster };
}

export async function fundAccounts(client: PublicClient, wallet: Wallet, controller: Address, note: (l: string) => void) {
  const targets: [Address, bigint, bigint][] = [
    [controller, CONTROLLER_MIN_BALANCE, CONTROLLER_FUNDING],
    [privateKeyToAccount(ANVIL_KEYS.bundlerExecutor).address, BUNDLER_MIN_BALANCE, BUNDLER_FUNDING],
    [privateKeyToAccount(ANVIL_KEYS.bundlerUtility).address, BUNDLER_MIN_BALANCE, BUNDLER_FUNDING],
  ];
  for (const [address, min, amount] of targets) {
    if ((await client.getBalance({ address })) < min) {
      await sendAndWait(client, wallet, { to: address, value: amount });
      note(`funded ${address}`);
    }
  }
}

async function anvil(client: PublicClient, method: string, params: unknown[]): Promise<unknown> {
  return client.request({ method: method as never, params: params as never });
}
