/**
 * Prints an access token for a local EOA, the way a client obtains one (API.md §7.1):
 *   npx tsx local/sign-in.ts [privateKey] [baseUrl]
 * Without a private key it uses anvil's first dev account. For development only.
 */
import { privateKeyToAccount } from "viem/accounts";

const ANVIL_DEV_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
const [privateKey = ANVIL_DEV_KEY, baseUrl = `http://localhost:${process.env.PORT ?? 3000}`] = process.argv.slice(2);

const account = privateKeyToAccount(privateKey as `0x${string}`);
const health = (await (await fetch(`${baseUrl}/health`)).json()) as { chainId: number; version: string };
const now = Date.now();
const message = [
  "Please sign the below text for ownership verification.",
  "",
  `URI: ${baseUrl}`,
  `Chain ID: ${health.chainId}`,
  `Version: ${health.version}`,
  `Issued At: ${new Date(now).toISOString()}`,
  `Expire At: ${new Date(now + 24 * 3600_000).toISOString()}`,
  `Wallet: ${account.address}`,
].join("\n");
const signature = await account.signMessage({ message });
const res = await fetch(`${baseUrl}/auth:exchange`, {
  method: "POST",
  headers: { "Content-Type": "application/json" },
  body: JSON.stringify({ ownerAddress: account.address, signature, message }),
});
const body = (await res.json()) as { token?: string };
if (!res.ok || !body.token) {
  console.error(JSON.stringify(body, null, 2));
  process.exit(1);
}
console.log(body.token);
