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
import type { Address, Hex } from "viem";
import { entryPoint07Address, type BundlerClient, type UserOperationReceipt } from "viem/account-abstraction";
import { signUserOperation, type DigestSigner, type UserOperationV07 } from "./userop-signer";
import { buildUserOperation, type BuildUserOperationParams } from "./userop-account";
import { sponsorUserOperation, withVerifyingPaymasterStub } from "./userop-paymaster";
import { estimateUserOperationGas, sendUserOperation, waitForUserOperationReceipt } from "./userop-bundler";

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
async function prepareUserOperation(p: ExecuteUserOperationParams): Promise<UserOperationV07> {
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
