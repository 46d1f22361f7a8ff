/**
 * Access tokens (API.md §7.2, §7.3): ES256 JWTs signed with the service key, verified on every
 * non-public request. The key is a PKCS#8 PEM from configuration (generated into DATA_DIR locally,
 * an SST secret in AWS); its RFC 7638 thumbprint is the `kid`.
 */
import { SignJWT, decodeProtectedHeader, importPKCS8, jwtVerify, type JWK, type KeyObject } from "jose";
import { createHash, createPublicKey } from "node:crypto";
import { checksumAddress, isAddressShape } from "../address";
import { ulid } from "ulid";
import { ApiError } from "../errors";
import { useConfig, useRuntime } from "../runtime";
import type { Caller } from "../context";

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
  const { publicJwk, publicKey } = verificationKey();
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
  // `sub` is what issueToken wrote (EIP-55) under a signature just verified: no checksum work per request.
  return { owner: payload.sub as `0x${string}`, audienceChainId: Number(aud) };
}
