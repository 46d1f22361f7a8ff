/**
 * Access tokens (API.md §7.2, §7.3): ES256 JWTs signed with the service key, verified on every non-public request.
 * The key's public half verifies (`JWT_PUBLIC_KEY`, or derived from the local private key); its RFC 7638 thumbprint
 * is the `kid`. Signing goes through a port: locally the PKCS#8 PEM generated into DATA_DIR (`JWT_SIGNING_KEY`);
 * on AWS the sign-in function installs a KMS key's signer (shared/envelope/kms-token-signer.ts), so the private
 * key never leaves KMS.
 */
import type { JWK } from "jose";
import { createHash, createPrivateKey, createPublicKey, sign, verify as verifySignature, type KeyObject } from "node:crypto";
import { checksumAddress, isAddressShape } from "../address";
import { ulid } from "ulid";
import { ApiError } from "../errors";
import type { Caller } from "../context";
import { useConfig, useRuntime } from "../current-runtime";

/** Signs a JWS signing input (`header.payload`) with ES256: the signature as JOSE has it, r ‖ s (64 bytes). */
export interface TokenSigner {
  sign(signingInput: Uint8Array): Promise<Uint8Array>;
}

interface VerificationKey {
  pem: string;
  publicKey: KeyObject;
  publicJwk: JWK & { kid: string };
}

let verifying: VerificationKey | undefined;
let installed: TokenSigner | undefined;
let local: { pem: string; signer: TokenSigner } | undefined;

/** Installs the host's token signer (the AWS sign-in function: KMS); without one, the configured local key signs. */
export function setTokenSigner(signer: TokenSigner | undefined): void {
  installed = signer;
}

/**
 * The public half of the signing key and its `kid`, with node:crypto only: verifying a token (every request of
 * every function) needs no JWK code from jose, which keeps it out of the groups that only verify.
 */
function verificationKey(): VerificationKey {
  const config = useConfig();
  // createPublicKey takes the public key (SPKI) or the private key (PKCS#8) alike.
  const pem = config.jwtPublicKey ?? config.jwtSigningKey;
  if (!pem) throw new Error("Neither JWT_PUBLIC_KEY nor JWT_SIGNING_KEY is configured");
  if (verifying?.pem === pem) return verifying;
  const publicKey = createPublicKey(pem);
  const { kty, crv, x, y } = publicKey.export({ format: "jwk" }) as { kty: string; crv: string; x: string; y: string };
  // RFC 7638: SHA-256 of the required members in lexicographic order, base64url.
  const kid = createHash("sha256").update(JSON.stringify({ crv, kty, x, y })).digest("base64url");
  verifying = { pem, publicKey, publicJwk: { kty, crv, x, y, kid, use: "sig", alg: "ES256" } };
  return verifying;
}

/** The installed signer, or one over the local private key (`npm start`, the tests). */
function tokenSigner(): TokenSigner {
  if (installed) return installed;
  const pem = useConfig().jwtSigningKey;
  if (!pem) throw new Error("No token signer is installed and JWT_SIGNING_KEY is not configured");
  if (local?.pem !== pem) {
    const privateKey = createPrivateKey(pem);
    local = { pem, signer: { sign: async (input) => sign("sha256", input, { key: privateKey, dsaEncoding: "ieee-p1363" }) } };
  }
  return local.signer;
}

/** The JWKS document: the current signing key (rotation would add retired keys here). */
export async function jwks(): Promise<{ keys: JWK[] }> {
  const { publicJwk } = verificationKey();
  return {
    keys: [{ kty: publicJwk.kty, crv: publicJwk.crv, x: publicJwk.x, y: publicJwk.y, kid: publicJwk.kid, use: "sig", alg: "ES256" }],
  };
}

const base64url = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");

/** Issues a token for `owner` on `chainId`, valid until `expiresAtMs`: a compact JWS, as verifiedClaims reads it. */
export async function issueToken(owner: `0x${string}`, chainId: number, expiresAtMs: number): Promise<string> {
  const { kid } = verificationKey().publicJwk;
  const now = Math.floor(useRuntime().now() / 1000);
  const header = base64url({ alg: "ES256", typ: "JWT", kid });
  const payload = base64url({
    iss: useConfig().jwtIssuer,
    sub: checksumAddress(owner),
    aud: [String(chainId)],
    iat: now,
    exp: Math.floor(expiresAtMs / 1000),
    jti: ulid(),
  });
  const signature = await tokenSigner().sign(Buffer.from(`${header}.${payload}`));
  if (signature.length !== 64) throw new Error("The token signer answered a signature that is not r ‖ s (64 bytes)");
  return `${header}.${payload}.${Buffer.from(signature).toString("base64url")}`;
}

// The signature segment may be empty: an unsecured (`alg: none`) JWT is well-formed and answers
// AUTH_INVALID_TOKEN (API.md §7.3), not AUTH_MALFORMED.
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** Checks an Authorization header and returns the caller, or throws the 401 of API.md §7.3. */
export async function authenticate(header: string | undefined): Promise<Caller> {
  if (header === undefined) throw new ApiError(401, "AUTH_REQUIRED", "An Authorization: Bearer token is required.");
  const match = /^(\S+)(?:\s+(.*))?$/.exec(header.trim());
  const token = match?.[2]?.trim();
  if (!match || match[1]!.toLowerCase() !== "bearer" || !token || !COMPACT_JWS.test(token)) {
    throw new ApiError(401, "AUTH_MALFORMED", "The Authorization header must be 'Bearer <token>'.");
  }
  const payload = verifiedClaims(token);
  if (!payload) throw new ApiError(401, "AUTH_INVALID_TOKEN", "The token is invalid or expired.");
  return { owner: payload.sub as `0x${string}`, audienceChainId: Number(payload.aud) };
}

/**
 * The claims of a compact JWS the service signed and that is valid now, or undefined. Only tokens as
 * issueToken writes them pass: header `alg` ES256 with the current `kid` and no `crit`, a 64-byte
 * r ‖ s signature by the service key, and every claim of API.md §7.3 checked. Verified with node:crypto
 * (one synchronous ECDSA check) rather than jose's jwtVerify: the token format is fixed, so the general
 * JOSE machinery (key import, algorithm negotiation, JWK handling) would be dead weight in every function.
 */
function verifiedClaims(token: string): { sub: string; aud: string } | undefined {
  const { publicJwk, publicKey } = verificationKey();
  const [encodedHeader, encodedPayload, encodedSignature] = token.split(".") as [string, string, string];
  const header = jsonObject(encodedHeader);
  if (header?.alg !== "ES256" || header.kid !== publicJwk.kid || "crit" in header || "b64" in header) return undefined;
  const signature = Buffer.from(encodedSignature, "base64url");
  if (signature.length !== 64) return undefined;
  const signed = Buffer.from(`${encodedHeader}.${encodedPayload}`);
  if (!verifySignature("sha256", signed, { key: publicKey, dsaEncoding: "ieee-p1363" }, signature)) return undefined;
  const payload = jsonObject(encodedPayload);
  if (!payload || payload.iss !== useConfig().jwtIssuer) return undefined;
  // `exp` must be strictly after now (no leeway); `iat` at most 60 s ahead.
  const nowSeconds = useRuntime().now() / 1000;
  if (typeof payload.exp !== "number" || payload.exp <= nowSeconds) return undefined;
  if (typeof payload.iat !== "number" || payload.iat > nowSeconds + 60) return undefined;
  if (typeof payload.sub !== "string" || !isAddressShape(payload.sub)) return undefined;
  const aud = Array.isArray(payload.aud) ? payload.aud[0] : payload.aud;
  if (typeof aud !== "string" || !/^[1-9][0-9]{0,15}$/.test(aud)) return undefined;
  if (typeof payload.nbf === "number" ? payload.nbf > nowSeconds : payload.nbf !== undefined) return undefined;
  // `sub` is what issueToken wrote (EIP-55) under a signature just verified: no checksum work per request.
  return { sub: payload.sub, aud };
}

/** A base64url segment holding a JSON object, parsed; undefined for anything else. */
function jsonObject(segment: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(segment, "base64url").toString("utf8"));
    return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
