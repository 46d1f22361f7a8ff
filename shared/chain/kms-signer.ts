/**
 * The controller key in AWS: a KMS asymmetric key (ECC_SECG_P256K1) that signs 32-byte digests
 * (Sign, MessageType DIGEST). KMS answers a DER (r, s) signature with no recovery id; Ethereum wants
 * r | s | v with a low s, so the s is normalised and v found by recovering against the key's address.
 */
import { GetPublicKeyCommand, SignCommand, type KMSClient } from "@aws-sdk/client-kms";
import { secp256k1 } from "@noble/curves/secp256k1";
import { bytesToHex, hexToBytes, keccak256, getAddress, type Address, type Hex } from "viem";
import type { DigestSigner } from "./userop-signer";

/** The uncompressed point is the last 65 bytes of the DER SubjectPublicKeyInfo of a secp256k1 key. */
export function addressFromSpki(spki: Uint8Array): Address {
  const point = spki.slice(spki.length - 65);
  if (point[0] !== 0x04) throw new Error("KMS public key is not an uncompressed secp256k1 point");
  return getAddress(`0x${keccak256(point.slice(1)).slice(-40)}`);
}

/** Converts a KMS DER signature over `digest` into a 65-byte Ethereum signature for `address`. */
export function derToEthereumSignature(der: Uint8Array, digest: Hex, address: Address): Hex {
  const signature = secp256k1.Signature.fromDER(bytesToHex(der).slice(2)).normalizeS();
  for (const recovery of [0, 1]) {
    const publicKey = signature.addRecoveryBit(recovery).recoverPublicKey(hexToBytes(digest)).toRawBytes(false);
    if (getAddress(`0x${keccak256(publicKey.slice(1)).slice(-40)}`) === address) {
      return `0x${signature.toCompactHex()}${recovery === 0 ? "1b" : "1c"}`;
    }
  }
  throw new Error("KMS signature does not recover to the controller address");
}

export async function kmsDigestSigner(kms: KMSClient, keyId: string): Promise<DigestSigner> {
  const { PublicKey } = await kms.send(new GetPublicKeyCommand({ KeyId: keyId }));
  if (!PublicKey) throw new Error("KMS returned no public key for the controller");
  const address = addressFromSpki(PublicKey);
  return {
    address,
    async signDigest(hash: Hex) {
      const { Signature } = await kms.send(
        new SignCommand({ KeyId: keyId, Message: hexToBytes(hash), MessageType: "DIGEST", SigningAlgorithm: "ECDSA_SHA_256" }),
      );
      if (!Signature) throw new Error("KMS returned no signature");
      return derToEthereumSignature(Signature, hash, address);
    },
  };
}
