/**
 * The local KMS endpoint, driven by the real @aws-sdk/client-kms (AWS JSON 1.1 over HTTP).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CreateAliasCommand,
  CreateKeyCommand,
  DecryptCommand,
  DescribeKeyCommand,
  EncryptCommand,
  GenerateDataKeyCommand,
  KMSClient,
  ListKeysCommand,
  GetPublicKeyCommand,
  SignCommand,
} from "@aws-sdk/client-kms";
import { createHash, createPublicKey, verify } from "node:crypto";
import { startKmsEndpoint, type KmsEndpoint } from "../../local/kms-endpoint";

const client = (url: string) =>
  new KMSClient({ endpoint: url, region: "eu-west-1", credentials: { accessKeyId: "local", secretAccessKey: "local" }, maxAttempts: 1 });

async function errorOf(promise: Promise<unknown>): Promise<{ name: string; status?: number }> {
  try {
    await promise;
  } catch (err) {
    const e = err as { name: string; $metadata?: { httpStatusCode?: number } };
    return { name: e.name, status: e.$metadata?.httpStatusCode };
  }
  throw new Error("expected the call to fail");
}

describe("local KMS endpoint", () => {
  let dir: string;
  let endpoint: KmsEndpoint;
  let kms: KMSClient;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "kms-test-"));
    endpoint = await startKmsEndpoint({ dataDir: dir });
    kms = client(endpoint.url);
  });

  afterAll(async () => {
    kms?.destroy();
    await endpoint?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("listens on the loopback interface only", () => {
    expect(endpoint.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  it("GenerateDataKey returns a 32-byte data key whose blob Decrypt recovers without a KeyId", async () => {
    const context = { owner: "0xabc", name: "API_KEY" };
    const out = await kms.send(
      new GenerateDataKeyCommand({ KeyId: "alias/workflow-secrets", KeySpec: "AES_256", EncryptionContext: context }),
    );
    expect(out.Plaintext).toHaveLength(32);
    expect(out.KeyId).toMatch(/^arn:aws:kms:eu-west-1:\d{12}:key\/[0-9a-f-]{36}$/);
    const back = await kms.send(new DecryptCommand({ CiphertextBlob: out.CiphertextBlob, EncryptionContext: context }));
    expect(Buffer.from(back.Plaintext!).equals(Buffer.from(out.Plaintext!))).toBe(true);
    expect(back.KeyId).toBe(out.KeyId);
  });

  it("GenerateDataKey accepts NumberOfBytes and rejects both size options together", async () => {
    const out = await kms.send(new GenerateDataKeyCommand({ KeyId: "alias/other", NumberOfBytes: 64 }));
    expect(out.Plaintext).toHaveLength(64);
    const err = await errorOf(kms.send(new GenerateDataKeyCommand({ KeyId: "alias/other", NumberOfBytes: 16, KeySpec: "AES_256" })));
    expect(err).toEqual({ name: "ValidationException", status: 400 });
  });

  it("Encrypt/Decrypt round-trips and the context's member order does not matter", async () => {
    const plaintext = Buffer.from("hello kms");
    const enc = await kms.send(
      new EncryptCommand({ KeyId: "alias/roundtrip", Plaintext: plaintext, EncryptionContext: { a: "1", b: "2" } }),
    );
    const dec = await kms.send(
      new DecryptCommand({ CiphertextBlob: enc.CiphertextBlob, EncryptionContext: { b: "2", a: "1" }, KeyId: "alias/roundtrip" }),
    );
    expect(Buffer.from(dec.Plaintext!).toString()).toBe("hello kms");
    expect(dec.KeyId).toBe(enc.KeyId);
  });

  it("Decrypt with a different, partial or missing encryption context fails with InvalidCiphertextException", async () => {
    const enc = await kms.send(
      new EncryptCommand({ KeyId: "alias/ctx", Plaintext: Buffer.from("x"), EncryptionContext: { owner: "a", scope: "user" } }),
    );
    const contexts: (Record<string, string> | undefined)[] = [
      { owner: "b", scope: "user" },
      { owner: "a" },
      { owner: "a", scope: "user", extra: "" },
      undefined,
    ];
    for (const EncryptionContext of contexts) {
      const err = await errorOf(kms.send(new DecryptCommand({ CiphertextBlob: enc.CiphertextBlob, EncryptionContext })));
      expect(err).toEqual({ name: "InvalidCiphertextException", status: 400 });
    }
  });

  it("a tampered ciphertext blob fails with InvalidCiphertextException wherever it is changed", async () => {
    const enc = await kms.send(new EncryptCommand({ KeyId: "alias/tamper", Plaintext: Buffer.from("secret data") }));
    const blob = Buffer.from(enc.CiphertextBlob!);
    const idLength = blob[1]!;
    // version, key id, iv, tag and ciphertext bytes
    for (const index of [0, 2, 2 + idLength, 2 + idLength + 12, blob.length - 1]) {
      const tampered = Buffer.from(blob);
      tampered[index] = tampered[index]! ^ 0x01;
      const err = await errorOf(kms.send(new DecryptCommand({ CiphertextBlob: tampered })));
      expect(err.name).toBe("InvalidCiphertextException");
    }
    const truncated = await errorOf(kms.send(new DecryptCommand({ CiphertextBlob: blob.subarray(0, 10) })));
    expect(truncated.name).toBe("InvalidCiphertextException");
  });

  it("Decrypt naming another key than the blob's fails with IncorrectKeyException", async () => {
    const enc = await kms.send(new EncryptCommand({ KeyId: "alias/one", Plaintext: Buffer.from("x") }));
    const err = await errorOf(kms.send(new DecryptCommand({ CiphertextBlob: enc.CiphertextBlob, KeyId: "alias/two" })));
    expect(err.name).toBe("IncorrectKeyException");
  });

  it("CreateKey, CreateAlias, DescribeKey and ListKeys work for setup and health checks", async () => {
    const created = await kms.send(new CreateKeyCommand({ Description: "test key" }));
    const keyId = created.KeyMetadata!.KeyId!;
    expect(created.KeyMetadata).toMatchObject({ Enabled: true, KeyState: "Enabled", KeyUsage: "ENCRYPT_DECRYPT", Description: "test key" });
    expect(created.KeyMetadata!.CreationDate).toBeInstanceOf(Date);
    await kms.send(new CreateAliasCommand({ AliasName: "alias/named", TargetKeyId: keyId }));
    const described = await kms.send(new DescribeKeyCommand({ KeyId: "alias/named" }));
    expect(described.KeyMetadata!.KeyId).toBe(keyId);
    const byArn = await kms.send(new DescribeKeyCommand({ KeyId: described.KeyMetadata!.Arn }));
    expect(byArn.KeyMetadata!.KeyId).toBe(keyId);
    const duplicate = await errorOf(kms.send(new CreateAliasCommand({ AliasName: "alias/named", TargetKeyId: keyId })));
    expect(duplicate.name).toBe("AlreadyExistsException");
    const listed = await kms.send(new ListKeysCommand({}));
    expect(listed.Keys!.map((k) => k.KeyId)).toContain(keyId);

    // Encrypting under the alias and decrypting under the key id is the same key.
    const enc = await kms.send(new EncryptCommand({ KeyId: "alias/named", Plaintext: Buffer.from("x") }));
    const dec = await kms.send(new DecryptCommand({ CiphertextBlob: enc.CiphertextBlob, KeyId: keyId }));
    expect(Buffer.from(dec.Plaintext!).toString()).toBe("x");
  });

  it("answers an unknown operation with a typed 400 error", async () => {
    const res = await fetch(endpoint.url, {
      method: "POST",
      headers: { "Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "TrentService.ScheduleKeyDeletion" },
      body: "{}",
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ __type: "UnknownOperationException" });
  });

  it("generates the master key once (32 bytes, mode 0600) and reuses it after a restart", async () => {
    const path = join(dir, "keys", "kms-master.key");
    const master = readFileSync(path);
    expect(master).toHaveLength(32);
    expect(statSync(path).mode & 0o777).toBe(0o600);

    const context = { purpose: "restart" };
    const data = await kms.send(
      new GenerateDataKeyCommand({ KeyId: "alias/workflow-secrets", KeySpec: "AES_256", EncryptionContext: context }),
    );
    const created = await kms.send(new CreateKeyCommand({}));
    const underKey = await kms.send(new EncryptCommand({ KeyId: created.KeyMetadata!.KeyId, Plaintext: Buffer.from("kept") }));

    kms.destroy();
    await endpoint.stop();
    endpoint = await startKmsEndpoint({ dataDir: dir });
    kms = client(endpoint.url);

    expect(readFileSync(path).equals(master)).toBe(true);
    const back = await kms.send(
      new DecryptCommand({ CiphertextBlob: data.CiphertextBlob, EncryptionContext: context, KeyId: "alias/workflow-secrets" }),
    );
    expect(Buffer.from(back.Plaintext!).equals(Buffer.from(data.Plaintext!))).toBe(true);
    const kept = await kms.send(new DecryptCommand({ CiphertextBlob: underKey.CiphertextBlob }));
    expect(Buffer.from(kept.Plaintext!).toString()).toBe("kept");
    const listed = await kms.send(new ListKeysCommand({}));
    expect(listed.Keys!.map((k) => k.KeyId)).toContain(created.KeyMetadata!.KeyId);
  });

  it("another data directory (another master key) cannot decrypt the blobs", async () => {
    const enc = await kms.send(new EncryptCommand({ KeyId: "alias/workflow-secrets", Plaintext: Buffer.from("x") }));
    const otherDir = mkdtempSync(join(tmpdir(), "kms-test-other-"));
    const other = await startKmsEndpoint({ dataDir: otherDir });
    const otherClient = client(other.url);
    try {
      const err = await errorOf(otherClient.send(new DecryptCommand({ CiphertextBlob: enc.CiphertextBlob })));
      expect(err.name).toBe("InvalidCiphertextException");
    } finally {
      otherClient.destroy();
      await other.stop();
      rmSync(otherDir, { recursive: true, force: true });
    }
  });

  it("signs with an ECC_NIST_P256 key (RAW or DIGEST, DER as KMS answers) that its public key verifies, across restarts", async () => {
    const { KeyMetadata } = await kms.send(new CreateKeyCommand({ KeySpec: "ECC_NIST_P256", KeyUsage: "SIGN_VERIFY" }));
    expect(KeyMetadata).toMatchObject({ KeySpec: "ECC_NIST_P256", KeyUsage: "SIGN_VERIFY", SigningAlgorithms: ["ECDSA_SHA_256"] });
    const KeyId = KeyMetadata!.KeyId!;
    const publicKey = async () =>
      createPublicKey({ key: Buffer.from((await kms.send(new GetPublicKeyCommand({ KeyId }))).PublicKey!), format: "der", type: "spki" });
    const key = await publicKey();
    expect(key.asymmetricKeyDetails?.namedCurve).toBe("prime256v1");
    const message = Buffer.from("header.payload");
    for (const input of [
      { Message: message, MessageType: "RAW" as const },
      { Message: createHash("sha256").update(message).digest(), MessageType: "DIGEST" as const },
    ]) {
      const { Signature, SigningAlgorithm } = await kms.send(new SignCommand({ KeyId, SigningAlgorithm: "ECDSA_SHA_256", ...input }));
      expect(SigningAlgorithm).toBe("ECDSA_SHA_256");
      expect(verify("sha256", message, key, Buffer.from(Signature!)), input.MessageType).toBe(true);
    }
    await endpoint.stop();
    endpoint = await startKmsEndpoint({ dataDir: dir });
    kms = client(endpoint.url);
    expect((await publicKey()).export({ format: "jwk" })).toEqual(key.export({ format: "jwk" }));
  });

  it("keeps each key to its use: no Sign with a symmetric key, no Encrypt with a signing key", async () => {
    const signing = (await kms.send(new CreateKeyCommand({ KeySpec: "ECC_NIST_P256", KeyUsage: "SIGN_VERIFY" }))).KeyMetadata!.KeyId!;
    const sign = (KeyId: string) =>
      kms.send(new SignCommand({ KeyId, Message: Buffer.alloc(32), MessageType: "DIGEST", SigningAlgorithm: "ECDSA_SHA_256" }));
    expect(await errorOf(sign("alias/workflow-secrets"))).toEqual({ name: "InvalidKeyUsageException", status: 400 });
    expect(await errorOf(kms.send(new EncryptCommand({ KeyId: signing, Plaintext: Buffer.from("x") })))).toEqual({
      name: "InvalidKeyUsageException",
      status: 400,
    });
    expect(await errorOf(kms.send(new CreateKeyCommand({ KeySpec: "ECC_SECG_P256K1", KeyUsage: "SIGN_VERIFY" })))).toMatchObject({
      name: "UnsupportedOperationException",
    });
  });
});
