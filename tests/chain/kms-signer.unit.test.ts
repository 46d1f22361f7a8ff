/**
 * The AWS controller signer. KMS's control plane cannot run here, so a stand-in client records the exact
 * commands and answers like KMS does: the key's SubjectPublicKeyInfo, and DER signatures (including
 * high-s ones, which KMS may return) made with a known secp256k1 key.
 */
import { describe, expect, it } from "vitest";
import { GetPublicKeyCommand, SignCommand, type KMSClient } from "@aws-sdk/client-kms";
import { secp256k1 } from "@noble/curves/secp256k1";
import { bytesToHex, hashMessage, hexToBytes, recoverAddress, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { addressFromSpki, derToEthereumSignature, kmsDigestSigner } from "../../shared/chain/kms-signer";

const PRIVATE_KEY: Hex = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const expectedAddress = privateKeyToAccount(PRIVATE_KEY).address;
const N = secp256k1.CURVE.n;

// DER SubjectPublicKeyInfo header of an id-ecPublicKey / secp256k1 key, followed by the 65-byte point.
const SPKI_PREFIX = "3056301006072a8648ce3d020106052b8104000a034200";
const spki = hexToBytes(`0x${SPKI_PREFIX}${bytesToHex(secp256k1.getPublicKey(hexToBytes(PRIVATE_KEY), false)).slice(2)}`);

function fakeKms(options: { highS?: boolean } = {}) {
  const sent: unknown[] = [];
  const client = {
    async send(command: unknown) {
      sent.push(command);
      if (command instanceof GetPublicKeyCommand) return { PublicKey: spki, KeySpec: "ECC_SECG_P256K1" };
      if (command instanceof SignCommand) {
        const sig = secp256k1.sign(command.input.Message as Uint8Array, hexToBytes(PRIVATE_KEY));
        const raw = options.highS ? new secp256k1.Signature(sig.r, N - sig.s) : sig;
        return { Signature: hexToBytes(`0x${raw.toDERHex()}`), SigningAlgorithm: "ECDSA_SHA_256" };
      }
      throw new Error("unexpected command");
    },
  };
  return { client: client as unknown as KMSClient, sent };
}

describe("KMS controller signer", () => {
  it("derives the Ethereum address from the KMS public key", () => {
    expect(addressFromSpki(spki)).toBe(expectedAddress);
  });

  it("sends GetPublicKey once, then Sign with the digest, MessageType DIGEST and ECDSA_SHA_256", async () => {
    const { client, sent } = fakeKms();
    const signer = await kmsDigestSigner(client, "arn:aws:kms:us-east-1:123456789012:key/controller");
    const digest = hashMessage({ raw: `0x${"ab".repeat(32)}` });
    await signer.signDigest(digest);
    expect(sent).toHaveLength(2);
    expect((sent[0] as GetPublicKeyCommand).input).toEqual({ KeyId: "arn:aws:kms:us-east-1:123456789012:key/controller" });
    const sign = (sent[1] as SignCommand).input;
    expect(sign.KeyId).toBe("arn:aws:kms:us-east-1:123456789012:key/controller");
    expect(sign.MessageType).toBe("DIGEST");
    expect(sign.SigningAlgorithm).toBe("ECDSA_SHA_256");
    expect(bytesToHex(sign.Message as Uint8Array)).toBe(digest);
  });

  it.each([false, true])("turns a DER signature (high s: %s) into a low-s r|s|v that recovers to the key", async (highS) => {
    const { client } = fakeKms({ highS });
    const signer = await kmsDigestSigner(client, "controller");
    expect(signer.address).toBe(expectedAddress);
    const digest = hashMessage("user operation hash");
    const signature = await signer.signDigest(digest);
    expect(signature).toMatch(/^0x[0-9a-f]{130}$/);
    expect(["1b", "1c"]).toContain(signature.slice(-2));
    const s = BigInt(`0x${signature.slice(66, 130)}`);
    expect(s <= N / 2n).toBe(true);
    expect(await recoverAddress({ hash: digest, signature })).toBe(expectedAddress);
    // identical to what a local key produces (RFC 6979 signatures are deterministic)
    expect(signature).toBe(await privateKeyToAccount(PRIVATE_KEY).sign({ hash: digest }));
  });

  it("refuses a signature made by another key", () => {
    const other = secp256k1.sign(hexToBytes(hashMessage("x")), secp256k1.utils.randomPrivateKey());
    expect(() => derToEthereumSignature(hexToBytes(`0x${other.toDERHex()}`), hashMessage("x"), expectedAddress)).toThrow(
      /does not recover/,
    );
  });
});
