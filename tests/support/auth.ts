/**
 * Signing in the way a client does (API.md §7.1): build the 8-line message, `personal_sign` it with the
 * owner's key (a viem local account), POST it to `/auth:exchange`, and use the returned token as
 * `Authorization: Bearer <token>`.
 *
 * Deliberately independent of shared/auth/message.ts: the message is built here from the contract, so a
 * server-side parsing bug cannot hide behind a shared helper.
 */
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { useRuntime } from "../../shared/current-runtime";

/** Anything with Hono's `app.request()` shape (an app made by createApp). */
export interface RequestTarget {
  request(input: string, init?: RequestInit): Response | Promise<Response>;
}

export interface AuthMessageParts {
  uri: string;
  chainId: number | string;
  version: string;
  issuedAt: Date | number | string;
  expireAt: Date | number | string;
  wallet: string;
}

/** RFC 3339 UTC with milliseconds; strings pass through untouched (to build malformed messages). */
const time = (t: Date | number | string) => (typeof t === "string" ? t : new Date(t).toISOString());

/** The 8 lines joined by `\n`, no trailing newline: exactly the text the client signs. */
export function buildAuthMessage(p: AuthMessageParts): string {
  return [
    "Please sign the below text for ownership verification.",
    "",
    `URI: ${p.uri}`,
    `Chain ID: ${p.chainId}`,
    `Version: ${p.version}`,
    `Issued At: ${time(p.issuedAt)}`,
    `Expire At: ${time(p.expireAt)}`,
    `Wallet: ${p.wallet}`,
  ].join("\n");
}

const DEFAULT_URI = "https://app.example.com";

/** The defaults a client would use against the current runtime: an allowed URI, the default chain, now. */
export function messageDefaults(wallet: string, expiresInMs = 3_600_000): AuthMessageParts {
  const { config, now } = useRuntime();
  const issuedAt = now();
  return {
    uri: config.authAllowedUris[0] ?? DEFAULT_URI,
    chainId: config.defaultChainId,
    version: config.serviceVersion,
    issuedAt,
    expireAt: issuedAt + expiresInMs,
    wallet,
  };
}

export interface SignedIn {
  token: string;
  owner: `0x${string}`;
  privateKey: `0x${string}`;
  /** `{ Authorization: "Bearer <token>" }`, ready to spread into request headers. */
  headers: Record<string, string>;
}

/**
 * Signs in a (new, unless `privateKey` is given) owner through `POST /auth:exchange`. Each call comes from
 * its own documentation-range client address (`X-Forwarded-For`, honoured only by `app.request()`), so
 * sign-ins never share the per-IP rate-limit bucket of the public routes.
 */
export async function signIn(
  app: RequestTarget,
  opts: { privateKey?: `0x${string}`; chainId?: number; expiresInMs?: number } = {},
): Promise<SignedIn> {
  const privateKey = opts.privateKey ?? generatePrivateKey();
  const account = privateKeyToAccount(privateKey);
  const parts = messageDefaults(account.address, opts.expiresInMs);
  if (opts.chainId !== undefined) parts.chainId = opts.chainId;
  const message = buildAuthMessage(parts);
  const signature = await account.signMessage({ message });
  const res = await app.request("/auth:exchange", {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Forwarded-For": randomClientIp() },
    body: JSON.stringify({ ownerAddress: account.address, signature, message }),
  });
  const body = (await res.json()) as { token?: string; code?: string; detail?: string };
  if (res.status !== 200 || !body.token) {
    throw new Error(`sign-in failed: ${res.status} ${body.code ?? ""} ${body.detail ?? ""}`);
  }
  return { token: body.token, owner: account.address, privateKey, headers: { Authorization: `Bearer ${body.token}` } };
}

function randomClientIp(): string {
  const n = Math.floor(Math.random() * 65_536);
  return `198.18.${n >> 8}.${n & 255}`;
}
