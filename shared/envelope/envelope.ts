/**
 * Envelope encryption on the key service (KMS in AWS, local/kms-endpoint.ts locally; the same client either way).
 *
 * seal: one fresh data key per call (KMS GenerateDataKey under config.secretsKeyId, EncryptionContext = context),
 * AES-256-GCM of the plaintext under that data key with the same context bound as additional authenticated data.
 * Only the KMS-wrapped data key, the iv, the ciphertext and the tag are returned. The plaintext data key is
 * zeroed as soon as it has been used.
 *
 * open: KMS Decrypt of the wrapped data key (fails unless the context is the one it was sealed with), then
 * AES-256-GCM decryption, which fails as well if the context or any stored field was changed.
 *
 * Errors never carry the plaintext; callers must not log it either.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { DecryptCommand, GenerateDataKeyCommand } from "@aws-sdk/client-kms";
import { useKms } from "./kms";
import { ApiError, upstreamUnavailable } from "../errors";
import { log } from "../log";
import { useRuntime } from "../current-runtime";

export interface Sealed {
  /** The data key wrapped by KMS (base64 CiphertextBlob). */
  encryptedKey: string;
  /** 12-byte GCM nonce, base64. */
  iv: string;
  ciphertext: string;
  /** 16-byte GCM tag, base64. */
  tag: string;
  /** The KMS key that wrapped the data key (as KMS reported it, normally an ARN). */
  keyId: string;
}

export type EncryptionContext = Record<string, string>;

class EnvelopeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EnvelopeError";
  }
}

/** Canonical AAD for a context: JSON with keys sorted. */
function aad(context: EncryptionContext): Buffer {
  const sorted = Object.keys(context)
    .sort()
    .map((k) => [k, context[k]]);
  return Buffer.from(JSON.stringify(Object.fromEntries(sorted)), "utf8");
}

export async function seal(plaintext: string, context: EncryptionContext): Promise<Sealed> {
  const { config } = useRuntime();
  const out = await useKms()
    .send(new GenerateDataKeyCommand({ KeyId: config.secretsKeyId, KeySpec: "AES_256", EncryptionContext: context }))
    .catch(keyServiceError);
  if (!out.Plaintext || !out.CiphertextBlob || out.Plaintext.length !== 32) {
    out.Plaintext?.fill(0);
    throw new EnvelopeError("The key service returned an unusable data key");
  }
  const dataKey = out.Plaintext;
  try {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", dataKey, iv);
    cipher.setAAD(aad(context));
    const ciphertext = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    return {
      encryptedKey: Buffer.from(out.CiphertextBlob).toString("base64"),
      iv: iv.toString("base64"),
      ciphertext: ciphertext.toString("base64"),
      tag: cipher.getAuthTag().toString("base64"),
      keyId: out.KeyId ?? config.secretsKeyId,
    };
  } finally {
    dataKey.fill(0);
  }
}

export async function open(sealed: Sealed, context: EncryptionContext): Promise<string> {
  let dataKey: Uint8Array | undefined;
  try {
    const out = await useKms()
      .send(
        new DecryptCommand({ CiphertextBlob: Buffer.from(sealed.encryptedKey, "base64"), EncryptionContext: context, KeyId: sealed.keyId }),
      )
      .catch(keyServiceError);
    dataKey = out.Plaintext;
    if (!dataKey || dataKey.length !== 32) throw new EnvelopeError("The key service returned an unusable data key");
    const decipher = createDecipheriv("aes-256-gcm", dataKey, Buffer.from(sealed.iv, "base64"));
    decipher.setAAD(aad(context));
    decipher.setAuthTag(Buffer.from(sealed.tag, "base64"));
    const plaintext = Buffer.concat([decipher.update(Buffer.from(sealed.ciphertext, "base64")), decipher.final()]);
    try {
      return plaintext.toString("utf8");
    } finally {
      plaintext.fill(0);
    }
  } catch (err) {
    if (err instanceof EnvelopeError || err instanceof ApiError) throw err;
    // KMS InvalidCiphertextException (wrong context or key) or a failed GCM tag check.
    const name = (err as { name?: string }).name;
    if (name === "InvalidCiphertextException" || name === "IncorrectKeyException" || (err as Error).message?.includes("authenticate")) {
      throw new EnvelopeError("The sealed value cannot be opened with this encryption context");
    }
    throw err;
  } finally {
    dataKey?.fill(0);
  }
}

const KEY_SERVICE_BUSY = new Set(["ThrottlingException", "KMSInternalException", "DependencyTimeoutException", "KeyUnavailableException"]);

/**
 * KMS unreachable, timing out, throttling or failing on its side is 503 UPSTREAM_UNAVAILABLE (API.md §1.6 step
 * 10), like any other upstream; its own refusals (a wrong key, a bad ciphertext) pass through unchanged.
 */
function keyServiceError(err: unknown): never {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  const status = e.$metadata?.httpStatusCode;
  if (status === undefined || status >= 500 || KEY_SERVICE_BUSY.has(e.name ?? "")) {
    log.warn("key service call failed", { error: e.name ?? "unknown", status });
    throw upstreamUnavailable(false, "The key service is unavailable.");
  }
  throw err;
}
