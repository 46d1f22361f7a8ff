/**
 * Access tokens (API.md §7.2, §7.3): ES256 JWTs signed with the service key, verified on every
 * non-public request. The key is a PKCS#8 PEM from configuration (generated into DATA_DIR locally,
 * an SST secret in AWS); its RFC 7638 thumbprint is the `kid`.
 */
import {
  SignJWT,
  calculateJwkThumbprint,
  decodeProtectedHeader,
  exportJWK,
  importPKCS8,
  jwtVerify,
  type JWK,
  type KeyObject,
} from "jose";
import { createPublicKey } from "node:crypto";
import { checksumAddress, isAddressShape } from "../address";
import { ulid } from "ulid";
import { ApiError } from "../errors";
import { useConfig, useRuntime } from "../runtime";
import type { Caller } from "../context";

interface SigningKey {
  pem: string;
  privateKey: Awaited<ReturnType<typeof importPKCS8>>;
  publicKey: KeyObject;
  publicJwk: JWK & { kid: string };
}

let cached: SigningKey | undefined;

async function signingKey(): Promise<SigningKey> {
  const pem = useConfig().jwtSigningKey;
  if (!pem) throw new Error("JWT_SIGNING_KEY is not configured");
  if (cached?.pem === pem) return cached;
  const privateKey = await importPKCS8(pem, "ES256");
  const publicKey = createPublicKey(pem);
  const publicJwk = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(publicJwk, "sha256");
  cached = { pem, privateKey, publicKey, publicJwk: { ...publicJwk, kid, use: "sig", alg: "ES256" } };
  return cached;
}

/** The JWKS document: the current signing key (rotation would add retired keys here). */
export async function jwks(): Promise<{ keys: JWK[] }> {
  const { publicJwk } = await signingKey();
  return { keys: [{ kty: publicJwk.kty, crv: publicJwk.crv, x: publicJwk.x, y: publicJwk.y, kid: publicJwk.kid, use: "sig", alg: "ES256" }] };
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
  const invalid = () => new ApiError(401, "AUTH_INVALID_TOKEN", "The token is invalid or expired.");
  const { publicJwk, publicKey } = await signingKey();
  let protectedHeader;
  try {
    protectedHeader = decodeProtectedHeader(token);
  } catch {
    throw invalid();
  }
  if (protectedHeader.alg !== "ES256" || protectedHeader.kid !== publicJwk.kid) throw invalid();
  const now = useRuntime().now();
  let payload;
  try {
    ({ payload } = await jwtVerify(token, publicKey, {
      algorithms: ["ES256"],
      issuer: useConfig().jwtIssuer,
      currentDate: new Date(now),
      clockTolerance: 0,
      requiredClaims: ["exp", "iat", "sub", "aud"],
    }));
  } catch {
    throw invalid();
  }
  // `exp` must be strictly after now (no leeway); `iat` at most 60 s ahead.
  const nowSeconds = now / 1000;
  if (typeof payload.exp !== "number" || payload.exp <= nowSeconds) throw invalid();
  if (typeof payload.iat !== "number" || payload.iat > nowSeconds + 60) throw invalid();
  if (typeof payload.sub !== "string" || !isAddressShape(payload.sub)) throw invalid();
  const aud = Array.isArray(payload.aud) ? payload.aud[0] : payload.aud;
  if (typeof aud !== "string" || !/^[1-9][0-9]{0,15}$/.test(aud)) throw invalid();
  return { owner: checksumAddress(payload.sub), audienceChainId: Number(aud) };
}
