/**
 * ERC-4337 v0.7 two-dimensional nonces (API.md §19): a nonce is a 192-bit key and a 64-bit sequence,
 * `key << 64 | sequence`, and the EntryPoint keeps one sequence per (sender, key). Operations under different keys
 * never wait for each other and can never take each other's nonce.
 *
 * The service gives every user operation its own key, derived from the operation's identity (a withdrawal's id;
 * an execution, node and loop iteration): the same identity always gives the same key, and a fresh key's sequence
 * is 0, so the nonce of an operation is known before anything is read or stored and no counter is shared by
 * processes. Key 0 is left to the wallet's owner (and to `getNonce`, API.md §11.7).
 */
import { keccak256, toHex } from "viem";

const SEQUENCE_BITS = 64n;
const SEQUENCE_MASK = (1n << SEQUENCE_BITS) - 1n;

/** The 192-bit nonce key of the operation named by `identity`: the first 24 bytes of its keccak-256 (never 0). */
export function nonceKeyOf(identity: string): bigint {
  const key = BigInt(keccak256(toHex(`user-operation:${identity}`))) >> SEQUENCE_BITS;
  return key === 0n ? 1n : key;
}

/** The nonce of `key` at `sequence` (0: the key's first operation). */
export const composeNonce = (key: bigint, sequence = 0n): bigint => (key << SEQUENCE_BITS) | sequence;

/** The key and sequence of a nonce. */
export const splitNonce = (nonce: bigint): { key: bigint; sequence: bigint } => ({
  key: nonce >> SEQUENCE_BITS,
  sequence: nonce & SEQUENCE_MASK,
});

/** The identity of a withdrawal's operation (API.md §11.5). */
export const withdrawalIdentity = (withdrawalId: string) => `withdrawal/${withdrawalId}`;

/** The identity of a workflow step's operation (API.md §8.4): the execution, the node and the loop iteration. */
export const stepIdentity = (executionId: string, nodeId: string, iteration?: number) =>
  `execution/${executionId}/${nodeId}${iteration === undefined ? "" : `/${iteration}`}`;
