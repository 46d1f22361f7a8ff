/**
 * The public authentication routes (API.md §7.1, §6.2) as declarations. The sign-in body is checked by
 * verifyExchange (message.ts) in the order of §7.1, each failure with its own code; its schema documents it.
 */
import * as v from "valibot";
import { component, configured, described, endpoint, group } from "../http/endpoint";
import { Address } from "../http/address-schemas";
import { ZERO_ADDRESS } from "../address";

const EXAMPLE_MESSAGE = [
  "Please sign the below text for ownership verification.",
  "",
  "URI: https://app.example.com",
  "Chain ID: 11155111",
  "Version: 1.4.0",
  "Issued At: 2026-11-22T10:00:00.000Z",
  "Expire At: 2026-11-23T10:00:00.000Z",
  "Wallet: 0x5B38Da6a701c568545dCfcB03FcB875f56beddC4",
].join("\n");

const ExchangeRequest = component(
  "AuthExchangeRequest",
  v.pipe(
    v.strictObject({
      ownerAddress: v.pipe(
        described(Address, "The externally owned account that signed; not the zero address."),
        v.metadata({ not: { const: ZERO_ADDRESS } }), // documents AUTH_ZERO_ADDRESS (the domain checks, in its order)
      ),
      signature: v.pipe(
        v.string(),
        v.regex(/^0x[0-9a-fA-F]{130}$/),
        v.description("65-byte `personal_sign` (EIP-191) signature over `message`; `v` may be 0, 1, 27 or 28."),
      ),
      message: v.pipe(
        v.string(),
        v.minLength(1),
        v.description("The exact text that was signed; the signature is checked over these bytes exactly as sent."),
      ),
    }),
    configured((config) => ({
      description:
        "Exactly these three non-empty string members. The message is exactly eight lines separated by `\\n` (a `\\r` before each `\\n` is tolerated; one trailing `\\n` is allowed):\n\n```\n" +
        EXAMPLE_MESSAGE +
        "\n```\n\n" +
        `URI: an absolute http(s) URL${config.authAllowedUris.length ? " listed by the deployment" : ""}. Chain ID: a configured chain, positive decimal without leading zeros. Version: 1–64 printable characters. Issued At / Expire At: \`YYYY-MM-DDTHH:mm:ss.SSSZ\` (UTC); Issued At before Expire At and at most 60 s after now; Expire At in the future and at most ${config.limits.maxTokenLifetimeS} s after now. Wallet: the EIP-55 form of \`ownerAddress\`. Checks run in the order of API.md §7.1; the first failure answers.`,
    })),
  ),
);

const ExchangeResponse = component(
  "AuthExchangeResponse",
  v.object({
    token: v.pipe(
      v.string(),
      v.description(
        'Compact JWS: an ES256 JWT with header `{alg: "ES256", typ: "JWT", kid}` and claims `iss`, `sub` (EIP-55 address), `aud` (`["<chainId>"]`), `iat`, `exp` (Expire At in seconds), `jti` (ULID). Send it as `Authorization: Bearer <token>`.',
      ),
    ),
    expiresAt: v.pipe(
      v.string(),
      v.regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
      v.metadata({ format: "date-time" }),
      v.description("RFC 3339 UTC with milliseconds: the message's Expire At."),
    ),
    subject: described(Address, "EIP-55 form of `ownerAddress`; the token's `sub`."),
  }),
);

const Jwk = component(
  "Jwk",
  v.object({
    kty: v.literal("EC"),
    crv: v.literal("P-256"),
    x: v.pipe(v.string(), v.description("base64url x coordinate.")),
    y: v.pipe(v.string(), v.description("base64url y coordinate.")),
    kid: v.pipe(v.string(), v.description("RFC 7638 thumbprint; the `kid` of tokens signed with this key.")),
    use: v.literal("sig"),
    alg: v.literal("ES256"),
  }),
);

const Jwks = component(
  "Jwks",
  v.pipe(
    v.object({ keys: v.array(Jwk) }),
    v.description(
      "The current signing key and any retired keys whose tokens may still be valid. A token whose `kid` is not listed is rejected.",
    ),
  ),
);

export const exchange = endpoint({
  method: "POST",
  path: "/auth:exchange",
  operationId: "exchangeAuthToken",
  summary: "Exchange a signed sign-in message for a token",
  description:
    "Obtains a bearer token by proving control of an externally owned account: sign the 8-line message with `personal_sign` (EIP-191) and send it with the signature. The token lives until the signed Expire At (at most `max_token_lifetime_s`); there is no refresh (sign a new message) and no revocation other than key rotation.",
  public: true,
  body: ExchangeRequest,
  checkedByDomain: ["body"],
  responses: { 200: { description: "The token.", body: ExchangeResponse } },
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
});

export const jwks = endpoint({
  method: "GET",
  path: "/.well-known/jwks.json",
  operationId: "getJwks",
  summary: "Token verification keys",
  description:
    "The public keys that verify tokens (ES256, P-256): the current signing key and any retired keys whose tokens may still be valid.",
  public: true,
  responses: {
    200: {
      description: "The key set.",
      body: Jwks,
      headers: { "Cache-Control": v.pipe(v.literal("public, max-age=300"), v.description("`public, max-age=300`.")) },
    },
  },
});

export const authContract = group({
  name: "Authentication",
  description: "Sign-in and token verification keys (public).",
  codes: {
    AUTH_BAD_REQUEST: { meaning: "Wrong member types or unknown members.", fields: true },
    AUTH_MISSING_FIELDS: { meaning: "`ownerAddress`, `signature` or `message` missing or empty.", fields: true },
    AUTH_INVALID_ADDRESS: { meaning: "`ownerAddress` is not an address.", fields: true },
    AUTH_ZERO_ADDRESS: { meaning: "`ownerAddress` is the zero address.", fields: true },
    AUTH_BAD_MESSAGE: {
      meaning: "Message not in the 8-line format, bad URI/Version/Chain ID/times, or the Wallet line differs from `ownerAddress`.",
      fields: true,
    },
    AUTH_EXPIRED_MESSAGE: { meaning: "Expire At is not in the future." },
    AUTH_EXPIRY_TOO_LONG: { meaning: "Expire At is more than the maximum token lifetime ahead." },
    AUTH_INVALID_SIGNATURE: { meaning: "Signature malformed or not made by `ownerAddress`.", fields: true },
  },
  endpoints: [exchange, jwks],
});
