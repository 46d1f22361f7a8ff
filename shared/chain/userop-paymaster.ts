/** Sponsoring a user operation with the VerifyingPaymaster. */
import { concat, encodeAbiParameters, keccak256, numberToHex, pad, slice, type Address, type Hex } from "viem";
import { toPackedUserOperation } from "viem/account-abstraction";
import { DUMMY_SIGNATURE, signHashEip191, type DigestSigner, type UserOperationV07 } from "./userop-signer";

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
function encodeVerifyingPaymasterData({ validUntil, validAfter, signature }: PaymasterWindow & { signature: Hex }): Hex {
  return concat([encodeAbiParameters([{ type: "uint48" }, { type: "uint48" }], [validUntil, validAfter]), signature]);
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
const PAYMASTER_STUB_GAS = { paymasterVerificationGasLimit: 100_000n, paymasterPostOpGasLimit: 0n };

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
