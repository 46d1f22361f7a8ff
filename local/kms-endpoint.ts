/**
 * A small KMS-compatible endpoint for the local runtime and the tests: the AWS JSON 1.1 protocol that the
 * real `@aws-sdk/client-kms` speaks (POST /, `X-Amz-Target: TrentService.<Op>`, blobs base64 in JSON,
 * errors as `{"__type": "...Exception", "message": "..."}` with status 400).
 *
 * Operations: GenerateDataKey, Encrypt, Decrypt, DescribeKey, ListKeys, CreateKey, CreateAlias, ListAliases; and
 * for a key created with `KeySpec: ECC_NIST_P256` (the token key on AWS), Sign (ECDSA_SHA_256, RAW or DIGEST, a DER
 * signature as KMS answers) and GetPublicKey (DER SPKI). Its private key is derived from the master key too
 * (HKDF-SHA256, then reduced into a valid P-256 scalar), so it survives restarts.
 *
 * Cryptography: one master key (32 random bytes) is generated once into `<dataDir>/keys/kms-master.key`
 * (mode 0600) and reused on every start. Each key id gets its own AES-256 subkey derived from the master key
 * with HKDF-SHA256; Encrypt / GenerateDataKey seal with AES-256-GCM under that subkey, binding the
 * EncryptionContext (canonical JSON, keys sorted) as additional authenticated data, so a Decrypt with another
 * context fails with InvalidCiphertextException. Ciphertext blob:
 *
 *   version (1 byte, = 1) | keyId length (1 byte) | keyId (UTF-8) | iv (12) | tag (16) | ciphertext
 *
 * so Decrypt needs no KeyId. Any key id or alias (`alias/...`) is accepted and created on first use; an alias
 * created that way maps to a key id derived from its name, so it names the same key after every restart even
 * without the registry file (`<dataDir>/keys/kms-keys.json`, which records CreateKey/CreateAlias results).
 *
 * Security: it does not verify SigV4 signatures. It listens on 127.0.0.1 only, so only processes on this
 * machine can reach it; it is a development and test component, never deployed.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import {
  createCipheriv,
  createDecipheriv,
  createECDH,
  createHash,
  createHmac,
  createPublicKey,
  hkdfSync,
  randomBytes,
  randomUUID,
} from "node:crypto";
import { p256 } from "@noble/curves/p256";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface KmsEndpoint {
  url: string;
  stop(): Promise<void>;
}

const ACCOUNT = "111122223333";
const BLOB_VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const MAX_BODY_BYTES = 1024 * 1024;
const MAX_PLAINTEXT_BYTES = 4096;

class KmsError extends Error {
  constructor(
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

interface KeyRecord {
  id: string;
  createdAt: number;
  description: string;
  /** Absent: a symmetric key (SYMMETRIC_DEFAULT). */
  keySpec?: "ECC_NIST_P256";
}

interface Registry {
  keys: Record<string, KeyRecord>;
  aliases: Record<string, string>;
}

/** Starts the endpoint on a free loopback port (or `port`); keys live under `<dataDir>/keys`. */
export async function startKmsEndpoint(options: { dataDir: string; port?: number }): Promise<KmsEndpoint> {
  const keys = KeyStore.open(join(options.dataDir, "keys"));
  const server = createServer((req, res) => void handle(keys, req, res));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  let stopped: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () =>
      (stopped ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        keys.wipe();
      })),
  };
}

/**
 * The endpoint's keys: the master key, the registry of key ids and aliases (saved on every change) and the AES
 * subkey of each key id, derived from the master key on first use.
 */
class KeyStore {
  private readonly subkeys = new Map<string, Buffer>();

  private constructor(
    private readonly master: Buffer,
    readonly registry: Registry,
    private readonly registryPath: string,
  ) {}

  /** The keys under `keyDir`: the master key is created on first start, the registry read if there is one. */
  static open(keyDir: string): KeyStore {
    mkdirSync(keyDir, { recursive: true, mode: 0o700 });
    const master = loadOrCreateMasterKey(join(keyDir, "kms-master.key"));
    const registryPath = join(keyDir, "kms-keys.json");
    return new KeyStore(master, loadRegistry(registryPath), registryPath);
  }

  save() {
    const tmp = `${this.registryPath}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(this.registry, null, 2) + "\n", { mode: 0o600 });
    renameSync(tmp, this.registryPath);
  }

  ensureKey(id: string, description = "", keySpec?: KeyRecord["keySpec"]): KeyRecord {
    if (!this.registry.keys[id]) {
      this.registry.keys[id] = { id, createdAt: Math.floor(Date.now() / 1000), description, ...(keySpec ? { keySpec } : {}) };
      this.save();
    }
    return this.registry.keys[id]!;
  }

  /** Resolves a KeyId in any accepted form (id, key ARN, alias, alias ARN) to a key record, creating it if new. */
  resolveKey(identifier: unknown): KeyRecord {
    if (typeof identifier !== "string" || identifier.length === 0 || identifier.length > 2048) {
      throw new KmsError("ValidationException", "KeyId must be a non-empty string of at most 2048 characters");
    }
    let id = identifier;
    const arn = /^arn:aws[a-z-]*:kms:[^:]*:[^:]*:(key|alias)\/(.+)$/.exec(identifier);
    if (arn) id = arn[1] === "key" ? arn[2]! : `alias/${arn[2]}`;
    if (id.startsWith("alias/")) {
      const target = this.registry.aliases[id];
      if (target) return this.ensureKey(target);
      const derived = uuidFrom(createHmac("sha256", this.master).update(`alias:${id}`).digest());
      this.registry.aliases[id] = derived;
      return this.ensureKey(derived, `auto-created for ${id}`);
    }
    if (Buffer.byteLength(id, "utf8") > 255) throw new KmsError("ValidationException", "KeyId is too long");
    return this.ensureKey(id);
  }

  encryptBlob(key: KeyRecord, plaintext: Buffer, context: Record<string, string>): Buffer {
    if (key.keySpec) throw new KmsError("InvalidKeyUsageException", `${key.id} is a SIGN_VERIFY key`);
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.subkey(key.id), iv);
    cipher.setAAD(canonicalContext(context));
    const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    const id = Buffer.from(key.id, "utf8");
    return Buffer.concat([Buffer.from([BLOB_VERSION, id.length]), id, iv, cipher.getAuthTag(), ciphertext]);
  }

  decryptBlob(blob: Buffer, context: Record<string, string>): { keyId: string; plaintext: Buffer } {
    const invalid = () =>
      new KmsError("InvalidCiphertextException", "The ciphertext is invalid or was encrypted under another key or context");
    if (blob.length < 2 || blob[0] !== BLOB_VERSION) throw invalid();
    const idLength = blob[1]!;
    const ivStart = 2 + idLength;
    const tagStart = ivStart + IV_BYTES;
    const dataStart = tagStart + TAG_BYTES;
    if (idLength === 0 || blob.length < dataStart) throw invalid();
    const keyId = blob.subarray(2, ivStart).toString("utf8");
    const decipher = createDecipheriv("aes-256-gcm", this.subkey(keyId), blob.subarray(ivStart, tagStart));
    decipher.setAAD(canonicalContext(context));
    decipher.setAuthTag(blob.subarray(tagStart, dataStart));
    try {
      return { keyId, plaintext: Buffer.concat([decipher.update(blob.subarray(dataStart)), decipher.final()]) };
    } catch {
      throw invalid();
    }
  }

  /** The P-256 private scalar of a signing key and its public key: derived from the master key (the first valid one). */
  signingKey(key: KeyRecord): { d: Buffer; spki: Buffer } {
    if (key.keySpec !== "ECC_NIST_P256") throw new KmsError("InvalidKeyUsageException", `${key.id} is not a SIGN_VERIFY key`);
    for (let attempt = 0; ; attempt++) {
      const d = Buffer.from(hkdfSync("sha256", this.master, Buffer.from("local-kms"), Buffer.from(`sign:${key.id}:${attempt}`), 32));
      const ecdh = createECDH("prime256v1");
      try {
        ecdh.setPrivateKey(d);
      } catch {
        continue; // zero or past the group order: derive again
      }
      const point = ecdh.getPublicKey();
      const jwk = { kty: "EC", crv: "P-256", x: point.subarray(1, 33).toString("base64url"), y: point.subarray(33).toString("base64url") };
      return { d, spki: createPublicKey({ key: jwk, format: "jwk" }).export({ type: "spki", format: "der" }) };
    }
  }

  /** Zeroes the master key and every subkey (the endpoint stopped). */
  wipe() {
    for (const key of this.subkeys.values()) key.fill(0);
    this.subkeys.clear();
    this.master.fill(0);
  }

  private subkey(keyId: string): Buffer {
    let key = this.subkeys.get(keyId);
    if (!key) {
      key = Buffer.from(hkdfSync("sha256", this.master, Buffer.from("local-kms"), Buffer.from(`key:${keyId}`, "utf8"), 32));
      this.subkeys.set(keyId, key);
    }
    return key;
  }
}

const arnOf = (region: string, id: string) => `arn:aws:kms:${region}:${ACCOUNT}:key/${id}`;

const metadata = (region: string, key: KeyRecord) => ({
  AWSAccountId: ACCOUNT,
  KeyId: key.id,
  Arn: arnOf(region, key.id),
  CreationDate: key.createdAt,
  Enabled: true,
  Description: key.description,
  KeyState: "Enabled",
  Origin: "AWS_KMS",
  KeyManager: "CUSTOMER",
  MultiRegion: false,
  ...(key.keySpec
    ? { KeyUsage: "SIGN_VERIFY", CustomerMasterKeySpec: key.keySpec, KeySpec: key.keySpec, SigningAlgorithms: ["ECDSA_SHA_256"] }
    : {
        KeyUsage: "ENCRYPT_DECRYPT",
        CustomerMasterKeySpec: "SYMMETRIC_DEFAULT",
        KeySpec: "SYMMETRIC_DEFAULT",
        EncryptionAlgorithms: ["SYMMETRIC_DEFAULT"],
      }),
});

/** The operations served, by their `X-Amz-Target` name: each takes the request body and answers the response body. */
const OPERATIONS: Record<string, (keys: KeyStore, input: Record<string, unknown>, region: string) => unknown> = {
  GenerateDataKey(keys, input, region) {
    const key = keys.resolveKey(input.KeyId);
    const context = readContext(input.EncryptionContext);
    const size = dataKeySize(input.KeySpec, input.NumberOfBytes);
    const plaintext = randomBytes(size);
    const blob = keys.encryptBlob(key, plaintext, context);
    const out = { KeyId: arnOf(region, key.id), Plaintext: plaintext.toString("base64"), CiphertextBlob: blob.toString("base64") };
    plaintext.fill(0);
    return out;
  },
  Encrypt(keys, input, region) {
    const key = keys.resolveKey(input.KeyId);
    const context = readContext(input.EncryptionContext);
    const plaintext = readBlob(input.Plaintext, "Plaintext");
    if (plaintext.length < 1 || plaintext.length > MAX_PLAINTEXT_BYTES) {
      throw new KmsError("ValidationException", `Plaintext must be 1 to ${MAX_PLAINTEXT_BYTES} bytes`);
    }
    checkAlgorithm(input.EncryptionAlgorithm);
    const blob = keys.encryptBlob(key, plaintext, context);
    return { KeyId: arnOf(region, key.id), CiphertextBlob: blob.toString("base64"), EncryptionAlgorithm: "SYMMETRIC_DEFAULT" };
  },
  Decrypt(keys, input, region) {
    const context = readContext(input.EncryptionContext);
    const blob = readBlob(input.CiphertextBlob, "CiphertextBlob");
    checkAlgorithm(input.EncryptionAlgorithm);
    const { keyId, plaintext } = keys.decryptBlob(blob, context);
    if (input.KeyId !== undefined && keys.resolveKey(input.KeyId).id !== keyId) {
      throw new KmsError("IncorrectKeyException", "The key ID in the request does not identify the key that encrypted the ciphertext");
    }
    const out = { KeyId: arnOf(region, keyId), Plaintext: plaintext.toString("base64"), EncryptionAlgorithm: "SYMMETRIC_DEFAULT" };
    plaintext.fill(0);
    return out;
  },
  DescribeKey(keys, input, region) {
    return { KeyMetadata: metadata(region, keys.resolveKey(input.KeyId)) };
  },
  ListKeys(keys, _input, region) {
    return { Keys: Object.values(keys.registry.keys).map((k) => ({ KeyId: k.id, KeyArn: arnOf(region, k.id) })), Truncated: false };
  },
  ListAliases(keys, _input, region) {
    return {
      Aliases: Object.entries(keys.registry.aliases).map(([name, target]) => ({
        AliasName: name,
        AliasArn: `arn:aws:kms:${region}:${ACCOUNT}:${name}`,
        TargetKeyId: target,
      })),
      Truncated: false,
    };
  },
  CreateKey(keys, input, region) {
    const description = typeof input.Description === "string" ? input.Description : "";
    return { KeyMetadata: metadata(region, keys.ensureKey(randomUUID(), description, signingSpec(input))) };
  },
  Sign(keys, input, region) {
    const key = keys.resolveKey(input.KeyId);
    if (input.SigningAlgorithm !== "ECDSA_SHA_256") throw new KmsError("ValidationException", "SigningAlgorithm must be ECDSA_SHA_256");
    const message = readBlob(input.Message, "Message");
    const type = input.MessageType ?? "RAW";
    if (type === "DIGEST" ? message.length !== 32 : type !== "RAW" || message.length < 1 || message.length > MAX_PLAINTEXT_BYTES) {
      throw new KmsError("ValidationException", "Message must be a 32-byte DIGEST or 1 to 4096 RAW bytes");
    }
    const digest = type === "DIGEST" ? message : createHash("sha256").update(message).digest();
    const { d } = keys.signingKey(key);
    const signature = p256.sign(digest, d).toDERRawBytes();
    return { KeyId: arnOf(region, key.id), Signature: Buffer.from(signature).toString("base64"), SigningAlgorithm: "ECDSA_SHA_256" };
  },
  GetPublicKey(keys, input, region) {
    const key = keys.resolveKey(input.KeyId);
    const { spki } = keys.signingKey(key);
    return {
      KeyId: arnOf(region, key.id),
      PublicKey: spki.toString("base64"),
      KeySpec: key.keySpec,
      CustomerMasterKeySpec: key.keySpec,
      KeyUsage: "SIGN_VERIFY",
      SigningAlgorithms: ["ECDSA_SHA_256"],
    };
  },
  CreateAlias(keys, input) {
    const name = input.AliasName;
    if (typeof name !== "string" || !/^alias\/[a-zA-Z0-9/_-]{1,250}$/.test(name) || name.startsWith("alias/aws/")) {
      throw new KmsError("ValidationException", "AliasName must be alias/ followed by letters, digits, /, _ or -");
    }
    if (keys.registry.aliases[name]) throw new KmsError("AlreadyExistsException", `Alias ${name} already exists`);
    if (typeof input.TargetKeyId === "string" && /^(alias\/|arn:[^:]*:kms:[^:]*:[^:]*:alias\/)/.test(input.TargetKeyId)) {
      throw new KmsError("ValidationException", "TargetKeyId must be a key id or key ARN");
    }
    const target = keys.resolveKey(input.TargetKeyId);
    keys.registry.aliases[name] = target.id;
    keys.save();
    return {};
  },
};

/** Serves one request: the operation's answer with 200, a KmsError as its `__type` with 400, anything else 500. */
async function handle(keys: KeyStore, req: IncomingMessage, res: ServerResponse) {
  const requestId = randomUUID();
  const send = (status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, {
      "Content-Type": "application/x-amz-json-1.1",
      "Content-Length": Buffer.byteLength(text),
      "x-amzn-RequestId": requestId,
    });
    res.end(text);
  };
  try {
    if (req.method !== "POST" || (req.url ?? "/").split("?")[0] !== "/") {
      throw new KmsError("UnknownOperationException", "Only POST / is served");
    }
    const target = req.headers["x-amz-target"];
    const op = typeof target === "string" && target.startsWith("TrentService.") ? target.slice("TrentService.".length) : "";
    const operation = Object.hasOwn(OPERATIONS, op) ? OPERATIONS[op] : undefined;
    if (!operation) throw new KmsError("UnknownOperationException", `Unsupported operation ${op || "(none)"}`);
    const input = await readJson(req);
    send(200, operation(keys, input, regionOf(req)));
  } catch (err) {
    if (err instanceof KmsError) send(400, { __type: err.type, message: err.message });
    else send(500, { __type: "KMSInternalException", message: "Internal error" });
  }
}

function loadOrCreateMasterKey(path: string): Buffer {
  if (!existsSync(path)) {
    try {
      writeFileSync(path, randomBytes(32), { mode: 0o600, flag: "wx" });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
  }
  const key = readFileSync(path);
  if (key.length !== 32)
    throw new Error(`${path} must hold exactly 32 bytes (found ${key.length}); remove it to generate a new master key`);
  return key;
}

function loadRegistry(path: string): Registry {
  if (!existsSync(path)) return { keys: {}, aliases: {} };
  const parsed = JSON.parse(readFileSync(path, "utf8")) as Partial<Registry>;
  return { keys: parsed.keys ?? {}, aliases: parsed.aliases ?? {} };
}

/** The EncryptionContext as authenticated data: JSON with keys sorted, so member order never matters. */
function canonicalContext(context: Record<string, string>): Buffer {
  const sorted = Object.keys(context)
    .sort()
    .map((k) => [k, context[k]]);
  return Buffer.from(JSON.stringify(Object.fromEntries(sorted)), "utf8");
}

function readContext(value: unknown): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (typeof value !== "object" || Array.isArray(value) || !Object.values(value).every((v) => typeof v === "string")) {
    throw new KmsError("ValidationException", "EncryptionContext must be a map of strings");
  }
  return value as Record<string, string>;
}

function readBlob(value: unknown, name: string): Buffer {
  if (typeof value !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(value)) {
    throw new KmsError("ValidationException", `${name} must be a base64 blob`);
  }
  return Buffer.from(value, "base64");
}

function dataKeySize(keySpec: unknown, numberOfBytes: unknown): number {
  if (keySpec !== undefined && numberOfBytes !== undefined) {
    throw new KmsError("ValidationException", "Specify either KeySpec or NumberOfBytes, not both");
  }
  if (keySpec === "AES_256") return 32;
  if (keySpec === "AES_128") return 16;
  if (keySpec !== undefined) throw new KmsError("ValidationException", "KeySpec must be AES_256 or AES_128");
  if (typeof numberOfBytes === "number" && Number.isInteger(numberOfBytes) && numberOfBytes >= 1 && numberOfBytes <= 1024) {
    return numberOfBytes;
  }
  throw new KmsError("ValidationException", "KeySpec or NumberOfBytes (1 to 1024) is required");
}

/** CreateKey's KeySpec and KeyUsage: a symmetric key, or a P-256 signing key (the only asymmetric kind served). */
function signingSpec(input: Record<string, unknown>): KeyRecord["keySpec"] {
  const spec = input.KeySpec ?? input.CustomerMasterKeySpec ?? "SYMMETRIC_DEFAULT";
  const usage = input.KeyUsage ?? (spec === "SYMMETRIC_DEFAULT" ? "ENCRYPT_DECRYPT" : undefined);
  if (spec === "SYMMETRIC_DEFAULT" && usage === "ENCRYPT_DECRYPT") return undefined;
  if (spec === "ECC_NIST_P256" && usage === "SIGN_VERIFY") return "ECC_NIST_P256";
  throw new KmsError(
    "UnsupportedOperationException",
    "Only SYMMETRIC_DEFAULT (ENCRYPT_DECRYPT) and ECC_NIST_P256 (SIGN_VERIFY) keys are served",
  );
}

function checkAlgorithm(algorithm: unknown) {
  if (algorithm !== undefined && algorithm !== "SYMMETRIC_DEFAULT") {
    throw new KmsError("UnsupportedOperationException", "Only SYMMETRIC_DEFAULT is supported");
  }
}

/** A UUID-shaped key id from 16 bytes of a digest. */
function uuidFrom(digest: Buffer): string {
  const h = digest.subarray(0, 16).toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** The region of the SigV4 credential scope (`Credential=<id>/<date>/<region>/kms/aws4_request`), for ARNs. */
function regionOf(req: IncomingMessage): string {
  const auth = req.headers.authorization ?? "";
  return /Credential=[^/]+\/\d{8}\/([a-z0-9-]+)\/kms\//.exec(auth)?.[1] ?? "us-east-1";
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new KmsError("ValidationException", "Request body is too large");
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim() === "") return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new KmsError("SerializationException", "The request body is not valid JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new KmsError("SerializationException", "The request body must be a JSON object");
  }
  return value as Record<string, unknown>;
}
