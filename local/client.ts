/** Signing in to a running service as a client does (API.md §7.1): used by local/sign-in.ts and the benchmark. */
import type { PrivateKeyAccount } from "viem/accounts";

/** `chainId` (the token's `aud`, API.md §7.1) defaults to the service's default chain, as /health names it. */
export async function signInWithAccount(
  baseUrl: string,
  account: PrivateKeyAccount,
  lifetimeMs = 24 * 3600_000,
  chainId?: number,
): Promise<string> {
  const health = (await (await fetch(`${baseUrl}/health`)).json()) as { chainId: number; version: string };
  const now = Date.now();
  const message = [
    "Please sign the below text for ownership verification.",
    "",
    `URI: ${baseUrl}`,
    `Chain ID: ${chainId ?? health.chainId}`,
    `Version: ${health.version}`,
    `Issued At: ${new Date(now).toISOString()}`,
    `Expire At: ${new Date(now + lifetimeMs).toISOString()}`,
    `Wallet: ${account.address}`,
  ].join("\n");
  const signature = await account.signMessage({ message });
  const res = await fetch(`${baseUrl}/auth:exchange`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ ownerAddress: account.address, signature, message }),
  });
  const body = (await res.json()) as { token?: string };
  if (!res.ok || !body.token) throw new Error(`sign-in failed: ${JSON.stringify(body)}`);
  return body.token;
}
