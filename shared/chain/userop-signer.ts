/**
 * Signers and signing of user operations: both the account and the paymaster
 * check an ECDSA signature over the EIP-191 message of a 32-byte hash, so signers only need `signDigest`.
 */
import { hashMessage, type Address, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { entryPoint07Address, getUserOperationHash, type UserOperation } from "viem/account-abstraction";

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
}: {
  userOp: UserOperationV07;
  signer: DigestSigner;
  chainId: number;
  entryPoint?: Address;
}): Promise<UserOperationV07> {
  const hash = getUserOperationHashV07(userOp, { chainId, entryPoint });
  return { ...userOp, signature: await signHashEip191(signer, hash) };
}
