/**
 * `GET /openapi.json` and `GET /docs` (API.md §6.3): the OpenAPI 3.1 description of the routes this deployment
 * serves, and an HTML reference rendered from it.
 *
 * The document is written from API.md, not generated from the route table; tests/openapi.test.ts checks that
 * both list the same operations, so a new route without documentation fails the suite. Request bodies that
 * have a valibot schema are converted with @valibot/to-json-schema and then annotated with the rules the
 * schema cannot express (byte lengths, checksums, codes); the rest is hand-written JSON Schema (draft
 * 2020-12, the OpenAPI 3.1 dialect).
 *
 * The document depends only on the settings, so it is built once per configuration and cached.
 */
import { toJsonSchema } from "@valibot/to-json-schema";
import type * as v from "valibot";
import type { Route } from "./app";
import type { Config } from "../config";
import { useRuntime } from "../runtime";
import { CreateInput as WalletCreateInput, UpdateInput as WalletUpdateInput } from "../wallet/wallet";
import { PutBody as SecretPutBody } from "../secret/secret";

type Json = Record<string, unknown>;

const API_VERSION = 4;

// ---------------------------------------------------------------------------------------------------------
// Small builders

const schemaRef = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const paramRef = (name: string): Json => ({ $ref: `#/components/parameters/${name}` });
const headerRef = (name: string): Json => ({ $ref: `#/components/headers/${name}` });
const responseRef = (name: string): Json => ({ $ref: `#/components/responses/${name}` });

/** HTTP reason phrases used as problem `title` (API.md §2). */
const TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  412: "Precondition Failed",
  413: "Payload Too Large",
  415: "Unsupported Media Type",
  422: "Unprocessable Entity",
  429: "Too Many Requests",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
};

/** The error codes these routes can answer (API.md §15), with their meaning. */
const CODES: Record<string, string> = {
  AUTH_REQUIRED: "No `Authorization` header on a non-public route.",
  AUTH_MALFORMED: "Not `Bearer <token>`, or the token is not a compact JWS.",
  AUTH_INVALID_TOKEN: "Bad signature, expired, wrong issuer, `alg` not ES256 (`none` included), unknown `kid`, bad claims.",
  AUTH_BAD_REQUEST: "Wrong member types or unknown members.",
  AUTH_MISSING_FIELDS: "`ownerAddress`, `signature` or `message` missing or empty.",
  AUTH_INVALID_ADDRESS: "`ownerAddress` is not an address.",
  AUTH_ZERO_ADDRESS: "`ownerAddress` is the zero address.",
  AUTH_BAD_MESSAGE: "Message not in the 8-line format, bad URI/Version/Chain ID/times, or the Wallet line differs from `ownerAddress`.",
  AUTH_EXPIRED_MESSAGE: "Expire At is not in the future.",
  AUTH_EXPIRY_TOO_LONG: "Expire At is more than the maximum token lifetime ahead.",
  AUTH_INVALID_SIGNATURE: "Signature malformed or not made by `ownerAddress`.",
  INVALID_JSON: "Body is not JSON or not a JSON object.",
  VALIDATION_FAILED: "A field-level problem in path, query, headers or body; `errors` lists every problem found.",
  INVALID_CURSOR: "`before`/`after` cursor undecodable or issued by another endpoint or for another caller.",
  UNSUPPORTED_API_VERSION: "`X-Api-Version` other than `4`.",
  UNSUPPORTED_CHAIN: "A non-zero chain id that is not configured.",
  INVALID_FACTORY: "The factory has no code, is the zero address, or its `getAddress` fails or returns zero, or returns a deployed account whose `owner()` is not the caller.",
  WALLET_NOT_OWNED: "Before signing for a wallet of a factory that is not known: the account is not deployed or its `owner()` is not the caller.",
  WITHDRAW_MISSING_FIELDS: "`recipientAddress`, `amount` or `token` missing.",
  WITHDRAW_BAD_RECIPIENT: "Recipient not an address, the zero address, or the wallet itself.",
  WITHDRAW_BAD_AMOUNT: "Amount not a positive wei integer and not `max`.",
  WITHDRAW_BAD_TOKEN: "Token not `ETH` and not an address, the zero address, or without contract code on the chain.",
  INSUFFICIENT_BALANCE: "Balance preflight: balance below the amount, or zero with `max`.",
  SECRET_NAME_RESERVED: "Secret name starts with `ap_` (any letter case).",
  SECRET_SCOPE_UNSUPPORTED: "`orgId` given: organization-scoped secrets are not supported.",
  WORKFLOW_NOT_FOUND: "Workflow unknown, malformed id, deleted, or another owner's.",
  WALLET_NOT_FOUND: "Wallet not registered by the caller on the resolved chain.",
  WITHDRAWAL_NOT_FOUND: "Withdrawal id unknown for that wallet.",
  IDEMPOTENCY_IN_PROGRESS: "A request with the same `Idempotency-Key` is still being processed.",
  PAYLOAD_TOO_LARGE: "Request body over the body limit.",
  UNSUPPORTED_MEDIA_TYPE: "Non-empty body without `Content-Type: application/json`.",
  IDEMPOTENCY_KEY_MISMATCH: "`Idempotency-Key` reused with a different body.",
  RATE_LIMITED: "Rate-limit bucket empty; `Retry-After` says when to retry. The rejected request consumed no token.",
  WALLETS_LIMIT_REACHED: "Wallet cap per owner per chain reached (hidden wallets count); `limit` is the cap. Not a rate limit: no `Retry-After`.",
  SECRETS_LIMIT_REACHED: "Secret cap per owner reached on creating a new secret (replacing is always allowed); `limit` is the cap. Not a rate limit: no `Retry-After`.",
  INTERNAL: "Unexpected failure; generic `detail`.",
  UPSTREAM_UNAVAILABLE: "Chain RPC, bundler or paymaster unusable: 503 when unreachable or timed out, 502 when it answered with something invalid.",
};

const FIELD_CODES = new Set([
  "VALIDATION_FAILED",
  "SECRET_NAME_RESERVED",
  "SECRET_SCOPE_UNSUPPORTED",
  "WITHDRAW_MISSING_FIELDS",
  "WITHDRAW_BAD_RECIPIENT",
  "WITHDRAW_BAD_AMOUNT",
  "WITHDRAW_BAD_TOKEN",
  "AUTH_BAD_REQUEST",
  "AUTH_MISSING_FIELDS",
  "AUTH_INVALID_ADDRESS",
  "AUTH_ZERO_ADDRESS",
  "AUTH_BAD_MESSAGE",
  "AUTH_INVALID_SIGNATURE",
]);

/** An example problem body for one code (shown by renderers as a choice of examples). */
function problemExample(status: number, code: string, limits: Config["limits"]): Json {
  const detail =
    status === 500
      ? "An internal error occurred."
      : code === "UPSTREAM_UNAVAILABLE"
        ? "The chain RPC or bundler is unavailable."
        : code === "VALIDATION_FAILED"
          ? "Request validation failed."
          : CODES[code];
  const value: Json = { type: "about:blank", title: TITLES[status], status, detail, instance: "01JD7Q0S7W3C2Y8K5N6M4P1R9T", code };
  if (code === "VALIDATION_FAILED") value.errors = [{ path: "query.limit", message: "must be at most 200" }];
  else if (FIELD_CODES.has(code)) value.errors = [{ path: "body.field", message: "what is wrong, in plain words" }];
  if (code === "WALLETS_LIMIT_REACHED") value.limit = limits.maxWalletsPerOwner;
  if (code === "SECRETS_LIMIT_REACHED") value.limit = limits.maxSecretsPerOwner;
  return { summary: code, value };
}

/** One error status of one operation: a problem+json body whose `code` is one of `codes`. */
function problemResponse(status: number, codes: string[], limits: Config["limits"], note?: string): Json {
  const lines = codes.map((code) => `- \`${code}\`: ${CODES[code] ?? ""}`);
  const headers: Json = {
    "X-Request-Id": headerRef("XRequestId"),
    "X-Api-Version": headerRef("XApiVersion"),
    "Cache-Control": headerRef("CacheControlNoStore"),
  };
  if (status !== 401) {
    Object.assign(headers, {
      "X-RateLimit-Limit": headerRef("XRateLimitLimit"),
      "X-RateLimit-Remaining": headerRef("XRateLimitRemaining"),
      "X-RateLimit-Reset": headerRef("XRateLimitReset"),
    });
  }
  if (status === 401) headers["WWW-Authenticate"] = headerRef("WWWAuthenticate");
  if (codes.includes("RATE_LIMITED")) headers["Retry-After"] = headerRef("RetryAfter");
  return {
    description: `${TITLES[status]}. \`code\` is one of:\n\n${lines.join("\n")}${note ? `\n\n${note}` : ""}`,
    headers,
    content: {
      "application/problem+json": {
        schema: schemaRef("Problem"),
        examples: Object.fromEntries(codes.map((code) => [code, problemExample(status, code, limits)])),
      },
    },
    "x-problem-codes": codes,
  };
}

/**
 * A valibot request schema as JSON Schema (draft 2020-12) plus annotations: `annotate` is merged into each
 * named property (its keywords replace the derived ones). Optional members also accept `null` (API.md §1.3:
 * an optional field sent as `null` is treated as absent); unknown members are rejected.
 */
function derivedBody(
  schema: v.GenericSchema,
  description: string,
  annotate: Record<string, Json>,
): Json {
  const derived = toJsonSchema(schema, { errorMode: "ignore", target: "draft-2020-12" }) as Json;
  delete derived.$schema;
  const properties = { ...(derived.properties as Record<string, Json>) };
  for (const [name, extra] of Object.entries(annotate)) properties[name] = { ...properties[name], ...extra };
  return requestObject({ ...derived, description, properties, additionalProperties: false });
}

/** Marks optional members of a request object as nullable (sent as null = absent). */
function requestObject(schema: Json): Json {
  const required = new Set((schema.required as string[] | undefined) ?? []);
  const properties = Object.fromEntries(
    Object.entries(schema.properties as Record<string, Json>).map(([name, prop]) => {
      if (required.has(name)) return [name, prop];
      if (typeof prop.type === "string") return [name, { ...prop, type: [prop.type, "null"] }];
      if (prop.$ref !== undefined) return [name, { anyOf: [prop, { type: "null" }] }];
      return [name, prop]; // already accepts anything, null included
    }),
  );
  return { type: "object", ...schema, properties, additionalProperties: false };
}

// ---------------------------------------------------------------------------------------------------------
// Components

function components(config: Config): Json {
  const { limits } = config;
  const uint256 = {
    type: "string",
    pattern: "^(0|[1-9][0-9]*)$",
    maxLength: 78,
    description: "Uint256: canonical decimal (no sign, no leading zeros, no hex), value at most 2^256 − 1.",
    examples: ["1000000000000000000"],
  };
  const schemas: Record<string, Json> = {
    Address: {
      type: "string",
      pattern: "^0x[0-9a-fA-F]{40}$",
      description:
        "`0x` + 40 hex digits. Accepted all-lowercase, all-uppercase or in valid EIP-55 mixed case (a mixed-case value with a wrong checksum is rejected); compared case-insensitively; always returned in EIP-55 form.",
      examples: ["0x5B38Da6a701c568545dCfcB03FcB875f56beddC4"],
    },
    Bytes32: { type: "string", pattern: "^0x[0-9a-fA-F]{64}$", description: "`0x` + 64 hex digits." },
    Uint256: uint256,
    Ulid: {
      type: "string",
      pattern: "^[0-9A-HJKMNP-TV-Z]{26}$",
      description: "ULID: 26 characters of Crockford base32, generated uppercase (lowercase input is accepted and upper-cased).",
      examples: ["01JD7Q0S7W3C2Y8K5N6M4P1R9T"],
    },
    TimeMs: { type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: "Unix time in milliseconds." },
    ChainId: { type: "integer", minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: "A positive EVM chain id." },

    FieldError: {
      type: "object",
      required: ["path", "message"],
      properties: {
        path: {
          type: "string",
          description:
            "Where the problem is, prefixed by its location (`body.`, `query.`, `path.` or `header.`), then a dotted path with `[index]` for arrays, e.g. `body.salt`, `query.limit`, `path.address`, `header.Idempotency-Key`.",
          examples: ["query.limit"],
        },
        message: { type: "string", description: "What is wrong, in plain words." },
      },
    },
    Problem: {
      type: "object",
      description:
        "RFC 7807 problem details, the body of every 4xx and 5xx response (`application/problem+json`). Clients branch on `code`, never on `detail`; new codes may be added within version 4. 5xx bodies never contain stack traces, upstream responses, storage errors, keys or secret values, and no error body ever contains a secret value.",
      required: ["type", "title", "status", "detail", "instance", "code"],
      properties: {
        type: { type: "string", const: "about:blank", description: "Always `about:blank`." },
        title: { type: "string", description: "The HTTP reason phrase of `status`.", examples: ["Bad Request"] },
        status: { type: "integer", minimum: 400, maximum: 599, description: "Same as the HTTP status." },
        detail: { type: "string", description: "Human-readable explanation for this occurrence. Not stable; do not parse." },
        instance: { type: "string", description: "The request id (same value as the `X-Request-Id` response header)." },
        code: { type: "string", pattern: "^[A-Z][A-Z0-9_]*$", description: "Stable UPPER_SNAKE machine code (API.md §15).", examples: ["VALIDATION_FAILED"] },
        errors: {
          type: "array",
          items: schemaRef("FieldError"),
          description: "Present on `VALIDATION_FAILED` and the other field-level 400s; lists every problem found.",
        },
        reason: {
          type: "string",
          enum: ["EXPIRED", "MAX_EXECUTIONS_REACHED", "FAILED", "DISABLED", "NOT_STARTED"],
          description: "On 412 `WORKFLOW_NOT_RUNNABLE` only.",
        },
        limit: {
          type: "integer",
          minimum: 0,
          description: "On the quota 429s (`WALLETS_LIMIT_REACHED`, `WORKFLOWS_LIMIT_REACHED`, `SECRETS_LIMIT_REACHED`): the cap that was hit.",
        },
      },
    },
    PageInfo: {
      type: "object",
      required: ["hasNextPage", "hasPreviousPage"],
      description:
        "`startCursor`/`endCursor` are the cursors of the first and last item of `data`, absent when `data` is empty. `hasNextPage` is true iff at least one item of the (filtered) list comes after the last item of `data`; `hasPreviousPage` iff at least one comes before the first. With an empty page the reference point is the cursor's position.",
      properties: {
        hasNextPage: { type: "boolean" },
        hasPreviousPage: { type: "boolean" },
        startCursor: { type: "string", maxLength: 512, description: "Opaque cursor; pass as `before` to get the preceding page." },
        endCursor: { type: "string", maxLength: 512, description: "Opaque cursor; pass as `after` to get the following page." },
      },
    },

    Health: {
      type: "object",
      required: ["status", "version", "chainId"],
      properties: {
        status: {
          type: "string",
          enum: ["ok", "degraded"],
          description: "`ok` when every dependency check (datastore, key service, default-chain RPC) passed, `degraded` otherwise. Checks are cached for up to 10 s.",
        },
        version: { type: "string", description: "Service version (semver). Clients may put it in the sign-in message's `Version:` line.", examples: [config.serviceVersion] },
        chainId: { ...schemaRef("ChainId"), description: "`default_chain_id` of the deployment." },
      },
    },
    Jwk: {
      type: "object",
      required: ["kty", "crv", "x", "y", "kid", "use", "alg"],
      properties: {
        kty: { type: "string", const: "EC" },
        crv: { type: "string", const: "P-256" },
        x: { type: "string", description: "base64url x coordinate." },
        y: { type: "string", description: "base64url y coordinate." },
        kid: { type: "string", description: "RFC 7638 thumbprint; the `kid` of tokens signed with this key." },
        use: { type: "string", const: "sig" },
        alg: { type: "string", const: "ES256" },
      },
    },
    Jwks: {
      type: "object",
      required: ["keys"],
      description: "The current signing key and any retired keys whose tokens may still be valid. A token whose `kid` is not listed is rejected.",
      properties: { keys: { type: "array", items: schemaRef("Jwk") } },
    },
    AuthExchangeRequest: requestObject({
      description:
        "Exactly these three non-empty string members. The message is exactly eight lines separated by `\\n` (a `\\r` before each `\\n` is tolerated; one trailing `\\n` is allowed):\n\n```\nPlease sign the below text for ownership verification.\n\nURI: https://app.example.com\nChain ID: 11155111\nVersion: 1.4.0\nIssued At: 2026-11-22T10:00:00.000Z\nExpire At: 2026-11-23T10:00:00.000Z\nWallet: 0x5B38Da6a701c568545dCfcB03FcB875f56beddC4\n```\n\n" +
        `URI: an absolute http(s) URL${config.authAllowedUris.length ? " listed by the deployment" : ""}. Chain ID: a configured chain, positive decimal without leading zeros. Version: 1–64 printable characters. Issued At / Expire At: \`YYYY-MM-DDTHH:mm:ss.SSSZ\` (UTC); Issued At before Expire At and at most 60 s after now; Expire At in the future and at most ${limits.maxTokenLifetimeS} s after now. Wallet: the EIP-55 form of \`ownerAddress\`. Checks run in the order of API.md §7.1; the first failure answers.`,
      required: ["ownerAddress", "signature", "message"],
      properties: {
        ownerAddress: { ...schemaRef("Address"), description: "The externally owned account that signed; not the zero address." },
        signature: {
          type: "string",
          pattern: "^0x[0-9a-fA-F]{130}$",
          description: "65-byte `personal_sign` (EIP-191) signature over `message`; `v` may be 0, 1, 27 or 28.",
        },
        message: { type: "string", minLength: 1, description: "The exact text that was signed; the signature is checked over these bytes exactly as sent." },
      },
    }),
    AuthExchangeResponse: {
      type: "object",
      required: ["token", "expiresAt", "subject"],
      properties: {
        token: {
          type: "string",
          description:
            "Compact JWS: an ES256 JWT with header `{alg: \"ES256\", typ: \"JWT\", kid}` and claims `iss`, `sub` (EIP-55 address), `aud` (`[\"<chainId>\"]`), `iat`, `exp` (Expire At in seconds), `jti` (ULID). Send it as `Authorization: Bearer <token>`.",
        },
        expiresAt: {
          type: "string",
          format: "date-time",
          pattern: "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$",
          description: "RFC 3339 UTC with milliseconds: the message's Expire At.",
        },
        subject: { ...schemaRef("Address"), description: "EIP-55 form of `ownerAddress`; the token's `sub`." },
      },
    },

    Wallet: {
      type: "object",
      required: [
        "address",
        "salt",
        "factoryAddress",
        "isHidden",
        "totalWorkflowCount",
        "enabledWorkflowCount",
        "disabledWorkflowCount",
        "completedWorkflowCount",
        "failedWorkflowCount",
      ],
      properties: {
        address: { ...schemaRef("Address"), description: "Derived smart-account address (EIP-55)." },
        salt: { ...schemaRef("Uint256"), description: "Canonical decimal." },
        factoryAddress: { ...schemaRef("Address"), description: "The factory used (the chain's configured default when none was given)." },
        isHidden: { type: "boolean", description: "`false` at registration." },
        totalWorkflowCount: { type: "integer", minimum: 0, description: "The caller's workflows whose `smartWalletAddress` is this address (any chain)." },
        enabledWorkflowCount: { type: "integer", minimum: 0 },
        disabledWorkflowCount: { type: "integer", minimum: 0 },
        completedWorkflowCount: { type: "integer", minimum: 0 },
        failedWorkflowCount: {
          type: "integer",
          minimum: 0,
          description: "The four counts by effective status sum to `totalWorkflowCount`.",
        },
      },
    },
    WalletList: {
      type: "object",
      required: ["data"],
      description: "Not paged (the wallet cap keeps it short).",
      properties: { data: { type: "array", items: schemaRef("Wallet") } },
    },
    WalletCreateRequest: derivedBody(WalletCreateInput, "Ensure a wallet is registered for (caller, chain, factory, salt).", {
      salt: {
        ...uint256,
        description: "`0` to 2^256 − 1, canonical decimal; anything else (negative, empty, hex, leading zeros, too large) → 400 `VALIDATION_FAILED`.",
      },
      factoryAddress: {
        description:
          "Address (any accepted case). Default: the chain's configured factory. Known factories (the chain's default and its configured list) derive the address offline. Any other factory must have code on the chain and its view `getAddress(address owner, uint256 salt)` must return a non-zero address that is not a deployed account of another owner, else 400 `INVALID_FACTORY` (also for the zero address); nothing is signed for such a wallet until its deployed account reports the caller as `owner()`.",
      },
      chainId: { description: "Chain per API.md §5: non-zero → that chain (must be configured); `0` or absent → the JWT `aud` chain if configured, else `default_chain_id`." },
    }),
    WalletUpdateRequest: derivedBody(WalletUpdateInput, "`{}` changes nothing.", {
      isHidden: { description: "Hide or show the wallet in `GET /wallets` (hidden wallets still count toward the cap)." },
    }),
    WalletNonce: {
      type: "object",
      required: ["nonce"],
      properties: { nonce: { ...schemaRef("Uint256"), description: "The EntryPoint's `getNonce(address, 0)`; `\"0\"` for an undeployed account." } },
    },
    WithdrawRequest: requestObject({
      description:
        "Checks, in order: missing `recipientAddress`, `amount` or `token` → `WITHDRAW_MISSING_FIELDS`; bad recipient → `WITHDRAW_BAD_RECIPIENT`; bad amount → `WITHDRAW_BAD_AMOUNT`; bad token → `WITHDRAW_BAD_TOKEN`; other shape errors (unknown members, bad `chainId`) → `VALIDATION_FAILED`; chain not configured or without a bundler → `UNSUPPORTED_CHAIN`; wallet not the caller's on that chain → 404 `WALLET_NOT_FOUND`; a wallet of a factory that is not known whose deployed account does not report the caller as `owner()` → `WALLET_NOT_OWNED`; token without contract code, or a contract that is not an ERC-20 → `WITHDRAW_BAD_TOKEN`; balance preflight → `INSUFFICIENT_BALANCE`; RPC, bundler or paymaster unusable before sending → 502/503 `UPSTREAM_UNAVAILABLE` (nothing recorded).",
      required: ["recipientAddress", "amount", "token"],
      properties: {
        recipientAddress: { ...schemaRef("Address"), description: "Not the zero address, not the wallet itself." },
        amount: {
          type: "string",
          pattern: "^(max|[1-9][0-9]*)$",
          maxLength: 78,
          description:
            "Wei as a canonical decimal greater than 0 (at most 2^256 − 1), or `\"max\"`: the whole balance (for the native token when the wallet pays its own gas, the balance minus the operation's maximum gas cost).",
        },
        token: {
          type: "string",
          pattern: "^(ETH|0x[0-9a-fA-F]{40})$",
          description: "`\"ETH\"` (exactly) for the chain's native token, or a non-zero ERC-20 contract Address.",
        },
        chainId: {
          type: "integer",
          minimum: 0,
          maximum: Number.MAX_SAFE_INTEGER,
          description: "`0` or absent: the caller's default chain (JWT `aud`, else `default_chain_id`). The chain must be configured with a bundler.",
        },
      },
    }),
    WithdrawResult: {
      type: "object",
      required: ["id", "chainId", "status", "submittedAt", "smartWalletAddress", "recipientAddress", "amount", "token"],
      properties: {
        id: { ...schemaRef("Ulid"), description: "Withdrawal record id." },
        chainId: schemaRef("ChainId"),
        status: {
          type: "string",
          enum: ["pending", "confirmed", "failed"],
          description:
            "`confirmed`: receipt received and successful. `pending`: accepted by the bundler, no receipt yet. `failed`: the bundler or paymaster rejected the operation, it was included and reverted, or it was not included within 30 minutes. `confirmed` and `failed` are final.",
        },
        message: { type: "string", description: "Reason when `failed`; otherwise absent." },
        userOpHash: { ...schemaRef("Bytes32"), description: "Once accepted by the bundler (or computed locally when the bundler's answer was lost)." },
        transactionHash: { ...schemaRef("Bytes32"), description: "Once included." },
        submittedAt: { ...schemaRef("TimeMs"), description: "When the operation was sent." },
        smartWalletAddress: schemaRef("Address"),
        recipientAddress: schemaRef("Address"),
        amount: { ...schemaRef("Uint256"), description: "The wei amount actually requested (`max` resolved)." },
        token: { type: "string", pattern: "^(ETH|0x[0-9a-fA-F]{40})$", description: "`\"ETH\"` or the token Address." },
      },
    },
    WithdrawResultPage: {
      type: "object",
      required: ["data", "pageInfo"],
      properties: { data: { type: "array", items: schemaRef("WithdrawResult") }, pageInfo: schemaRef("PageInfo") },
    },
    SecretMetadata: {
      type: "object",
      required: ["name", "scope", "createdAt", "updatedAt"],
      description: "A secret's metadata; the value is never returned by any endpoint.",
      properties: {
        name: { type: "string", pattern: "^[A-Za-z_][A-Za-z0-9_]{0,127}$" },
        scope: { type: "string", enum: ["user", "workflow"] },
        workflowId: { ...schemaRef("Ulid"), description: "Present exactly when `scope` is `workflow`." },
        createdAt: schemaRef("TimeMs"),
        updatedAt: { ...schemaRef("TimeMs"), description: "Last put; equals `createdAt` until replaced." },
      },
    },
    SecretMetadataPage: {
      type: "object",
      required: ["data", "pageInfo"],
      properties: { data: { type: "array", items: schemaRef("SecretMetadata") }, pageInfo: schemaRef("PageInfo") },
    },
    SecretPutRequest: derivedBody(SecretPutBody, "The secret's value and scope. A secret is identified by (owner, name, workflowId or none).", {
      value: {
        type: "string",
        minLength: 1,
        maxLength: limits.maxSecretBytes,
        description: `1 to ${limits.maxSecretBytes} bytes of UTF-8 (valid Unicode text). Stored only envelope-encrypted; never logged or returned.`,
      },
      workflowId: {
        type: "string",
        pattern: "^[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}$",
        description: "ULID (any letter case). Given: workflow scope, and the workflow must be the caller's (404 `WORKFLOW_NOT_FOUND`). Absent: user scope.",
      },
      orgId: { description: "Not supported: any non-null value → 400 `SECRET_SCOPE_UNSUPPORTED`." },
    }),
  };

  const headers: Record<string, Json> = {
    XRequestId: {
      description: "The request's `X-Request-Id` when it was 1–128 characters from `[A-Za-z0-9._:-]`, else a generated ULID. Also the `instance` of a problem body.",
      required: true,
      schema: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,128}$" },
    },
    XApiVersion: { description: "Always `4`.", required: true, schema: { type: "string", const: String(API_VERSION) } },
    XRateLimitLimit: {
      description: `Rate-limit bucket capacity (${limits.rateLimitBurst}). On every response to a request that reached the rate limiter (after the version and authentication checks).`,
      schema: { type: "integer", minimum: 1 },
    },
    XRateLimitRemaining: { description: "Whole tokens left after this request.", schema: { type: "integer", minimum: 0 } },
    XRateLimitReset: { description: "Unix time in seconds (rounded up) at which the bucket will be full again.", schema: { type: "integer", minimum: 0 } },
    RetryAfter: { description: "On 429 `RATE_LIMITED` only: whole seconds (at least 1) until one token is available.", schema: { type: "integer", minimum: 1 } },
    WWWAuthenticate: { description: "Always `Bearer` on 401.", required: true, schema: { type: "string", const: "Bearer" } },
    CacheControlNoStore: { description: "`no-store` on authenticated responses and on every error.", schema: { type: "string", const: "no-store" } },
    CacheControlJwks: { description: "`public, max-age=300`.", required: true, schema: { type: "string", const: "public, max-age=300" } },
    IdempotencyReplayed: {
      description: "`true` when the response is a replay of an earlier request with the same `Idempotency-Key`; absent otherwise.",
      schema: { type: "string", const: "true" },
    },
  };

  const ulidInput = { type: "string", pattern: "^[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}$" };
  const parameters: Record<string, Json> = {
    XApiVersion: {
      name: "X-Api-Version",
      in: "header",
      required: false,
      description: "Optional. Any value other than `4` → 400 `UNSUPPORTED_API_VERSION` (checked before authentication).",
      schema: { type: "string", enum: [String(API_VERSION)] },
    },
    XRequestId: {
      name: "X-Request-Id",
      in: "header",
      required: false,
      description: "Optional. A value of 1–128 characters from `[A-Za-z0-9._:-]` is echoed in the response; any other value is ignored and a ULID generated.",
      schema: { type: "string", examples: ["client-req-42"] },
    },
    IdempotencyKey: {
      name: "Idempotency-Key",
      in: "header",
      required: false,
      description: `Optional. 1–255 characters in the range 0x21–0x7E, else 400 \`VALIDATION_FAILED\` (\`header.Idempotency-Key\`). Scoped to (caller, wallet, key) for ${limits.idempotencyTtlS} s. A repeat with the same body sends nothing and answers 200 with the recorded withdrawal in its current state and \`Idempotency-Replayed: true\`; with a different body → 422 \`IDEMPOTENCY_KEY_MISMATCH\`; while the first is still in progress → 409 \`IDEMPOTENCY_IN_PROGRESS\`. A preflight 400 is not remembered under the key.`,
      schema: { type: "string", minLength: 1, maxLength: 255, pattern: "^[!-~]{1,255}$" },
    },
    Limit: {
      name: "limit",
      in: "query",
      required: false,
      description: "Page size, 1 to 200 (decimal digits only). `0`, negative, above 200 or not an integer → 400 `VALIDATION_FAILED`.",
      schema: { type: "integer", minimum: 1, maximum: 200, default: 20 },
    },
    After: {
      name: "after",
      in: "query",
      required: false,
      description:
        "Cursor: return the items that come after this cursor's item in list order. Not together with `before` (400 `VALIDATION_FAILED`). A cursor that cannot be decoded, or was issued by another endpoint or for another caller → 400 `INVALID_CURSOR`.",
      schema: { type: "string", maxLength: 512 },
    },
    Before: {
      name: "before",
      in: "query",
      required: false,
      description:
        "Cursor: return the `limit` items immediately before this cursor's item, in list order. Not together with `after` (400 `VALIDATION_FAILED`). Undecodable or foreign cursor → 400 `INVALID_CURSOR`.",
      schema: { type: "string", maxLength: 512 },
    },
    ChainId: {
      name: "chainId",
      in: "query",
      required: false,
      description:
        "Decimal digits. Non-zero: that chain, which must be configured (400 `UNSUPPORTED_CHAIN`). `0` or absent: the JWT `aud` chain if configured, else `default_chain_id`.",
      schema: { type: "integer", minimum: 0, maximum: 999_999_999_999_999 },
    },
    IncludeHidden: {
      name: "includeHidden",
      in: "query",
      required: false,
      description: "Exactly `true` or `false`; `true` includes hidden wallets.",
      schema: { type: "boolean", default: false },
    },
    WithdrawalStatus: {
      name: "status",
      in: "query",
      required: false,
      description:
        "Only withdrawals with one of these statuses. Repeated keys (`?status=pending&status=failed`), comma-separated values (`?status=pending,failed`) or both; empty items are ignored, duplicates merged, at most 50 values.",
      style: "form",
      explode: true,
      schema: { type: "array", maxItems: 50, items: { type: "string", enum: ["pending", "confirmed", "failed"] } },
    },
    SecretWorkflowIdList: {
      name: "workflowId",
      in: "query",
      required: false,
      description: "ULID (any letter case). Only that workflow's secrets; the workflow must be the caller's, else 404 `WORKFLOW_NOT_FOUND`. Absent: all of the caller's secrets, both scopes.",
      schema: ulidInput,
    },
    SecretWorkflowIdDelete: {
      name: "workflowId",
      in: "query",
      required: false,
      description:
        "ULID (any letter case). Given: deletes that workflow-scoped secret (a foreign `workflowId` deletes nothing). Absent: deletes the user-scoped secret of that name only. Malformed → 400 `VALIDATION_FAILED`.",
      schema: ulidInput,
    },
    OrgId: {
      name: "orgId",
      in: "query",
      required: false,
      description: "Not supported: any value → 400 `SECRET_SCOPE_UNSUPPORTED`.",
      schema: { type: "string" },
    },
    WalletAddress: {
      name: "address",
      in: "path",
      required: true,
      description:
        "The wallet's address (any accepted case). A malformed address is treated like an unknown one (404 `WALLET_NOT_FOUND`). The wallet must be registered by the caller on the resolved chain.",
      schema: schemaRef("Address"),
    },
    SecretName: {
      name: "name",
      in: "path",
      required: true,
      description: "`^[A-Za-z_][A-Za-z0-9_]{0,127}$`, else 400 `VALIDATION_FAILED`. Names starting with `ap_` in any letter case are reserved.",
      schema: { type: "string", pattern: "^[A-Za-z_][A-Za-z0-9_]{0,127}$" },
    },
    WithdrawalId: {
      name: "id",
      in: "path",
      required: true,
      description: "Withdrawal id (ULID, any letter case). Malformed or unknown → 404 `WITHDRAWAL_NOT_FOUND`.",
      schema: ulidInput,
    },
  };

  const responses: Record<string, Json> = {
    Unauthorized: problemResponse(401, ["AUTH_REQUIRED", "AUTH_MALFORMED", "AUTH_INVALID_TOKEN"], limits),
    InternalError: problemResponse(500, ["INTERNAL"], limits),
  };

  return {
    schemas,
    parameters,
    headers,
    responses,
    securitySchemes: {
      bearerAuth: {
        type: "http",
        scheme: "bearer",
        bearerFormat: "JWT",
        description:
          "`Authorization: Bearer <token>` with a token from `POST /auth:exchange` (ES256 JWT). No query-string or cookie alternative. Missing header → 401 `AUTH_REQUIRED`; not `Bearer <three base64url segments>` → 401 `AUTH_MALFORMED`; bad signature, `alg` other than ES256, unknown `kid`, wrong `iss`, expired (no leeway), `iat` more than 60 s ahead, bad `sub`/`aud` → 401 `AUTH_INVALID_TOKEN`.",
      },
    },
  };
}

// ---------------------------------------------------------------------------------------------------------
// Operations

interface Operation {
  method: "get" | "post" | "put" | "patch" | "delete";
  path: string;
  operationId: string;
  summary: string;
  description: string;
  tag: string;
  public?: boolean;
  /** Component parameter names besides the common headers. */
  params?: string[];
  body?: { schema: string; description?: string };
  success: Record<string, Json>;
  /** Error codes by status, besides the ones every operation shares. */
  errors?: Record<number, string[]>;
  /** Extra notes per error status. */
  notes?: Record<number, string>;
}

const commonSuccessHeaders = (authenticated: boolean, extra: Json = {}): Json => ({
  "X-Request-Id": headerRef("XRequestId"),
  "X-Api-Version": headerRef("XApiVersion"),
  "X-RateLimit-Limit": headerRef("XRateLimitLimit"),
  "X-RateLimit-Remaining": headerRef("XRateLimitRemaining"),
  "X-RateLimit-Reset": headerRef("XRateLimitReset"),
  ...(authenticated ? { "Cache-Control": headerRef("CacheControlNoStore") } : {}),
  ...extra,
});

const json = (schema: string, description: string, authenticated: boolean, extraHeaders?: Json): Json => ({
  description,
  headers: commonSuccessHeaders(authenticated, extraHeaders),
  content: { "application/json": { schema: schemaRef(schema) } },
});

const noContent = (description: string): Json => ({ description, headers: commonSuccessHeaders(true) });

function operations(config: Config): Operation[] {
  const { limits } = config;
  return [
    {
      method: "get",
      path: "/health",
      operationId: "getHealth",
      summary: "Service health",
      description:
        "200 whenever the process can answer; the body says whether the dependencies (datastore, key service, default-chain RPC) answer too. The checks are cached for up to 10 s.",
      tag: "Service",
      public: true,
      success: { 200: json("Health", "The service answers; `status` tells whether its dependencies do.", false) },
    },
    {
      method: "post",
      path: "/auth:exchange",
      operationId: "exchangeAuthToken",
      summary: "Exchange a signed sign-in message for a token",
      description:
        "Obtains a bearer token by proving control of an externally owned account: sign the 8-line message with `personal_sign` (EIP-191) and send it with the signature. The token lives until the signed Expire At (at most `max_token_lifetime_s`); there is no refresh (sign a new message) and no revocation other than key rotation.",
      tag: "Authentication",
      public: true,
      body: { schema: "AuthExchangeRequest" },
      success: { 200: json("AuthExchangeResponse", "The token.", false) },
      errors: {
        400: [
          "AUTH_MISSING_FIELDS",
          "AUTH_BAD_REQUEST",
          "AUTH_INVALID_ADDRESS",
          "AUTH_ZERO_ADDRESS",
          "AUTH_BAD_MESSAGE",
          "UNSUPPORTED_CHAIN",
          "AUTH_EXPIRED_MESSAGE",
          "AUTH_EXPIRY_TOO_LONG",
          "AUTH_INVALID_SIGNATURE",
        ],
      },
      notes: { 400: "Checks apply in the order listed; the first failure answers." },
    },
    {
      method: "get",
      path: "/.well-known/jwks.json",
      operationId: "getJwks",
      summary: "Token verification keys",
      description: "The public keys that verify tokens (ES256, P-256): the current signing key and any retired keys whose tokens may still be valid.",
      tag: "Authentication",
      public: true,
      success: { 200: json("Jwks", "The key set.", false, { "Cache-Control": headerRef("CacheControlJwks") }) },
    },
    {
      method: "get",
      path: "/openapi.json",
      operationId: "getOpenApiDocument",
      summary: "This OpenAPI document",
      description: "The OpenAPI 3.1 description of the routes this deployment serves.",
      tag: "Service",
      public: true,
      success: {
        200: {
          description: "An OpenAPI 3.1 document.",
          headers: commonSuccessHeaders(false),
          content: {
            "application/json": {
              schema: {
                type: "object",
                required: ["openapi", "info", "paths"],
                properties: {
                  openapi: { type: "string", pattern: "^3\\.1\\.\\d+$" },
                  info: { type: "object", properties: { title: { type: "string" }, version: { type: "string" } }, required: ["title", "version"] },
                  paths: { type: "object" },
                },
              },
            },
          },
        },
      },
    },
    {
      method: "get",
      path: "/docs",
      operationId: "getDocs",
      summary: "Interactive API reference",
      description: "An HTML reference rendered from `/openapi.json`, with a plain list of the operations that needs no JavaScript.",
      tag: "Service",
      public: true,
      success: {
        200: { description: "An HTML page.", headers: commonSuccessHeaders(false), content: { "text/html": { schema: { type: "string" } } } },
      },
    },

    // Secrets (API.md §12)
    {
      method: "get",
      path: "/secrets",
      operationId: "listSecrets",
      summary: "List secret metadata",
      description:
        "One page of the caller's secret metadata, ordered by `name` ascending (byte order), then user scope before workflow scope, then `workflowId` ascending. Values are never returned. Field checks: `workflowId`, then `orgId`, then paging.",
      tag: "Secrets",
      params: ["SecretWorkflowIdList", "OrgId", "Limit", "After", "Before"],
      success: { 200: json("SecretMetadataPage", "A page of secret metadata.", true) },
      errors: { 400: ["VALIDATION_FAILED", "SECRET_SCOPE_UNSUPPORTED", "INVALID_CURSOR"], 404: ["WORKFLOW_NOT_FOUND"] },
    },
    {
      method: "put",
      path: "/secrets/{name}",
      operationId: "putSecret",
      summary: "Create or replace a secret",
      description:
        "Creates the caller's secret `name` (workflow-scoped when `workflowId` is given, else user-scoped) or replaces the value of the existing one with the same identity. No body in the response either way. Field checks: path `name` (400 `VALIDATION_FAILED`, then `SECRET_NAME_RESERVED`), then body members, then `orgId`.",
      tag: "Secrets",
      params: ["SecretName"],
      body: { schema: "SecretPutRequest" },
      success: { 201: noContent("Created (no body)."), 204: noContent("Replaced an existing secret (no body).") },
      errors: {
        400: ["VALIDATION_FAILED", "SECRET_NAME_RESERVED", "SECRET_SCOPE_UNSUPPORTED"],
        404: ["WORKFLOW_NOT_FOUND"],
        429: ["SECRETS_LIMIT_REACHED"],
        503: ["UPSTREAM_UNAVAILABLE"],
      },
      notes: {
        429: `\`SECRETS_LIMIT_REACHED\` when creating would exceed ${limits.maxSecretsPerOwner} secrets for the caller (all scopes).`,
        503: "The key service (KMS) is unreachable; nothing is written.",
      },
    },
    {
      method: "delete",
      path: "/secrets/{name}",
      operationId: "deleteSecret",
      summary: "Delete a secret",
      description:
        "Deletes the caller's secret of that name: the workflow-scoped one when `workflowId` is given, else the user-scoped one only. 204 whether or not anything was deleted.",
      tag: "Secrets",
      params: ["SecretName", "SecretWorkflowIdDelete", "OrgId"],
      success: { 204: noContent("Deleted, or nothing to delete (no body).") },
      errors: { 400: ["VALIDATION_FAILED", "SECRET_SCOPE_UNSUPPORTED"] },
    },

    // Wallets (API.md §11)
    {
      method: "get",
      path: "/wallets",
      operationId: "listWallets",
      summary: "List the caller's wallets",
      description:
        "The caller's wallets on the resolved chain, sorted by salt as a number ascending, then by `factoryAddress` (lowercase) ascending. Not paged.",
      tag: "Wallets",
      params: ["ChainId", "IncludeHidden"],
      success: { 200: json("WalletList", "The wallets.", true) },
      errors: { 400: ["VALIDATION_FAILED", "UNSUPPORTED_CHAIN"] },
    },
    {
      method: "post",
      path: "/wallets",
      operationId: "createWallet",
      summary: "Register a smart wallet (ensure registered)",
      description:
        "Registers the counterfactual smart account of (caller, chain, factory, salt). For the default factory the address is computed offline; for any other factory it is read from the factory's `getAddress(owner, salt)`. The account is deployed by its first user operation. Idempotent: an existing registration answers 200 with the wallet unchanged (even at the cap).",
      tag: "Wallets",
      body: { schema: "WalletCreateRequest" },
      success: {
        201: json("Wallet", "Newly registered.", true),
        200: json("Wallet", "Already registered for (caller, chain, factory, salt): the existing wallet, unchanged (a hidden wallet stays hidden).", true),
      },
      errors: {
        400: ["VALIDATION_FAILED", "UNSUPPORTED_CHAIN", "INVALID_FACTORY"],
        429: ["WALLETS_LIMIT_REACHED"],
        502: ["UPSTREAM_UNAVAILABLE"],
        503: ["UPSTREAM_UNAVAILABLE"],
      },
      notes: {
        429: `\`WALLETS_LIMIT_REACHED\` when registering would give the caller more than ${limits.maxWalletsPerOwner} wallets on that chain, hidden ones included. Nothing is written.`,
        502: "The chain RPC (needed for a non-default factory) answered with something invalid.",
        503: "The chain RPC (needed for a non-default factory) is unreachable or timed out.",
      },
    },
    {
      method: "patch",
      path: "/wallets/{address}",
      operationId: "updateWallet",
      summary: "Hide or show a wallet",
      description: "Updates the caller's wallet with that address on the resolved chain (keyed by address, never by salt).",
      tag: "Wallets",
      params: ["WalletAddress", "ChainId"],
      body: { schema: "WalletUpdateRequest" },
      success: { 200: json("Wallet", "The wallet after the update.", true) },
      errors: { 400: ["VALIDATION_FAILED", "UNSUPPORTED_CHAIN"], 404: ["WALLET_NOT_FOUND"] },
    },
    {
      method: "post",
      path: "/wallets/{address}:withdraw",
      operationId: "withdrawFromWallet",
      summary: "Withdraw funds from a wallet",
      description: `Builds one user operation (native: a value transfer to the recipient through the account; ERC-20: \`transfer(recipient, amount)\` on the token), with init code if the account is not deployed, sponsored by the chain's paymaster when one is configured, signs it and sends it to the chain's bundler, then waits up to ${limits.withdrawConfirmWaitMs} ms for the receipt. Every withdrawal that reached the send step is recorded and answered 200 whatever its status; a bundler rejection is never an HTTP error. Follow a \`pending\` one with \`GET /wallets/{address}/withdrawals/{id}\`.`,
      tag: "Wallets",
      params: ["WalletAddress", "IdempotencyKey"],
      body: { schema: "WithdrawRequest" },
      success: {
        200: json("WithdrawResult", "The withdrawal (`confirmed`, `pending` or `failed`).", true, { "Idempotency-Replayed": headerRef("IdempotencyReplayed") }),
      },
      errors: {
        400: [
          "WITHDRAW_MISSING_FIELDS",
          "WITHDRAW_BAD_RECIPIENT",
          "WITHDRAW_BAD_AMOUNT",
          "WITHDRAW_BAD_TOKEN",
          "VALIDATION_FAILED",
          "UNSUPPORTED_CHAIN",
          "WALLET_NOT_OWNED",
          "INSUFFICIENT_BALANCE",
        ],
        404: ["WALLET_NOT_FOUND"],
        409: ["IDEMPOTENCY_IN_PROGRESS"],
        422: ["IDEMPOTENCY_KEY_MISMATCH"],
        502: ["UPSTREAM_UNAVAILABLE"],
        503: ["UPSTREAM_UNAVAILABLE"],
      },
      notes: {
        400: "Checks apply in the order of the request body description; `UNSUPPORTED_CHAIN` also when the chain has no bundler.",
        502: "The RPC, bundler (gas estimation) or paymaster answered with something invalid before the operation was sent; nothing is recorded.",
        503: "The RPC, bundler or paymaster is unreachable before the operation was sent; nothing is recorded.",
      },
    },
    {
      method: "get",
      path: "/wallets/{address}/withdrawals",
      operationId: "listWithdrawals",
      summary: "List a wallet's withdrawals",
      description:
        "The caller's withdrawals from that wallet on the resolved chain, newest first. Reading a `pending` withdrawal asks the bundler for its receipt (at most once per 5 s per withdrawal) and stores the outcome; if the bundler cannot be reached the last stored state is returned.",
      tag: "Wallets",
      params: ["WalletAddress", "ChainId", "WithdrawalStatus", "Limit", "After", "Before"],
      success: { 200: json("WithdrawResultPage", "A page of withdrawals.", true) },
      errors: { 400: ["VALIDATION_FAILED", "UNSUPPORTED_CHAIN", "INVALID_CURSOR"], 404: ["WALLET_NOT_FOUND"] },
    },
    {
      method: "get",
      path: "/wallets/{address}/withdrawals/{id}",
      operationId: "getWithdrawal",
      summary: "Retrieve a withdrawal",
      description:
        "One withdrawal, refreshed from the bundler when `pending` (as in the list). A withdrawal still without a receipt 30 minutes after `submittedAt` becomes `failed`.",
      tag: "Wallets",
      params: ["WalletAddress", "WithdrawalId", "ChainId"],
      success: { 200: json("WithdrawResult", "The withdrawal.", true) },
      errors: { 400: ["VALIDATION_FAILED", "UNSUPPORTED_CHAIN"], 404: ["WALLET_NOT_FOUND", "WITHDRAWAL_NOT_FOUND"] },
    },
    {
      method: "get",
      path: "/wallets/{address}:getNonce",
      operationId: "getWalletNonce",
      summary: "A wallet's EntryPoint nonce",
      description: "The chain's EntryPoint `getNonce(address, 0)` for the wallet (`\"0\"` for an undeployed account).",
      tag: "Wallets",
      params: ["WalletAddress", "ChainId"],
      success: { 200: json("WalletNonce", "The nonce.", true) },
      errors: { 400: ["VALIDATION_FAILED", "UNSUPPORTED_CHAIN"], 404: ["WALLET_NOT_FOUND"], 502: ["UPSTREAM_UNAVAILABLE"], 503: ["UPSTREAM_UNAVAILABLE"] },
    },
  ];
}

function buildOperation(op: Operation, config: Config): Json {
  const errors = new Map<number, string[]>(Object.entries(op.errors ?? {}).map(([status, codes]) => [Number(status), [...codes]]));
  const add = (status: number, codes: string[], first = false) => {
    const current = errors.get(status) ?? [];
    errors.set(status, first ? [...codes, ...current] : [...current, ...codes]);
  };
  // API.md §1.6: X-Api-Version, authentication, rate limit, body transport come before the endpoint's checks.
  if (op.body) add(400, ["INVALID_JSON"], true);
  add(400, ["UNSUPPORTED_API_VERSION"], true);
  if (op.body) {
    add(413, ["PAYLOAD_TOO_LARGE"]);
    add(415, ["UNSUPPORTED_MEDIA_TYPE"]);
  }
  add(429, ["RATE_LIMITED"], true);

  const responses: Json = { ...op.success };
  const notes: Record<number, string | undefined> = {
    ...op.notes,
    413: `\`PAYLOAD_TOO_LARGE\`: the body is larger than ${config.limits.maxBodyBytes} bytes.`,
  };
  if (!op.public) responses["401"] = responseRef("Unauthorized");
  for (const status of [...errors.keys()].sort((a, b) => a - b)) {
    responses[String(status)] = problemResponse(status, errors.get(status)!, config.limits, notes[status]);
  }
  responses["500"] = responseRef("InternalError");

  const result: Json = {
    operationId: op.operationId,
    summary: op.summary,
    description: op.description,
    tags: [op.tag],
    parameters: [...(op.params ?? []).map(paramRef), paramRef("XApiVersion"), paramRef("XRequestId")],
    responses,
  };
  if (op.body) {
    result.requestBody = {
      required: false,
      description:
        "`Content-Type: application/json` (parameters such as `charset=utf-8` allowed) when the body is non-empty; an empty body is read as `{}` and then validated. Unknown members are rejected; an optional member sent as `null` is treated as absent.",
      content: { "application/json": { schema: schemaRef(op.body.schema) } },
    };
  }
  // Public operations say so explicitly (`[]`); there is no document-level default.
  result.security = op.public ? [] : [{ bearerAuth: [] }];
  return result;
}

const DESCRIPTION = (config: Config) => `The HTTP API of the workflow automation service, interface version ${API_VERSION} (API.md).

**Served by this deployment:** health, authentication (token exchange and JWKS), this document and its HTML reference, secrets and wallets. The workflow and execution endpoint groups of the contract (\`/workflows…\`, \`/executions…\`, with fees) are not served yet: they arrive in later versions of this deployment and will be described here when they do.

**Routing.** Paths are relative to the root of the base URL, with no version segment. A colon followed by a verb is a literal part of the path (\`/wallets/{address}:withdraw\`); paths are matched after percent-decoding, so \`%3A\` equals \`:\`. A trailing slash is not stripped. A path that matches no route answers 404 \`NOT_FOUND\`; a path that matches a route with another method answers 405 \`METHOD_NOT_ALLOWED\` with an \`Allow\` header; both are decided before authentication. \`HEAD\` on a \`GET\` route answers like \`GET\` without a body; \`OPTIONS\` is a CORS preflight answered 204 without authentication.

**Order of checks.** Route match (404/405) → \`X-Api-Version\` (400 \`UNSUPPORTED_API_VERSION\`) → authentication on non-public routes (401 \`AUTH_*\`) → rate limit (429 \`RATE_LIMITED\`) → body transport (413, 415, 400 \`INVALID_JSON\`) → field validation (400, all field errors reported together in \`errors\`) → record lookups (404) → state (409) → quotas (429 with \`limit\`) → upstream calls (400 \`INSUFFICIENT_BALANCE\`, 502/503 \`UPSTREAM_UNAVAILABLE\`). A request that fails any check changes nothing.

**Bodies.** Success bodies are \`application/json; charset=utf-8\`; errors are \`application/problem+json\` (see \`Problem\`); 204 responses carry no body. Request bodies larger than ${config.limits.maxBodyBytes} bytes answer 413. Unknown body members are rejected; an optional member sent as \`null\` is treated as absent. Unknown query parameters are ignored; known ones with a bad value answer 400 \`VALIDATION_FAILED\`. Boolean query parameters accept exactly \`true\`/\`false\`; integer ones decimal digits only. Big values (wei, salts, nonces) are decimal strings; times are unix milliseconds.

**Errors.** Every 4xx/5xx body is RFC 7807 with a stable \`code\`; clients branch on \`code\`. Access to another owner's record answers exactly as if it did not exist.

**Paging.** Paged lists answer \`{data, pageInfo}\` and take \`limit\` (1–200, default 20), \`after\` and \`before\` (opaque cursors bound to the endpoint and caller; never both).

**Rate limiting.** A token bucket per token subject (per client IP on public routes): capacity ${config.limits.rateLimitBurst}, refilled at ${config.limits.rateLimitRps} tokens per second; \`X-RateLimit-*\` headers on every response that reached the limiter.

**Versioning.** Every response carries \`X-Api-Version: ${API_VERSION}\`; a request may send it, and any other value is rejected. Within version ${API_VERSION} only additive changes are made (new endpoints, optional request fields, response fields, error codes); clients must ignore response fields they do not know. Deprecations are announced here and with \`Deprecation\`/\`Sunset\` headers at least 6 months ahead.`;

function buildDocument(config: Config): Json {
  const paths: Record<string, Json> = {};
  for (const op of operations(config)) {
    (paths[op.path] ??= {})[op.method] = buildOperation(op, config);
  }
  return {
    openapi: "3.1.1",
    jsonSchemaDialect: "https://spec.openapis.org/oas/3.1/dialect/base",
    info: {
      title: "Workflow Automation Service API",
      version: config.serviceVersion,
      "x-api-version": API_VERSION,
      description: DESCRIPTION(config),
    },
    "x-api-version": API_VERSION,
    servers: [{ url: "/", description: "This deployment" }],
    tags: [
      { name: "Service", description: "Health and API documentation (public)." },
      { name: "Authentication", description: "Sign-in and token verification keys (public)." },
      { name: "Secrets", description: "Per-owner secret values, user- or workflow-scoped; values are write-only." },
      { name: "Wallets", description: "Smart wallets registered by the caller, their withdrawals and nonces." },
    ],
    paths,
    components: components(config),
  };
}

// ---------------------------------------------------------------------------------------------------------
// /docs

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[ch]!);

function buildDocsPage(doc: Json): string {
  const info = doc.info as Json;
  const rows: string[] = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Json>>)) {
    for (const [method, op] of Object.entries(item)) {
      const auth = (op.security as unknown[]).length > 0 ? "bearer token" : "public";
      rows.push(
        `<li><code>${method.toUpperCase()} ${escapeHtml(path)}</code> — ${escapeHtml(String(op.summary))} <small>(${auth}; <code>${escapeHtml(String(op.operationId))}</code>)</small></li>`,
      );
    }
  }
  const title = `${escapeHtml(String(info.title))} ${escapeHtml(String(info.version))}`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<style>body{font-family:system-ui,sans-serif;margin:2rem;line-height:1.5}code{font-size:.95em}li{margin:.25rem 0}</style>
</head>
<body>
<div id="app"></div>
<main id="fallback">
<h1>${title}</h1>
<p>Interface version ${API_VERSION}. The machine-readable description is <a href="./openapi.json">/openapi.json</a> (OpenAPI 3.1); an interactive reference loads here when JavaScript and the CDN are available.</p>
<h2>Operations</h2>
<ul>
${rows.join("\n")}
</ul>
</main>
<script src="https://cdn.jsdelivr.net/npm/@scalar/api-reference@1"></script>
<script>
(function () {
  if (!window.Scalar || typeof window.Scalar.createApiReference !== "function") return;
  document.getElementById("fallback").hidden = true;
  window.Scalar.createApiReference("#app", { url: new URL("openapi.json", window.location.href).href });
})();
</script>
</body>
</html>
`;
}

// ---------------------------------------------------------------------------------------------------------
// Cache and routes

interface Built {
  document: Json;
  json: string;
  html: string;
}

const cache = new WeakMap<Config, Built>();

function built(config: Config): Built {
  let entry = cache.get(config);
  if (!entry) {
    const document = buildDocument(config);
    entry = { document, json: JSON.stringify(document), html: buildDocsPage(document) };
    cache.set(config, entry);
  }
  return entry;
}

/** The OpenAPI document for a configuration (the running one by default); built once per configuration. */
export const openapiDocument = (config: Config = useRuntime().config): Json => built(config).document;

export const openapiRoutes: Route[] = [
  {
    method: "GET",
    path: "/openapi.json",
    public: true,
    handler: (c) => c.body(built(useRuntime().config).json, 200, { "Content-Type": "application/json; charset=utf-8" }),
  },
  {
    method: "GET",
    path: "/docs",
    public: true,
    handler: (c) => c.html(built(useRuntime().config).html, 200),
  },
];
