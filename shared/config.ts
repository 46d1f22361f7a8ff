/**
 * The service's settings: one validated object, built once from environment variables.
 * Every limit of API.md §4.1 is a setting named as there, read from the upper-case variable
 * (`max_wallets_per_owner` ← `MAX_WALLETS_PER_OWNER`). The README lists them all.
 */
import { createPublicKey } from "node:crypto";
import { availableParallelism } from "node:os";
import * as v from "valibot";

const int = (fallback: number, min = 0) =>
  v.optional(
    v.pipe(v.string(), v.regex(/^\d+$/, "must be a non-negative integer"), v.transform(Number), v.minValue(min)),
    String(fallback),
  );
/** A budget that may be switched off: a non-negative integer (0 = never), or `unlimited` (kept as Infinity). */
const budget = (fallback: number) =>
  v.optional(
    v.pipe(
      v.string(),
      v.regex(/^(?:\d+|unlimited)$/, "must be a non-negative integer or unlimited"),
      v.transform((s) => (s === "unlimited" ? Infinity : Number(s))),
      v.check((n) => n === Infinity || Number.isSafeInteger(n), "must be at most 9007199254740991 or unlimited"),
    ),
    String(fallback),
  );
const bool = (fallback: boolean) =>
  v.optional(
    v.pipe(
      v.string(),
      v.picklist(["true", "false", "1", "0"], "must be true or false"),
      v.transform((s) => s === "true" || s === "1"),
    ),
    String(fallback),
  );
const text = (fallback: string) => v.optional(v.pipe(v.string(), v.minLength(1)), fallback);
const list = (fallback: string) =>
  v.pipe(
    v.optional(v.string(), fallback),
    v.transform((s) =>
      s
        .split(",")
        .map((x) => x.trim())
        .filter(Boolean),
    ),
  );

const Address = v.pipe(v.string(), v.regex(/^0x[0-9a-fA-F]{40}$/, "must be an address"));

/** A non-negative decimal, kept as text in its shortest form ("0.020" → "0.02", "00" → "0"). */
const DECIMAL = /^\d+(?:\.\d+)?$/;
const shortestDecimal = (s: string) => {
  const [whole = "0", fraction = ""] = s.split(".");
  const w = whole.replace(/^0+(?=\d)/, "");
  const f = fraction.replace(/0+$/, "");
  return f ? `${w}.${f}` : w;
};
const decimal = (fallback: string) =>
  v.optional(v.pipe(v.string(), v.regex(DECIMAL, "must be a non-negative decimal such as 0.02"), v.transform(shortestDecimal)), fallback);
/** `VALUE_FEE_TIERS`: `tier1=0.03,tier2=0.09,tier3=0.18` (percent); every tier named once. */
const valueFeeTiers = (fallback: string) =>
  v.pipe(
    v.optional(v.string(), fallback),
    v.transform((s) => Object.fromEntries(s.split(",").map((pair) => pair.split("=").map((x) => x.trim())))),
    v.strictObject(
      {
        tier1: v.pipe(v.string(), v.regex(DECIMAL, "must be a non-negative decimal such as 0.03"), v.transform(shortestDecimal)),
        tier2: v.pipe(v.string(), v.regex(DECIMAL, "must be a non-negative decimal such as 0.03"), v.transform(shortestDecimal)),
        tier3: v.pipe(v.string(), v.regex(DECIMAL, "must be a non-negative decimal such as 0.03"), v.transform(shortestDecimal)),
      },
      "must be tier1=<percent>,tier2=<percent>,tier3=<percent>",
    ),
  );
const Url = v.pipe(v.string(), v.url());

/** One configured chain (API.md §5). */
export const ChainSettings = v.object({
  chainId: v.pipe(v.number(), v.integer(), v.minValue(1)),
  rpcUrl: Url,
  bundlerUrl: v.optional(Url),
  entryPoint: v.optional(Address, "0x0000000071727De22E5E9d8BAf0edAc6f37da032"),
  factory: v.optional(Address),
  /**
   * Further ControlledAccountFactory deployments with the service's controller: like `factory`, their wallet
   * addresses are derived offline and init code may be built for them (API.md §11.3).
   */
  knownFactories: v.optional(v.array(Address), []),
  /** VerifyingPaymaster whose signer is the service controller; omitted = wallets pay their own gas. */
  paymaster: v.optional(Address),
  nativeToken: v.optional(v.object({ symbol: v.string(), decimals: v.pipe(v.number(), v.integer()) }), { symbol: "ETH", decimals: 18 }),
  blockTimeSeconds: v.optional(v.pipe(v.number(), v.minValue(0.01))),
});
export type ChainSettings = v.InferOutput<typeof ChainSettings>;

/**
 * Every limit of API.md §4.1 with its default. Each is read from its name in upper snake case
 * (`maxWalletsPerOwner` ← `MAX_WALLETS_PER_OWNER`), which is how API.md names the setting.
 */
const LIMITS = {
  maxBodyBytes: int(1_048_576, 1),
  maxWorkflowBytes: int(358_400, 1),
  maxManualDataBytes: int(1_048_576, 1),
  maxSourceBytes: int(102_400, 1),
  maxNodes: int(100, 1),
  maxEdges: int(500, 1),
  maxActiveWorkflowsPerOwner: int(1000, 1),
  maxWalletsPerOwner: int(5, 1),
  maxSecretsPerOwner: int(1000, 1),
  maxSecretBytes: int(32_768, 1),
  defaultMaxExecution: int(51_840, 1),
  minCronIntervalS: int(300),
  minBlockIntervalS: int(60),
  consecutiveErrorLimit: int(10, 1),
  maxTokenLifetimeS: int(7 * 24 * 3600, 1),
  blockingTriggerWaitMs: int(25_000),
  executionTimeoutMs: int(15 * 60_000, 1),
  simulateTimeoutMs: int(25_000, 1),
  sandboxTimeLimitMs: int(5_000, 1),
  sandboxMemoryLimitMib: int(64, 1),
  sandboxTimePerExecutionMs: int(30_000, 1),
  maxExecutionStateBytes: int(32 * 1_048_576, 1),
  maxHttpRequestsPerExecution: int(500, 1),
  loopMaxIterations: int(100, 1),
  loopMaxParallel: int(10, 1),
  httpNodeTimeoutMs: int(30_000, 1),
  httpNodeMaxResponseBytes: int(10 * 1_048_576, 1),
  maxStepOutputBytes: int(262_144, 1),
  maxStepLogBytes: int(65_536, 1),
  maxExecutionRecordBytes: int(4 * 1_048_576, 1),
  maxListPageBytes: int(5 * 1_048_576, 1),
  useropReceiptWaitMs: int(120_000),
  withdrawConfirmWaitMs: int(10_000),
  withdrawPendingTimeoutMs: int(30 * 60_000, 1),
  streamMaxMs: int(15 * 60_000, 1),
  streamKeepaliveMs: int(15_000, 1),
  maxOpenStreamsPerOwner: int(20, 1),
  idempotencyTtlS: int(24 * 3600, 1),
  /**
   * How long a request holds its Idempotency-Key before a repeat may take it over (shared/store/idempotency.ts): a
   * retry after a crash is answered within this long of the crashed request's claim. Also bounds `:withdraw`'s work
   * before its record is stored (half of it), so a live request never outlasts its lease.
   */
  idempotencyLeaseMs: int(60_000, 1_000),
  missedFireGraceMs: int(15 * 60_000),
  maxCatchupBlocks: int(10_000),
  rateLimitBurst: int(50, 1),
  rateLimitRps: int(10, 1),
  /** API.md §18.5: gas a chain's paymaster sponsors per owner / for all owners over the last 24 hours. */
  sponsoredGasPerOwnerPerDay: budget(50_000_000),
  sponsoredGasPerChainPerDay: budget(5_000_000_000),
};
type Limits = { [K in keyof typeof LIMITS]: v.InferOutput<(typeof LIMITS)[K]> };
const envName = (key: string) => key.replace(/[A-Z]/g, (letter) => `_${letter}`).toUpperCase();

const Env = v.object({
  PORT: int(3000, 1),
  DATA_DIR: text(".data"),
  LOG_LEVEL: v.optional(v.picklist(["debug", "info", "warn", "error", "silent"]), "info"),
  SERVICE_VERSION: text("0.1.0"),

  TABLE_NAME: text("workflow-automation"),
  DYNAMODB_ENDPOINT: v.optional(Url),
  KMS_ENDPOINT: v.optional(Url),
  /** KMS key (id, ARN or alias) that wraps secret data keys. */
  SECRETS_KMS_KEY_ID: text("alias/workflow-secrets"),
  AWS_REGION: text("us-east-1"),

  /** JSON array of ChainSettings; the local runtime adds its devnet. */
  CHAINS: v.optional(v.string(), "[]"),
  DEFAULT_CHAIN_ID: v.optional(v.pipe(v.string(), v.regex(/^\d+$/), v.transform(Number))),
  /** Hex private key of the controller that signs user operations (local/dev); AWS uses a KMS key. */
  CONTROLLER_PRIVATE_KEY: v.optional(v.pipe(v.string(), v.regex(/^0x[0-9a-fA-F]{64}$/))),
  CONTROLLER_KMS_KEY_ID: v.optional(v.string()),

  JWT_ISSUER: text("workflow-automation"),
  /** PKCS#8 PEM of the ES256 token key, generated into DATA_DIR locally; AWS signs with a KMS key instead. */
  JWT_SIGNING_KEY: v.optional(v.string()),
  /** SPKI PEM of the token key's public half (AWS: the KMS key's, given at deploy); else derived from JWT_SIGNING_KEY. */
  JWT_PUBLIC_KEY: v.optional(v.string()),
  /** The KMS key (ECC_NIST_P256) that signs tokens: set on the AWS sign-in function only (infra/kms.ts). */
  JWT_KMS_KEY_ID: v.optional(v.string()),
  AUTH_ALLOWED_URIS: list(""),
  CORS_ALLOWED_ORIGINS: list("*"),

  /** restApi/graphqlQuery may reach loopback and private addresses (the local runtime's devnet); AWS: never. */
  ALLOW_PRIVATE_NETWORK: bool(false),
  /** Executions one process runs at once, shared fairly by owners (shared/execution/run-queue.ts); default by CPU. */
  RUNNER_CONCURRENCY: int(Math.min(64, Math.max(8, 8 * availableParallelism())), 1),
  /** API.md §21.1: the partners whose assertions are accepted (JSON, see PartnerSettings). */
  PARTNERS: v.optional(v.string(), "[]"),
  /** API.md §21.1: when set, an assertion's `aud` must include it. */
  PARTNER_ASSERTION_AUDIENCE: v.optional(v.string()),
  /** API.md §9.6: the flat fee per execution, in USD. */
  EXECUTION_FEE_USD: decimal("0.02"),
  /** API.md §9.6: the value-fee rate of each tier, in percent. */
  VALUE_FEE_TIERS: valueFeeTiers("tier1=0.03,tier2=0.09,tier3=0.18"),
  ...Object.fromEntries(Object.entries(LIMITS).map(([key, schema]) => [envName(key), schema])),
});

function parseChains(json: string): ChainSettings[] {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw new Error("CHAINS must be a JSON array of chain settings");
  }
  return v.parse(v.array(ChainSettings), raw);
}

/**
 * An Ed25519 public key as API.md §21.1 writes it: base64 (or base64url) of the 32 raw bytes, optionally prefixed
 * `ed25519:`, imported once at start. The DER SubjectPublicKeyInfo form (44 bytes) is accepted too.
 */
const ED25519_SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");
const Ed25519PublicKey = v.pipe(
  v.string(),
  v.rawTransform(({ dataset, addIssue, NEVER }) => {
    const text = dataset.value.trim().replace(/^ed25519:/i, "");
    const bytes = /^[A-Za-z0-9+/_-]+={0,2}$/.test(text)
      ? Buffer.from(text, text.includes("-") || text.includes("_") ? "base64url" : "base64")
      : undefined;
    const raw = bytes?.length === 44 && bytes.subarray(0, 12).equals(ED25519_SPKI_PREFIX) ? bytes.subarray(12) : bytes;
    if (raw?.length !== 32) {
      addIssue({ message: "must be a base64 Ed25519 public key (32 bytes), optionally prefixed ed25519:" });
      return NEVER;
    }
    try {
      return createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: raw.toString("base64url") }, format: "jwk" });
    } catch {
      addIssue({ message: "is not a usable Ed25519 public key" });
      return NEVER;
    }
  }),
);

/** One partner of API.md §21.1 (`PARTNERS`): its keys imported, so a bad key stops the start, never a request. */
const PartnerSettings = v.object({
  id: v.pipe(v.string(), v.minLength(1)),
  status: v.picklist(["active", "suspended"]),
  publicKeys: v.pipe(v.array(Ed25519PublicKey), v.minLength(1)),
  scopes: v.array(v.pipe(v.string(), v.minLength(1))),
});
export type Partner = v.InferOutput<typeof PartnerSettings>;

function parsePartners(json: string): Partner[] {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw new Error("Invalid configuration:\n  PARTNERS: must be a JSON array of partners");
  }
  const result = v.safeParse(
    v.pipe(
      v.array(PartnerSettings),
      v.check((list) => new Set(list.map((p) => p.id)).size === list.length, "names a partner id twice"),
    ),
    raw,
  );
  if (!result.success) {
    const lines = result.issues.map((i) => `PARTNERS${v.getDotPath(i) ? `.${v.getDotPath(i)}` : ""}: ${i.message}`);
    throw new Error(`Invalid configuration:\n  ${lines.join("\n  ")}`);
  }
  return result.output;
}

export type Config = ReturnType<typeof buildConfig>;

/** Builds the config from an environment (process.env by default); throws naming every bad variable. */
export function buildConfig(env: Record<string, string | undefined> = process.env) {
  const result = v.safeParse(Env, pickDefined(env));
  if (!result.success) {
    const lines = result.issues.map((i) => `${v.getDotPath(i) ?? "?"}: ${i.message}`);
    throw new Error(`Invalid configuration:\n  ${lines.join("\n  ")}`);
  }
  const e = result.output;
  const chains = parseChains(e.CHAINS);
  const defaultChainId = e.DEFAULT_CHAIN_ID ?? chains[0]?.chainId ?? 31337;
  return {
    port: e.PORT,
    dataDir: e.DATA_DIR,
    logLevel: e.LOG_LEVEL,
    serviceVersion: e.SERVICE_VERSION,
    tableName: e.TABLE_NAME,
    region: e.AWS_REGION,
    dynamoEndpoint: e.DYNAMODB_ENDPOINT,
    kmsEndpoint: e.KMS_ENDPOINT,
    secretsKeyId: e.SECRETS_KMS_KEY_ID,
    chains,
    defaultChainId,
    controllerPrivateKey: e.CONTROLLER_PRIVATE_KEY as `0x${string}` | undefined,
    controllerKmsKeyId: e.CONTROLLER_KMS_KEY_ID,
    jwtIssuer: e.JWT_ISSUER,
    jwtSigningKey: e.JWT_SIGNING_KEY,
    jwtPublicKey: e.JWT_PUBLIC_KEY,
    jwtKmsKeyId: e.JWT_KMS_KEY_ID,
    authAllowedUris: e.AUTH_ALLOWED_URIS,
    corsAllowedOrigins: e.CORS_ALLOWED_ORIGINS,
    partners: parsePartners(e.PARTNERS),
    partnerAssertionAudience: e.PARTNER_ASSERTION_AUDIENCE,
    allowPrivateNetwork: e.ALLOW_PRIVATE_NETWORK,
    runnerConcurrency: e.RUNNER_CONCURRENCY,
    fees: { executionFeeUsd: e.EXECUTION_FEE_USD, valueFeeTiers: e.VALUE_FEE_TIERS },
    limits: Object.fromEntries(Object.keys(LIMITS).map((key) => [key, (e as Record<string, unknown>)[envName(key)]])) as Limits,
  };
}

function pickDefined(env: Record<string, string | undefined>) {
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(env)) if (val !== undefined && val !== "") out[k] = val;
  return out;
}
