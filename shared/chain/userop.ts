/**
 * ERC-4337 v0.7 user-operation helpers for ControlledAccount wallets, sponsored by the
 * VerifyingPaymaster and sent through a bundler (Alto locally).
 *
 * Typical flow (see executeUserOperation for all of it in one call):
 *
 *   let op = await buildUserOperation({ client, factory, owner, salt, calls, bundler });
 *   op = withVerifyingPaymasterStub(op, { paymaster });              // stub paymaster fields
 *   op = await estimateUserOperationGas({ bundler, userOp: op });     // gas limits from the bundler
 *   op = await sponsorUserOperation({ userOp: op, paymaster, signer: paymasterSigner, chainId });
 *   op = await signUserOperation({ userOp: op, signer: controllerOrOwner, chainId });
 *   const hash = await sendUserOperation({ bundler, userOp: op });
 *   const receipt = await waitForUserOperationReceipt({ bundler, hash });
 *
 * Signing model: both the account and the paymaster check an ECDSA signature over the EIP-191
 * message of a 32-byte hash (`toEthSignedMessageHash`), so signers only need `signDigest`, which
 * is called with `hashMessage({ raw: hash })`.
 */
import {
  BaseError,
  ContractFunctionRevertedError,
  concat,
  encodeAbiParameters,
  encodeFunctionData,
  getContractAddress,
  hashMessage,
  http,
  keccak256,
  numberToHex,
  pad,
  slice,
  type Address,
  type Hex,
  type PublicClient,
  type StateOverride,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import {
  createBundlerClient,
  entryPoint07Abi,
  entryPoint07Address,
  getUserOperationHash,
  toPackedUserOperation,
  type BundlerClient,
  type UserOperation,
  type UserOperationReceipt,
} from "viem/account-abstraction";
import { artifacts, controlledAccountAbi, controlledAccountFactoryAbi } from "./contracts/index";

/** A v0.7 user operation (unpacked, as sent over RPC). */
export type UserOperationV07 = UserOperation<"0.7">;

// ---------------------------------------------------------------------------------------------
// Signers

/** Signs a 32-byte digest as is (no prefixing). Returns 65-byte r|s|v with v = 27/28. */
export interface DigestSigner {
  address: Address;
  signDigest(hash: Hex): Promise<Hex>;
}

/** DigestSigner backed by a raw private key (tests, devnet, local controller). */
export function localDigestSigner(privateKey: Hex): DigestSigner {
  const account = privateKeyToAccount(privateKey);
  return {
    address: account.address,
    signDigest: (hash) => account.sign({ hash }),
  };
}

/** EIP-191 signature ("\x19Ethereum Signed Message:\n32" + hash) of a 32-byte hash. */
export function signHashEip191(signer: DigestSigner, hash: Hex): Promise<Hex> {
  return signer.signDigest(hashMessage({ raw: hash }));
}

/**
 * Well-formed 65-byte signature that recovers to some unrelated address: used while estimating
 * gas (validation then fails softly instead of reverting in ecrecover).
 */
export const DUMMY_SIGNATURE: Hex =
  "0xfffffffffffffffffffffffffffffff0000000000000000000000000000000007aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1c";

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
}: { factory: Address; implementation: Address; controller: Address; owner: Address; salt: bigint }): Address {
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
}: { client: PublicClient; bundler?: BundlerClient }): Promise<UserOperationFees> {
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

// ---------------------------------------------------------------------------------------------
// VerifyingPaymaster (v0.7 sample)
//
// paymasterAndData = paymaster(20) | paymasterVerificationGasLimit(16) | paymasterPostOpGasLimit(16)
//                  | abi.encode(uint48 validUntil, uint48 validAfter)(64) | signature(65)
// The signature is EIP-191 over getHash(userOp, validUntil, validAfter), which covers every op
// field except the signature and paymasterData (but including the paymaster gas limits).

export interface PaymasterWindow {
  /** Unix seconds; 0 = no expiry. */
  validUntil: number;
  /** Unix seconds; 0 = valid immediately. */
  validAfter: number;
}

/** Full paymasterAndData bytes of the packed op. */
export function packPaymasterAndData({
  paymaster,
  paymasterVerificationGasLimit,
  paymasterPostOpGasLimit,
  paymasterData,
}: {
  paymaster: Address;
  paymasterVerificationGasLimit: bigint;
  paymasterPostOpGasLimit: bigint;
  paymasterData: Hex;
}): Hex {
  return concat([
    paymaster,
    pad(numberToHex(paymasterVerificationGasLimit), { size: 16 }),
    pad(numberToHex(paymasterPostOpGasLimit), { size: 16 }),
    paymasterData,
  ]);
}

/** paymasterData of the VerifyingPaymaster: abi.encode(validUntil, validAfter) | signature. */
export function encodeVerifyingPaymasterData({ validUntil, validAfter, signature }: PaymasterWindow & { signature: Hex }): Hex {
  return concat([
    encodeAbiParameters([{ type: "uint48" }, { type: "uint48" }], [validUntil, validAfter]),
    signature,
  ]);
}

/** Offline equivalent of VerifyingPaymaster.getHash(userOp, validUntil, validAfter). */
export function getVerifyingPaymasterHash({
  userOp,
  paymaster,
  chainId,
  validUntil,
  validAfter,
}: PaymasterWindow & { userOp: UserOperationV07; paymaster: Address; chainId: number }): Hex {
  const packed = toPackedUserOperation({ ...userOp, paymaster });
  return keccak256(
    encodeAbiParameters(
      [
        { type: "address" }, // sender
        { type: "uint256" }, // nonce
        { type: "bytes32" }, // keccak256(initCode)
        { type: "bytes32" }, // keccak256(callData)
        { type: "bytes32" }, // accountGasLimits
        { type: "uint256" }, // paymasterAndData[20:52] (paymaster verification | postOp gas limits)
        { type: "uint256" }, // preVerificationGas
        { type: "bytes32" }, // gasFees
        { type: "uint256" }, // block.chainid
        { type: "address" }, // paymaster
        { type: "uint48" }, // validUntil
        { type: "uint48" }, // validAfter
      ],
      [
        packed.sender,
        packed.nonce,
        keccak256(packed.initCode),
        keccak256(packed.callData),
        packed.accountGasLimits,
        BigInt(slice(packed.paymasterAndData, 20, 52)),
        packed.preVerificationGas,
        packed.gasFees,
        BigInt(chainId),
        paymaster,
        validUntil,
        validAfter,
      ],
    ),
  );
}

/** Default paymaster gas limits used for estimation stubs (the bundler returns real values). */
export const PAYMASTER_STUB_GAS = { paymasterVerificationGasLimit: 100_000n, paymasterPostOpGasLimit: 0n };

/**
 * Op with VerifyingPaymaster fields holding a well-formed dummy signature, for gas estimation
 * (the paymaster's validation runs, its signature check fails softly).
 */
export function withVerifyingPaymasterStub(
  userOp: UserOperationV07,
  { paymaster, validUntil = 0, validAfter = 0 }: { paymaster: Address } & Partial<PaymasterWindow>,
): UserOperationV07 {
  return {
    ...userOp,
    paymaster,
    paymasterVerificationGasLimit: userOp.paymasterVerificationGasLimit || PAYMASTER_STUB_GAS.paymasterVerificationGasLimit,
    paymasterPostOpGasLimit: userOp.paymasterPostOpGasLimit ?? PAYMASTER_STUB_GAS.paymasterPostOpGasLimit,
    paymasterData: encodeVerifyingPaymasterData({ validUntil, validAfter, signature: DUMMY_SIGNATURE }),
  };
}

export interface SponsorUserOperationParams {
  /** Op with final gas limits and fees (the paymaster signature covers them). */
  userOp: UserOperationV07;
  paymaster: Address;
  /** The paymaster's verifyingSigner. */
  signer: DigestSigner;
  chainId: number;
  /** Default: now + 1 hour (wall clock). */
  validUntil?: number;
  /** Default: 0. */
  validAfter?: number;
}

/** Fill paymaster, paymasterData (window + signature); keeps the op's paymaster gas limits. */
export async function sponsorUserOperation(p: SponsorUserOperationParams): Promise<UserOperationV07> {
  const validUntil = p.validUntil ?? Math.floor(Date.now() / 1000) + 3600;
  const validAfter = p.validAfter ?? 0;
  const op: UserOperationV07 = {
    ...p.userOp,
    paymaster: p.paymaster,
    paymasterVerificationGasLimit: p.userOp.paymasterVerificationGasLimit ?? PAYMASTER_STUB_GAS.paymasterVerificationGasLimit,
    paymasterPostOpGasLimit: p.userOp.paymasterPostOpGasLimit ?? PAYMASTER_STUB_GAS.paymasterPostOpGasLimit,
  };
  const hash = getVerifyingPaymasterHash({ userOp: op, paymaster: p.paymaster, chainId: p.chainId, validUntil, validAfter });
  const signature = await signHashEip191(p.signer, hash);
  return { ...op, paymasterData: encodeVerifyingPaymasterData({ validUntil, validAfter, signature }) };
}

// ---------------------------------------------------------------------------------------------
// Signing

/** userOpHash (EntryPoint v0.7 getUserOpHash). */
export function getUserOperationHashV07(
  userOp: UserOperationV07,
  { chainId, entryPoint = entryPoint07Address }: { chainId: number; entryPoint?: Address },
): Hex {
  return getUserOperationHash({ userOperation: userOp, chainId, entryPointAddress: entryPoint, entryPointVersion: "0.7" });
}

/** Sign the op for a ControlledAccount: EIP-191 of userOpHash by the owner or the controller. */
export async function signUserOperation({
  userOp,
  signer,
  chainId,
  entryPoint = entryPoint07Address,
}: { userOp: UserOperationV07; signer: DigestSigner; chainId: number; entryPoint?: Address }): Promise<UserOperationV07> {
  const hash = getUserOperationHashV07(userOp, { chainId, entryPoint });
  return { ...userOp, signature: await signHashEip191(signer, hash) };
}

// ---------------------------------------------------------------------------------------------
// Bundler

/** Bundler client for a bundler URL (viem `createBundlerClient`). */
export function createBundler(url: string): BundlerClient {
  return createBundlerClient({ transport: http(url) });
}

/**
 * eth_estimateUserOperationGas; returns the op with callGasLimit, verificationGasLimit,
 * preVerificationGas and (if the op has a paymaster) the paymaster gas limits filled in.
 */
export async function estimateUserOperationGas({
  bundler,
  userOp,
  entryPoint = entryPoint07Address,
  stateOverride,
}: {
  bundler: BundlerClient;
  userOp: UserOperationV07;
  entryPoint?: Address;
  /** State the simulation assumes (e.g. a sender balance, so gas is estimated whatever the wallet holds). */
  stateOverride?: StateOverride;
}): Promise<UserOperationV07> {
  const gas = await bundler.estimateUserOperationGas({ ...userOp, entryPointAddress: entryPoint, ...(stateOverride ? { stateOverride } : {}) } as never);
  const g = gas as {
    callGasLimit: bigint;
    verificationGasLimit: bigint;
    preVerificationGas: bigint;
    paymasterVerificationGasLimit?: bigint;
    paymasterPostOpGasLimit?: bigint;
  };
  const out: UserOperationV07 = {
    ...userOp,
    callGasLimit: g.callGasLimit,
    verificationGasLimit: g.verificationGasLimit,
    preVerificationGas: g.preVerificationGas,
  };
  if (userOp.paymaster) {
    out.paymasterVerificationGasLimit = g.paymasterVerificationGasLimit ?? userOp.paymasterVerificationGasLimit;
    out.paymasterPostOpGasLimit = g.paymasterPostOpGasLimit ?? userOp.paymasterPostOpGasLimit;
  }
  return out;
}

/** eth_sendUserOperation; returns the userOpHash. */
export async function sendUserOperation({
  bundler,
  userOp,
  entryPoint = entryPoint07Address,
}: { bundler: BundlerClient; userOp: UserOperationV07; entryPoint?: Address }): Promise<Hex> {
  return bundler.sendUserOperation({ ...userOp, entryPointAddress: entryPoint } as never);
}

/** Poll eth_getUserOperationReceipt until the op is included (throws on timeout). */
export function waitForUserOperationReceipt({
  bundler,
  hash,
  timeoutMs = 60_000,
  pollingIntervalMs = 250,
}: { bundler: BundlerClient; hash: Hex; timeoutMs?: number; pollingIntervalMs?: number }): Promise<UserOperationReceipt> {
  return bundler.waitForUserOperationReceipt({ hash, timeout: timeoutMs, pollingInterval: pollingIntervalMs });
}

// ---------------------------------------------------------------------------------------------
// All in one

export interface ExecuteUserOperationParams extends Omit<BuildUserOperationParams, "bundler"> {
  bundler: BundlerClient;
  chainId: number;
  /** Signs the op: the wallet's owner or its controller. */
  signer: DigestSigner;
  /** Sponsor with the VerifyingPaymaster when given. */
  paymaster?: { address: Address; signer: DigestSigner; validUntil?: number; validAfter?: number };
  timeoutMs?: number;
}

/** Build → (stub) → estimate → sponsor → sign (everything but sending). */
export async function prepareUserOperation(p: ExecuteUserOperationParams): Promise<UserOperationV07> {
  const entryPoint = p.entryPoint ?? entryPoint07Address;
  let op = await buildUserOperation(p);
  if (p.paymaster) op = withVerifyingPaymasterStub(op, { paymaster: p.paymaster.address });
  op = await estimateUserOperationGas({ bundler: p.bundler, userOp: op, entryPoint });
  if (p.paymaster) {
    op = await sponsorUserOperation({
      userOp: op,
      paymaster: p.paymaster.address,
      signer: p.paymaster.signer,
      chainId: p.chainId,
      validUntil: p.paymaster.validUntil,
      validAfter: p.paymaster.validAfter,
    });
  }
  return signUserOperation({ userOp: op, signer: p.signer, chainId: p.chainId, entryPoint });
}

/** prepareUserOperation + send + wait. Returns the userOpHash and the receipt. */
export async function executeUserOperation(
  p: ExecuteUserOperationParams,
): Promise<{ userOp: UserOperationV07; hash: Hex; receipt: UserOperationReceipt }> {
  const userOp = await prepareUserOperation(p);
  const hash = await sendUserOperation({ bundler: p.bundler, userOp, entryPoint: p.entryPoint });
  const receipt = await waitForUserOperationReceipt({ bundler: p.bundler, hash, timeoutMs: p.timeoutMs });
  return { userOp, hash, receipt };
}
