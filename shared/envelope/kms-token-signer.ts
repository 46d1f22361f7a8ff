/**
 * The token key in AWS: a KMS asymmetric key (ECC_NIST_P256, SIGN_VERIFY) that signs access tokens for the sign-in
 * function, the private half never leaving KMS. KMS signs the SHA-256 digest computed here (MessageType DIGEST:
 * the token's claims are not sent to KMS, and no message size limit applies) and answers a DER-encoded (r, s);
 * JOSE's ES256 wants r ‖ s, each 32 bytes big-endian (RFC 7518 §3.4). The signer port is shared/http/token.ts's
 * TokenSigner.
 */
import { SignCommand, type KMSClient } from "@aws-sdk/client-kms";
import { DER } from "@noble/curves/abstract/weierstrass";
import { createHash } from "node:crypto";

const COORDINATE_BYTES = 32;

/** A DER ECDSA signature (SEQUENCE of two INTEGERs) as JOSE's r ‖ s for P-256: 64 bytes. */
export function derToJose(der: Uint8Array): Uint8Array {
  const { r, s } = DER.toSig(der);
  const out = new Uint8Array(2 * COORDINATE_BYTES);
  for (const [at, value] of [
    [0, r],
    [COORDINATE_BYTES, s],
  ] as const) {
    const hex = value.toString(16).padStart(2 * COORDINATE_BYTES, "0");
    if (value <= 0n || hex.length > 2 * COORDINATE_BYTES) throw new Error("The signature is not a P-256 signature");
    out.set(Buffer.from(hex, "hex"), at);
  }
  return out;
}

/** Signs token signing inputs with the KMS key `keyId` (kms:Sign, ECDSA_SHA_256 over the digest). */
export function kmsTokenSigner(kms: KMSClient, keyId: string) {
  return {
    async sign(signingInput: Uint8Array): Promise<Uint8Array> {
      const { Signature } = await kms.send(
        new SignCommand({
          KeyId: keyId,
          Message: createHash("sha256").update(signingInput).digest(),
          MessageType: "DIGEST",
          SigningAlgorithm: "ECDSA_SHA_256",
        }),
      );
      if (!Signature) throw new Error("KMS returned no signature");
      return derToJose(Signature);
    },
  };
}
