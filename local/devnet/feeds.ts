/**
 * Well-known Chainlink price feeds planted on a local chain at their public addresses (API.md §21.4, under
 * `LOCAL_TOKENS` with the tokens), so a workflow that reads a public network's feed (a contractRead of
 * `latestRoundData`, an event trigger on `AnswerUpdated`) runs unchanged on a local chain of that id.
 *
 * Each is our LocalPriceFeed (shared/chain/solidity/LocalPriceFeed.sol: decimals and description are immutables):
 * its runtime code, obtained by running its creation code in an eth_call, is copied to the public address with
 * anvil_setCode. A feed with no round yet gets its first one by a `setAnswer(initial)` transaction, which also emits
 * one `AnswerUpdated` log; a restart on a persisted chain keeps the rounds. `setAnswer(int256)` is open to anyone on
 * local chains: tests move a price with it.
 */
import { concat, encodeAbiParameters, encodeFunctionData, parseAbi, toHex, type Address, type Hex, type PublicClient } from "viem";
import { artifacts } from "../../shared/chain/solidity/artifacts";

export interface PlantedFeed {
  /** Chainlink's description, e.g. "ETH / USD". */
  description: string;
  decimals: number;
  address: Address;
  /** The first round's answer (in `decimals`), written when the feed has no round yet. */
  initialAnswer: string;
}

/** The planted feed's ABI that planting and tests use (the full one: artifacts.LocalPriceFeed.abi). */
export const localPriceFeedAbi = /* @__PURE__ */ parseAbi([
  "function latestRound() view returns (uint256)",
  "function latestRoundData() view returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)",
  "function setAnswer(int256 answer)",
  "event AnswerUpdated(int256 indexed current, uint256 indexed roundId, uint256 updatedAt)",
]);

const SEPOLIA: readonly PlantedFeed[] = [
  { description: "ETH / USD", decimals: 8, address: "0x694AA1769357215DE4FAC081bf1f309aDC325306", initialAnswer: "300000000000" },
  { description: "BTC / USD", decimals: 8, address: "0x1b44F3514812d835EB1BDB0acB33d3fA3351Ee43", initialAnswer: "9000000000000" },
  { description: "USDC / USD", decimals: 8, address: "0xA2F78ab2355fe2f984D808B5CeE7FD0A93D5270E", initialAnswer: "100000000" },
];

/** The planted feeds by chain id; 31337 gets Sepolia's, as it gets Sepolia's tokens (./tokens.ts). */
const FEEDS_BY_CHAIN: Readonly<Record<number, readonly PlantedFeed[]>> = {
  31337: SEPOLIA,
  11155111: SEPOLIA,
  1: [
    { description: "ETH / USD", decimals: 8, address: "0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419", initialAnswer: "300000000000" },
    { description: "BTC / USD", decimals: 8, address: "0xF4030086522a5bEEa4988F8cA5B36dbC97BeE88c", initialAnswer: "9000000000000" },
  ],
};

/** Sends each feed's first round: an address no test or tool uses, impersonated (its nonce is nobody else's). */
export const FEED_KEEPER: Address = "0x000000000000000000000000000000000000FeeD";

/** The feeds planted on a local chain of `chainId` (none for a chain id not listed). */
export function localFeeds(chainId: number): readonly PlantedFeed[] {
  return FEEDS_BY_CHAIN[chainId] ?? [];
}

const anvil = (client: PublicClient, method: string, params: unknown[]) =>
  client.request({ method: method as never, params: params as never });

async function runtimeCode(client: PublicClient, feed: PlantedFeed): Promise<Hex> {
  const args = encodeAbiParameters([{ type: "uint8" }, { type: "string" }], [feed.decimals, feed.description]);
  const { data } = await client.call({ data: concat([artifacts.LocalPriceFeed.bytecode, args]) });
  if (!data || data === "0x") throw new Error(`devnet: the code of the ${feed.description} feed could not be built`);
  return data;
}

/** Writes the feed's first round from FEED_KEEPER (one transaction, mined at once). */
async function writeFirstRound(client: PublicClient, feed: PlantedFeed): Promise<void> {
  const data = encodeFunctionData({ abi: localPriceFeedAbi, functionName: "setAnswer", args: [BigInt(feed.initialAnswer)] });
  const hash = (await anvil(client, "eth_sendTransaction", [{ from: FEED_KEEPER, to: feed.address, data }])) as Hex;
  const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  if (receipt.status !== "success") throw new Error(`devnet: the first round of the ${feed.description} feed reverted`);
}

/**
 * Plants `chainId`'s feeds on the anvil behind `client`: code where it is missing or differs, then a first round for
 * each feed that has none (a restart on a persisted chain finds both and sends nothing).
 */
export async function plantFeeds(client: PublicClient, chainId: number): Promise<PlantedFeed[]> {
  const feeds = localFeeds(chainId);
  await Promise.all(
    feeds.map(async (feed) => {
      const runtime = await runtimeCode(client, feed);
      if ((await client.getCode({ address: feed.address })) !== runtime) await anvil(client, "anvil_setCode", [feed.address, runtime]);
    }),
  );
  const unanswered: PlantedFeed[] = [];
  for (const feed of feeds) {
    const rounds = await client.readContract({ address: feed.address, abi: localPriceFeedAbi, functionName: "latestRound" });
    if (rounds === 0n) unanswered.push(feed);
  }
  if (unanswered.length > 0) {
    await anvil(client, "anvil_setBalance", [FEED_KEEPER, toHex(10n ** 18n)]);
    await anvil(client, "anvil_impersonateAccount", [FEED_KEEPER]);
    try {
      // One at a time: the keeper's transactions take its nonces in order.
      for (const feed of unanswered) await writeFirstRound(client, feed);
    } finally {
      await anvil(client, "anvil_stopImpersonatingAccount", [FEED_KEEPER]);
    }
  }
  return feeds.map((feed) => ({ ...feed }));
}
