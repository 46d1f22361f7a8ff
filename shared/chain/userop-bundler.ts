/** The bundler: client, gas estimation, sending, receipts. */
import { http, type Address, type Hex, type StateOverride } from "viem";
import { createBundlerClient, entryPoint07Address, type BundlerClient, type UserOperationReceipt } from "viem/account-abstraction";
import type { UserOperationV07 } from "./userop-signer";

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
  const gas = await bundler.estimateUserOperationGas({
    ...userOp,
    entryPointAddress: entryPoint,
    ...(stateOverride ? { stateOverride } : {}),
  } as never);
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
}: {
  bundler: BundlerClient;
  userOp: UserOperationV07;
  entryPoint?: Address;
}): Promise<Hex> {
  return bundler.sendUserOperation({ ...userOp, entryPointAddress: entryPoint } as never);
}

/** Poll eth_getUserOperationReceipt until the op is included (throws on timeout). */
export function waitForUserOperationReceipt({
  bundler,
  hash,
  timeoutMs = 60_000,
  pollingIntervalMs = 250,
}: {
  bundler: BundlerClient;
  hash: Hex;
  timeoutMs?: number;
  pollingIntervalMs?: number;
}): Promise<UserOperationReceipt> {
  return bundler.waitForUserOperationReceipt({ hash, timeout: timeoutMs, pollingInterval: pollingIntervalMs });
}
