/**
 * Well-known tokens planted on a local chain at their public addresses (API.md §21.4, `LOCAL_TOKENS`), so a
 * workflow written against a public network's token addresses runs unchanged on a local chain of that id.
 *
 * Each is our LocalToken (shared/chain/solidity/LocalToken.sol: an OpenZeppelin ERC-20 whose name, symbol and
 * decimals are immutables; WETH also wraps ether like WETH9): its runtime code, obtained by running its creation
 * code in an eth_call, is copied to the public address with anvil_setCode. No storage is written, so a restart
 * on a persisted chain keeps every balance. `mint(to, amount)` is open to anyone, for tests and local funding.
 */
import { concat, encodeAbiParameters, type Address, type Hex, type PublicClient } from "viem";
import { artifacts } from "../../shared/chain/solidity/artifacts";

export interface PlantedToken {
  symbol: string;
  name: string;
  decimals: number;
  address: Address;
}

const WETH = "Wrapped Ether";

const SEPOLIA: readonly PlantedToken[] = [
  { symbol: "USDC", name: "USDC", decimals: 6, address: "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238" },
  { symbol: "WETH", name: WETH, decimals: 18, address: "0xfFf9976782d46CC05630D1f6eBAb18b2324d6B14" },
  { symbol: "LINK", name: "ChainLink Token", decimals: 18, address: "0x779877A7B0D9E8603169DdbD7836e478b4624789" },
];

/**
 * The planted tokens by chain id: the public networks' own addresses and metadata. 31337 has no public network;
 * it gets Sepolia's, so a workflow written for Sepolia's tokens also runs on the default local chain unchanged.
 */
const TOKENS_BY_CHAIN: Readonly<Record<number, readonly PlantedToken[]>> = {
  31337: SEPOLIA,
  11155111: SEPOLIA,
  1: [
    { symbol: "USDC", name: "USD Coin", decimals: 6, address: "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48" },
    { symbol: "WETH", name: WETH, decimals: 18, address: "0xC02aaA39b223FE8D0A0e5C4F27eAD9083C756Cc2" },
  ],
  8453: [
    { symbol: "USDC", name: "USD Coin", decimals: 6, address: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913" },
    { symbol: "WETH", name: WETH, decimals: 18, address: "0x4200000000000000000000000000000000000006" },
  ],
  84532: [
    { symbol: "USDC", name: "USDC", decimals: 6, address: "0x036CbD53842c5426634e7929541eC2318f3dCF7e" },
    { symbol: "WETH", name: WETH, decimals: 18, address: "0x4200000000000000000000000000000000000006" },
  ],
};

/** The tokens planted on a local chain of `chainId` (none for a chain id not listed). */
export function localTokens(chainId: number): readonly PlantedToken[] {
  return TOKENS_BY_CHAIN[chainId] ?? [];
}

function creationCode(token: PlantedToken): Hex {
  if (token.symbol === "WETH") return artifacts.LocalWrappedEther.bytecode;
  const args = encodeAbiParameters([{ type: "string" }, { type: "string" }, { type: "uint8" }], [token.name, token.symbol, token.decimals]);
  return concat([artifacts.LocalToken.bytecode, args]);
}

/** Plants `chainId`'s tokens on the anvil behind `client`; a token whose code is already there is left alone. */
export async function plantTokens(client: PublicClient, chainId: number): Promise<PlantedToken[]> {
  const tokens = localTokens(chainId);
  await Promise.all(
    tokens.map(async (token) => {
      const { data: runtime } = await client.call({ data: creationCode(token) });
      if (!runtime || runtime === "0x") throw new Error(`devnet: the code of ${token.symbol} could not be built`);
      if ((await client.getCode({ address: token.address })) === runtime) return;
      await client.request({ method: "anvil_setCode" as never, params: [token.address, runtime] as never });
    }),
  );
  return tokens.map((token) => ({ ...token }));
}
