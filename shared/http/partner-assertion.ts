/**
 * Partner assertions (API.md §21.1): a partner application (a wallet, a dashboard) shows a user's wallets or token
 * data without holding that user's token, by sending `X-Partner-Assertion`: a compact JWS (EdDSA, Ed25519) signed
 * with one of its keys registered in `PARTNERS`. This module checks one and answers who vouched for what, or the
 * refusal of §21.1. Where an assertion counts as a credential is the routes' declaration (Endpoint.partner); the
 * app factory (app.ts) calls this check only there, and only when no bearer token was sent. The hosts that mount
 * such routes hand it to createApp (options.partners), so jose reaches only their bundles.
 */
import { errors, decodeJwt, decodeProtectedHeader, jwtVerify, type JWTPayload } from "jose";
import { ApiError } from "../errors";
import { checksumAddress, isAcceptedAddress, ZERO_ADDRESS, type Address } from "../address";
import { useConfig, useRuntime } from "../current-runtime";
import type { Partner } from "../config";

/** The longest an assertion may live: its `exp` at most this far after the server's clock. */
const MAX_TTL_S = 3600;

/** A verified assertion: the partner that signed it and the end user it names, if any. */
export interface PartnerCredential {
  partnerId: string;
  /** `sub` when it is a non-zero address (EIP-55); anything else is no subject. */
  subject?: Address;
}

const refuse = (status: 401 | 403, code: string, detail: string) => new ApiError(status, code, detail);
const malformed = () =>
  refuse(401, "PARTNER_ASSERTION_MALFORMED", "X-Partner-Assertion must be a compact JWS whose payload names its partner in `iss`.");

/** Checks an assertion for `scope` and answers its partner and subject, or throws the refusal of API.md §21.1. */
export async function verifyPartnerAssertion(assertion: string, scope: string): Promise<PartnerCredential> {
  const issuer = issuerOf(assertion.trim());
  const partner = useConfig().partners.find((p) => p.id === issuer);
  if (!partner) throw refuse(401, "PARTNER_UNKNOWN", "The assertion's issuer is not a registered partner.");
  const payload = await verifiedPayload(assertion.trim(), partner);
  const nowS = useRuntime().now() / 1000;
  if ((payload.exp as number) > nowS + MAX_TTL_S) {
    throw refuse(401, "PARTNER_ASSERTION_TTL", `The assertion's exp is more than ${MAX_TTL_S} s ahead of the server's clock.`);
  }
  if (partner.status !== "active") throw refuse(403, "PARTNER_SUSPENDED", "This partner is suspended.");
  if (!partner.scopes.includes(scope)) throw refuse(403, "PARTNER_SCOPE_DENIED", `This partner is not granted the scope '${scope}'.`);
  if (!scopesOf(payload).includes(scope)) throw refuse(403, "PARTNER_TOKEN_SCOPE", `The assertion does not carry the scope '${scope}'.`);
  return { partnerId: partner.id, subject: subjectOf(payload.sub) };
}

/** The `iss` of a well-formed assertion (an unverified read: it only picks the keys to verify with). */
function issuerOf(assertion: string): string {
  try {
    decodeProtectedHeader(assertion);
    const { iss } = decodeJwt(assertion);
    if (typeof iss === "string" && iss !== "") return iss;
  } catch {
    // not a compact JWS with JSON header and payload
  }
  throw malformed();
}

/**
 * The payload once one of the partner's keys (several during a rotation) verifies the signature and jose's claim
 * checks pass at the server's clock: EdDSA only, `exp` required (no leeway), `aud` including the configured
 * audience when there is one.
 */
async function verifiedPayload(assertion: string, partner: Partner): Promise<JWTPayload> {
  const audience = useConfig().partnerAssertionAudience;
  let failure: unknown;
  for (const key of partner.publicKeys) {
    try {
      const { payload } = await jwtVerify(assertion, key, {
        algorithms: ["EdDSA"],
        requiredClaims: ["exp"],
        currentDate: new Date(useRuntime().now()),
        ...(audience === undefined ? {} : { audience }),
      });
      return payload;
    } catch (err) {
      failure = err;
      if (!(err instanceof errors.JWSSignatureVerificationFailed)) break;
    }
  }
  throw refusal(failure);
}

/** jose's failure as the refusal of API.md §21.1. */
function refusal(err: unknown): ApiError {
  if (err instanceof errors.JWTExpired) return refuse(401, "PARTNER_ASSERTION_TTL", "The assertion has expired.");
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === "exp") return refuse(401, "PARTNER_ASSERTION_NO_EXP", "The assertion must carry a numeric exp.");
    if (err.claim === "aud")
      return refuse(401, "PARTNER_ASSERTION_AUDIENCE", "The assertion's aud does not include this service's audience.");
    if (err.claim === "nbf") return refuse(401, "PARTNER_ASSERTION_TTL", "The assertion is not valid yet (nbf).");
    return malformed();
  }
  if (err instanceof errors.JWSInvalid || err instanceof errors.JWTInvalid) return malformed();
  // A bad signature, an algorithm other than EdDSA, an unsupported `crit` header: not signed as a partner signs.
  return refuse(401, "PARTNER_ASSERTION_INVALID", "The assertion's signature does not verify with the partner's keys.");
}

/** `scope`: a space-separated string or an array of strings. */
function scopesOf(payload: JWTPayload): string[] {
  const scope = payload.scope;
  if (typeof scope === "string") return scope.split(" ").filter(Boolean);
  return Array.isArray(scope) ? scope.filter((s): s is string => typeof s === "string") : [];
}

function subjectOf(sub: string | undefined): Address | undefined {
  if (sub === undefined || !isAcceptedAddress(sub)) return undefined;
  const address = checksumAddress(sub);
  return address === ZERO_ADDRESS ? undefined : address;
}
