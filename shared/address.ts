/**
 * Ethereum addresses without viem: shape, EIP-55 checksums and the sign-in signature's signer. The
 * HTTP layer, tokens and sign-in need only these, so the functions that do not touch a chain carry a
 * keccak-256 (and, for sign-in, secp256k1) instead of all of viem. Answers are the same as viem's
 * `getAddress`, `isAddress` and `recoverMessageAddress` (tests/address.test.ts compares them).
 */
import { secp256k1 } from "@noble/curves/secp256k1";
import { keccak_256 } from "@noble/hashes/sha3";
import { bytesToHex, concatBytes, hexToBytes, utf8ToBytes } from "@noble/hashes/utils";

export type Address = `0x${string}`;

export const ZERO_ADDRESS: Address = "0x0000000000000000000000000000000000000000";

const HEX40 = /^0x[0-9a-fA-F]{40}$/;
const SIGNATURE = /^0x[0-9a-fA-F]{130}$/;

/** `0x` followed by 40 hex digits, in any case (viem's `isAddress(s, { strict: false })`). */
export function isAddressShape(value: string): value is Address {
  return HEX40.test(value);
}

/** The EIP-55 form of an address in any case (viem's `getAddress`); throws if `address` is not one. */
export function checksumAddress(address: string): Address {
  if (!HEX40.test(address)) throw new Error(`Not an address: ${address.slice(0, 64)}`);
  const lower = address.slice(2).toLowerCase();
  const hash = keccak_256(utf8ToBytes(lower));
  let out = "0x";
  for (let i = 0; i < 40; i++) {
    const nibble = (hash[i >> 1]! >> (i % 2 === 0 ? 4 : 0)) & 0x0f;
    out += nibble >= 8 ? lower[i]!.toUpperCase() : lower[i]!;
  }
  return out as Address;
}

/**
 * The Address rule of API.md §1.5: all lowercase, all uppercase, or mixed case carrying a valid EIP-55
 * checksum. (viem's strict `isAddress` also refuses all-uppercase, which the API accepts.)
 */
export function isAcceptedAddress(value: string): value is Address {
  if (!HEX40.test(value)) return false;
  const hex = value.slice(2);
  return hex === hex.toLowerCase() || hex === hex.toUpperCase() || checksumAddress(value) === value;
}

/**
 * The EIP-55 address whose key made `signature` (65 bytes r ‖ s ‖ v, v in {0, 1, 27, 28}) over
 * `message` with EIP-191 `personal_sign` (the UTF-8 bytes of the text as given). Throws when the
 * signature is malformed or recovers no key (r or s zero or ≥ n, r not an x coordinate).
 */
export function recoverPersonalSigner(message: string, signature: string): Address {
  if (!SIGNATURE.test(signature)) throw new Error("The signature must be 65 bytes of hex.");
  const bytes = hexToBytes(signature.slice(2));
  const v = bytes[64]!;
  if (v !== 0 && v !== 1 && v !== 27 && v !== 28) throw new Error("The signature's v must be 0, 1, 27 or 28.");
  const text = utf8ToBytes(message);
  const digest = keccak_256(concatBytes(utf8ToBytes(`\x19Ethereum Signed Message:\n${text.length}`), text));
  const publicKey = secp256k1.Signature.fromCompact(bytes.subarray(0, 64))
    .addRecoveryBit(v >= 27 ? v - 27 : v)
    .recoverPublicKey(digest)
    .toRawBytes(false);
  return checksumAddress(`0x${bytesToHex(keccak_256(publicKey.subarray(1)).subarray(-20))}`);
}
