/** Account calls and addresses, and building an unsigned user operation. */
import {
  BaseError,
  ContractFunctionRevertedError,
  concat,
  encodeAbiParameters,
  encodeFunctionData,
  getContractAddress,
  numberToHex,
  pad,
  type Address,
  type Hex,
  type PublicClient,
} from "viem";
import { entryPoint07Abi, entryPoint07Address, type BundlerClient } from "viem/account-abstraction";
import { artifacts, controlledAccountAbi, controlledAccountFactoryAbi } from "./solidity/artifacts";
import { DUMMY_SIGNATURE, type UserOperationV07 } from "./userop-signer";

// ---------------------------------------------------------------------------------------------
// Account calls and addresses

export interface AccountCall {
  to: Address;
  value?: bigint;
  data?: Hex;
}

/** callData for the account: execute(...) for one call, executeBatch(...) otherwise. */
export function encodeAccountCalls(calls: readonly AccountCall[]): Hex {
  if (calls.length === 1) {
    const [c] = calls as [AccountCall];
    return encodeFunctionData({
      abi: controlledAccountAbi,
      functionName: "execute",
      args: [c.to, c.value ?? 0n, c.data ?? "0x"],
    });
  }
  return encodeFunctionData({
    abi: controlledAccountAbi,
    functionName: "executeBatch",
    args: [calls.map((c) => c.to), calls.map((c) => c.value ?? 0n), calls.map((c) => c.data ?? "0x")],
  });
}

/** factoryData (createAccount calldata) of the account of `owner` / `salt`. */
export function encodeCreateAccount(owner: Address, salt: bigint): Hex {
  return encodeFunctionData({ abi: controlledAccountFactoryAbi, functionName: "createAccount", args: [owner, salt] });
}

/** Account address from the factory (`getAddress(owner, salt)`), one eth_call. */
export function getAccountAddress(
  client: PublicClient,
  { factory, owner, salt }: { factory: Address; owner: Address; salt: bigint },
): Promise<Address> {
  return client.readContract({ address: factory, abi: controlledAccountFactoryAbi, functionName: "getAddress", args: [owner, salt] });
}

/**
 * Account address computed offline (same as factory.getAddress). `implementation` is
 * factory.accountImplementation(), `controller` is factory.controller().
 */
export function predictAccountAddress({
  factory,
  implementation,
  controller,
  owner,
  salt,
}: {
  factory: Address;
  implementation: Address;
  controller: Address;
  owner: Address;
  salt: bigint;
}): Address {
  const initCall = encodeFunctionData({
    abi: controlledAccountAbi,
    functionName: "initialize",
    args: [owner, controller],
  });
  const bytecode = concat([
    artifacts.ERC1967Proxy.bytecode,
    encodeAbiParameters([{ type: "address" }, { type: "bytes" }], [implementation, initCall]),
  ]);
  return getContractAddress({ opcode: "CREATE2", from: factory, salt: pad(numberToHex(salt), { size: 32 }), bytecode });
}

/**
 * Sender address as the EntryPoint computes it: getSenderAddress(initCode) always reverts with
 * SenderAddressResult(address); decode it.
 */
export async function getSenderAddress(
  client: PublicClient,
  { factory, factoryData, entryPoint = entryPoint07Address }: { factory: Address; factoryData: Hex; entryPoint?: Address },
): Promise<Address> {
  try {
    await client.simulateContract({
      address: entryPoint,
      abi: entryPoint07Abi,
      functionName: "getSenderAddress",
      args: [concat([factory, factoryData])],
    });
  } catch (e) {
    const reverted = e instanceof BaseError ? e.walk((x) => x instanceof ContractFunctionRevertedError) : undefined;
    if (reverted instanceof ContractFunctionRevertedError && reverted.data?.errorName === "SenderAddressResult") {
      return reverted.data.args?.[0] as Address;
    }
    throw e;
  }
  throw new Error("EntryPoint.getSenderAddress did not revert");
}

// ---------------------------------------------------------------------------------------------
// Building

export interface UserOperationFees {
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

/**
 * Fees for a user operation: the bundler's `pimlico_getUserOperationGasPrice` ("fast") when
 * available (Alto/Pimlico reject ops priced below it), else the node's EIP-1559 estimate.
 */
export async function getUserOperationFees({
  client,
  bundler,
}: {
  client: PublicClient;
  bundler?: BundlerClient;
}): Promise<UserOperationFees> {
  if (bundler) {
    try {
      const res = (await bundler.request({
        method: "pimlico_getUserOperationGasPrice" as never,
        params: [] as never,
      })) as { fast: { maxFeePerGas: Hex; maxPriorityFeePerGas: Hex } };
      return { maxFeePerGas: BigInt(res.fast.maxFeePerGas), maxPriorityFeePerGas: BigInt(res.fast.maxPriorityFeePerGas) };
    } catch {
      // not an Alto/Pimlico bundler: fall through
    }
  }
  const fees = await client.estimateFeesPerGas();
  return { maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };
}

export interface BuildUserOperationParams {
  /** Public client of the chain. */
  client: PublicClient;
  entryPoint?: Address;
  factory: Address;
  owner: Address;
  salt: bigint;
  calls: readonly AccountCall[];
  /** The wallet address when already known (skips factory.getAddress). */
  sender?: Address;
  /** 192-bit nonce key (default 0). */
  nonceKey?: bigint;
  /** Fixed fees; otherwise getUserOperationFees({ client, bundler }). */
  fees?: UserOperationFees;
  bundler?: BundlerClient;
  /** A nonce chosen by the caller (a nonce manager); otherwise the EntryPoint's. */
  nonce?: bigint;
  /** Whether the account is deployed, when already known (skips eth_getCode). */
  deployed?: boolean;
}

/**
 * Unsigned op for the wallet of (factory, owner, salt) running `calls`: factory/factoryData only
 * while the account is not deployed, nonce from the EntryPoint, gas limits 0 (estimate next),
 * signature = DUMMY_SIGNATURE, no paymaster.
 */
export async function buildUserOperation(p: BuildUserOperationParams): Promise<UserOperationV07> {
  const entryPoint = p.entryPoint ?? entryPoint07Address;
  const sender = p.sender ?? (await getAccountAddress(p.client, p));
  const [deployed, nonce, fees] = await Promise.all([
    p.deployed ?? p.client.getCode({ address: sender }).then((code) => code !== undefined && code !== "0x"),
    p.nonce ??
      p.client.readContract({
        address: entryPoint,
        abi: entryPoint07Abi,
        functionName: "getNonce",
        args: [sender, p.nonceKey ?? 0n],
      }),
    p.fees ?? getUserOperationFees({ client: p.client, bundler: p.bundler }),
  ]);
  return {
    sender,
    nonce,
    ...(deployed ? {} : { factory: p.factory, factoryData: encodeCreateAccount(p.owner, p.salt) }),
    callData: encodeAccountCalls(p.calls),
    callGasLimit: 0n,
    verificationGasLimit: 0n,
    preVerificationGas: 0n,
    maxFeePerGas: fees.maxFeePerGas,
    maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    signature: DUMMY_SIGNATURE,
  };
}
