/**
 * The sign-in proof of `POST /auth:exchange` (API.md §7.1): a body `{ownerAddress, signature, message}` where
 * `message` is the 8-line EIP-191 text below, signed with `personal_sign` by `ownerAddress`.
 *
 *   Please sign the below text for ownership verification.
 *   <empty>
 *   URI: https://app.example.com
 *   Chain ID: 11155111
 *   Version: 1.4.0
 *   Issued At: 2026-11-22T10:00:00.000Z
 *   Expire At: 2026-11-23T10:00:00.000Z
 *   Wallet: 0x5B38Da6a701c568545dCfcB03FcB875f56beddC4
 *
 * `verifyExchange` runs every check of the §7.1 table in its order and throws the first failure's code.
 * Times are judged against the runtime clock, so tests can move "now".
 */
import { ZERO_ADDRESS, checksumAddress, isAcceptedAddress, recoverPersonalSigner } from "../address";
import { ApiError, type FieldError } from "../errors";
import { useConfig, useRuntime } from "../current-runtime";

const AUTH_SENTENCE = "Please sign the below text for ownership verification.";
/** Prefixes of lines 3-8, in order. */
const AUTH_LINE_PREFIXES = ["URI: ", "Chain ID: ", "Version: ", "Issued At: ", "Expire At: ", "Wallet: "] as const;

const FIELDS = ["ownerAddress", "signature", "message"] as const;
const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const CHAIN_ID = /^[1-9][0-9]*$/;
const VERSION = /^[\x20-\x7E]{1,64}$/;
const SIGNATURE = /^0x[0-9a-fA-F]{130}$/;
/** `iat` may be this far ahead of the server clock (client clock skew). */
const ISSUED_AT_SKEW_MS = 60_000;

/** The parsed lines 3-8 of a well-formed message. */
interface AuthMessage {
  uri: string;
  chainId: number;
  version: string;
  issuedAtMs: number;
  expireAtMs: number;
  /** The Expire At text as signed (RFC 3339 UTC with milliseconds). */
  expireAt: string;
  wallet: string;
}

export interface VerifiedExchange {
  /** EIP-55 form of `ownerAddress`. */
  owner: `0x${string}`;
  chainId: number;
  expiresAtMs: number;
  /** The message's Expire At, as signed. */
  expiresAt: string;
}

const fail = (code: string, detail: string, path?: string) => {
  const errors: FieldError[] | undefined = path ? [{ path, message: detail }] : undefined;
  return new ApiError(400, code, detail, errors ? { errors } : {});
};
const badMessage = (detail: string) => fail("AUTH_BAD_MESSAGE", detail, "body.message");

/** Checks a `/auth:exchange` body (already read as a JSON object) and returns who proved what. */
export async function verifyExchange(body: Record<string, unknown>): Promise<VerifiedExchange> {
  const { ownerAddress, signature, message } = checkShape(body);
  const owner = checkOwnerAddress(ownerAddress);
  const parsed = parseAuthMessage(message);
  checkTimes(parsed);
  if (parsed.wallet !== owner) {
    throw badMessage("The Wallet line must be the EIP-55 form of ownerAddress.");
  }
  checkSignature(message, signature, owner);
  return { owner, chainId: parsed.chainId, expiresAtMs: parsed.expireAtMs, expiresAt: parsed.expireAt };
}

/** Exactly the three members, each a non-empty string. Missing/empty wins over wrong type/unknown member. */
function checkShape(body: Record<string, unknown>): Record<(typeof FIELDS)[number], string> {
  const missing = FIELDS.filter((f) => body[f] === undefined || body[f] === null || body[f] === "");
  if (missing.length > 0) {
    throw new ApiError(400, "AUTH_MISSING_FIELDS", `Missing or empty: ${missing.join(", ")}.`, {
      errors: missing.map((f) => ({ path: `body.${f}`, message: "is required" })),
    });
  }
  const errors: FieldError[] = [];
  for (const f of FIELDS) if (typeof body[f] !== "string") errors.push({ path: `body.${f}`, message: "must be a string" });
  for (const key of Object.keys(body)) {
    if (!(FIELDS as readonly string[]).includes(key)) errors.push({ path: `body.${key}`, message: "is not a known member" });
  }
  if (errors.length > 0) {
    throw new ApiError(400, "AUTH_BAD_REQUEST", "The body must hold exactly ownerAddress, signature and message, all strings.", { errors });
  }
  return body as Record<(typeof FIELDS)[number], string>;
}

/** An Address of API.md §1.5 (any single case, or valid EIP-55 mixed case), not the zero address. */
function checkOwnerAddress(value: string): `0x${string}` {
  if (!isAcceptedAddress(value)) {
    throw fail("AUTH_INVALID_ADDRESS", "ownerAddress is not an address.", "body.ownerAddress");
  }
  if (value.toLowerCase() === ZERO_ADDRESS) {
    throw fail("AUTH_ZERO_ADDRESS", "ownerAddress must not be the zero address.", "body.ownerAddress");
  }
  return checksumAddress(value);
}

/**
 * Parses the 8 lines and checks, in the §7.1 order: layout, URI and Version, Chain ID (format, then
 * configured), time formats and order. The time-window checks against "now" are in `checkTimes`.
 */
function parseAuthMessage(message: string): AuthMessage {
  // One trailing newline is allowed; a `\r` before each `\n` is tolerated.
  const text = message.endsWith("\r\n") ? message.slice(0, -2) : message.endsWith("\n") ? message.slice(0, -1) : message;
  const lines = text.split("\n").map((line) => (line.endsWith("\r") ? line.slice(0, -1) : line));
  if (lines.length !== 8) throw badMessage("The message must have exactly eight lines.");
  if (lines[0] !== AUTH_SENTENCE) throw badMessage("Line 1 must be the fixed sentence.");
  if (lines[1] !== "") throw badMessage("Line 2 must be empty.");
  const values = AUTH_LINE_PREFIXES.map((prefix, i) => {
    const line = lines[i + 2]!;
    if (!line.startsWith(prefix)) throw badMessage(`Line ${i + 3} must start with '${prefix}'.`);
    return line.slice(prefix.length);
  });
  const [uri, chainIdText, version, issuedAt, expireAt, wallet] = values as [string, string, string, string, string, string];

  if (!isHttpUrl(uri)) throw badMessage("URI must be an absolute http or https URL.");
  const allowed = useConfig().authAllowedUris;
  if (allowed.length > 0 && !allowed.some((a) => sameUri(a, uri))) throw badMessage("URI is not one of the allowed URIs.");
  if (!VERSION.test(version)) throw badMessage("Version must be 1 to 64 printable characters.");

  const chainId = Number(chainIdText);
  if (!CHAIN_ID.test(chainIdText) || !Number.isSafeInteger(chainId)) {
    throw badMessage("Chain ID must be a positive decimal integer without leading zeros.");
  }
  if (!useConfig().chains.some((c) => c.chainId === chainId)) {
    throw fail("UNSUPPORTED_CHAIN", `Chain ${chainId} is not supported by this service.`, "body.message");
  }

  const issuedAtMs = parseTime(issuedAt);
  const expireAtMs = parseTime(expireAt);
  if (issuedAtMs === undefined || expireAtMs === undefined) {
    throw badMessage("Issued At and Expire At must be YYYY-MM-DDTHH:mm:ss.SSSZ (UTC).");
  }
  if (issuedAtMs >= expireAtMs) throw badMessage("Issued At must be before Expire At.");
  return { uri, chainId, version, issuedAtMs, expireAtMs, expireAt, wallet };
}

function checkTimes(m: AuthMessage) {
  const now = useRuntime().now();
  if (m.issuedAtMs > now + ISSUED_AT_SKEW_MS) throw badMessage("Issued At is in the future.");
  if (m.expireAtMs <= now) throw fail("AUTH_EXPIRED_MESSAGE", "The message has expired (Expire At is not in the future).", "body.message");
  const maxLifetimeS = useConfig().limits.maxTokenLifetimeS;
  if (m.expireAtMs > now + maxLifetimeS * 1000) {
    throw fail("AUTH_EXPIRY_TOO_LONG", `Expire At may be at most ${maxLifetimeS} seconds from now.`, "body.message");
  }
}

/** 65 bytes, v in {0, 1, 27, 28}, recovering to `owner` over the message bytes exactly as sent. */
function checkSignature(message: string, signature: string, owner: `0x${string}`) {
  const invalid = () => fail("AUTH_INVALID_SIGNATURE", "The signature is malformed or was not made by ownerAddress.", "body.signature");
  if (!SIGNATURE.test(signature)) throw invalid();
  const v = parseInt(signature.slice(130), 16);
  if (![0, 1, 27, 28].includes(v)) throw invalid();
  let recovered: string;
  try {
    recovered = recoverPersonalSigner(message, signature);
  } catch {
    throw invalid();
  }
  if (recovered.toLowerCase() !== owner.toLowerCase()) throw invalid();
}

function isHttpUrl(value: string): boolean {
  if (value === "" || /\s/.test(value)) return false;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  return (url.protocol === "http:" || url.protocol === "https:") && url.hostname !== "";
}

/** Allow-list entries match after URL normalisation (`https://A.example` equals `https://a.example/`). */
function sameUri(allowed: string, uri: string): boolean {
  if (allowed === uri) return true;
  try {
    return new URL(allowed).href === new URL(uri).href;
  } catch {
    return false;
  }
}

/** `YYYY-MM-DDTHH:mm:ss.SSSZ` naming a real instant (no 2026-02-30), in ms; undefined otherwise. */
function parseTime(value: string): number | undefined {
  if (!TIME.test(value)) return undefined;
  const ms = Date.parse(value);
  if (Number.isNaN(ms) || new Date(ms).toISOString() !== value) return undefined;
  return ms;
}
