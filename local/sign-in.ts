/**
 * Prints an access token for a local EOA, the way a client obtains one (API.md §7.1):
 *   [CHAIN_ID=11155111] npx tsx local/sign-in.ts [privateKey] [baseUrl]
 * Without a private key it uses anvil's first dev account; without CHAIN_ID the token is for the default chain
 * (a wallet route without `chainId` means the token's chain). For development only.
 */
import { privateKeyToAccount } from "viem/accounts";
import { signInWithAccount } from "./client";

const ANVIL_DEV_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
const [privateKey = ANVIL_DEV_KEY, baseUrl = `http://localhost:${process.env.PORT ?? 3000}`] = process.argv.slice(2);

try {
  const chainId = process.env.CHAIN_ID ? Number(process.env.CHAIN_ID) : undefined;
  console.log(await signInWithAccount(baseUrl, privateKeyToAccount(privateKey as `0x${string}`), undefined, chainId));
} catch (err) {
  console.error((err as Error).message);
  process.exit(1);
}
