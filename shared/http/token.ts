/**
 * Access tokens (API.md §7.2, §7.3): ES256 JWTs signed with the service key, verified on every
 * non-public request. The key is a PKCS#8 PEM from configuration (generated into DATA_DIR locally,
 * an SST secret in AWS); its RFC 7638 thumbprint is the `kid`.
 */
import { SignJWT, importPKCS8, type JWK } from "jose";
import { createHash, createPublicKey, verify as verifySignature, type KeyObject } from "node:crypto";
import { checksumAddress, isAddressShape } from "../address";
import { ulid } from "ulid";
import { ApiError } from "../errors";
import type { Caller } from "../context";
import { useConfig, useRuntime } from "../current-runtime";

interface VerificationKey {
  pem: string;
  publicKey: KeyObject;
  publicJwk: JWK & { kid: string };
}

let verifying: VerificationKey | undefined;
let signing: { pem: string; privateKey: Awaited<ReturnType<typeof importPKCS8>> } | undefined;

/**
 * The public half of the signing key and its `kid`, with node:crypto only: verifying a token (every request of
 * every function) needs no PKCS#8 or JWK code from jose, which keeps it out of the groups that only verify.
 */
function verificationKey(): VerificationKey {
  const pem = useConfig().jwtSigningKey;
  if (!pem) throw new Error("JWT_SIGNING_KEY is not configured");
  if (verifying?.pem === pem) return verifying;
  const publicKey = createPublicKey(pem);
  const { kty, crv, x, y } = publicKey.export({ format: "jwk" }) as { kty: string; crv: string; x: string; y: string };
  // RFC 7638: SHA-256 of the required members in lexicographic order, base64url.
  const kid = createHash("sha256").update(JSON.stringify({ crv, kty, x, y })).digest("base64url");
  verifying = { pem, publicKey, publicJwk: { kty, crv, x, y, kid, use: "sig", alg: "ES256" } };
  return verifying;
}

async function signingKey() {
  const { pem, publicJwk } = verificationKey();
  if (signing?.pem !== pem) signing = { pem, privateKey: await importPKCS8(pem, "ES256") };
  return { privateKey: signing.privateKey, publicJwk };
}

/** The JWKS document: the current signing key (rotation would add retired keys here). */
export async function jwks(): Promise<{ keys: JWK[] }> {
  const { publicJwk } = verificationKey();
  return {
    keys: [{ kty: publicJwk.kty, crv: publicJwk.crv, x: publicJwk.x, y: publicJwk.y, kid: publicJwk.kid, use: "sig", alg: "ES256" }],
  };
}

/** Issues a token for `owner` on `chainId`, valid until `expiresAtMs`. */
export async function issueToken(owner: `0x${string}`, chainId: number, expiresAtMs: number): Promise<string> {
  const { privateKey, publicJwk } = await signingKey();
  const now = Math.floor(useRuntime().now() / 1000);
  return new SignJWT({})
    .setProtectedHeader({ alg: "ES256", typ: "JWT", kid: publicJwk.kid })
    .setIssuer(useConfig().jwtIssuer)
    .setSubject(checksumAddress(owner))
    .setAudience([String(chainId)])
    .setIssuedAt(now)
    .setExpirationTime(Math.floor(expiresAtMs / 1000))
    .setJti(ulid())
    .sign(privateKey);
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
