/**
 * balance (API.md §8.4.10): the native balance first (`tokenAddress: null`, the chain's native symbol and
 * decimals), then per listed ERC-20 its `symbol` and `decimals` read from the token (null when it does not
 * implement them) and `balanceOf`. An RPC failure or a reverting `balanceOf` fails the step.
 */
import { erc20Abi, hexToString, type Address, type PublicClient } from "viem";
import * as v from "valibot";
import { address, invalid } from "../support/inputs";
import { chainClient, configuredChain, isRevert, read } from "../support/chain";
import { defineNode, nodeShape } from "../kind";
import { AddressOrTemplate, ChainId, TemplatedAny, list, opt, str, strict } from "../support/schema-kit";
import { AddressString } from "../../http/address-schemas";

const config = strict(
  {
    address: AddressOrTemplate,
    chainId: opt(ChainId),
    chain: opt(
      v.pipe(
        str(),
        v.regex(/^(?:0|[1-9][0-9]{0,15})$/, "must be a chain id as a decimal string"),
        v.description("Compatibility alias of `chainId`; must agree with it when both are set."),
      ),
    ),
    tokenAddresses: opt(list(AddressString, 0, 50, "addresses")),
    includeSpam: opt(TemplatedAny),
    includeZeroBalances: opt(TemplatedAny),
    minUsdValueCents: opt(TemplatedAny),
  },
  "balance. `includeSpam`, `includeZeroBalances` and `minUsdValueCents` are accepted for client compatibility and have no effect.",
);
type Config = v.InferOutput<typeof config>;

const bytes32SymbolAbi = [
  { type: "function", name: "symbol", stateMutability: "view", inputs: [], outputs: [{ type: "bytes32" }] },
] as const;

export const balanceShape = nodeShape({
  type: "balance",
  doc: "Reads the native balance and ERC-20 balances of an address.",
  config: () => config,
  chainAware: true,
  writesOnChain: false,
});

export const balance = /* @__PURE__ */ defineNode(balanceShape, {
  problems(config, at, add) {
    const chain = typeof config.chain === "string" ? config.chain : undefined;
    const chainId = typeof config.chainId === "number" ? config.chainId : 0;
    if (chain !== undefined && /^[0-9]+$/.test(chain) && Number(chain) !== 0 && chainId !== 0 && Number(chain) !== chainId) {
      add(`${at}.chain`, "must agree with chainId");
    }
  },
  cutOff: "RPC_ERROR",
  run: async (stored: Config, env) => {
    const config = env.render(stored);
    const alias = config.chain !== undefined && config.chain !== "0" ? Number(config.chain) : undefined;
    if (alias !== undefined && config.chainId && alias !== config.chainId)
      throw invalid("chain", `must agree with chainId (${config.chainId})`);
    const account = address(config.address, "address");
    const client = chainClient(env.chainId);
    const native = configuredChain(env.chainId).nativeToken;
    const tokens = (config.tokenAddresses ?? []).map((t, i) => address(t, `tokenAddresses[${i}]`));
    const [nativeBalance, ...tokenElements] = await Promise.all([
      read("native balance", () => client.getBalance({ address: account })),
      ...tokens.map((token) => tokenBalance(client, token, account)),
    ]);
    return {
      data: [
        { tokenAddress: null, symbol: native.symbol, decimals: native.decimals, balance: (nativeBalance as bigint).toString() },
        ...tokenElements,
      ],
    };
  },
});

async function tokenBalance(client: PublicClient, token: Address, account: Address) {
  const [symbol, decimals, amount] = await Promise.all([
    optional(() => tokenSymbol(client, token)),
    optional(() => client.readContract({ address: token, abi: erc20Abi, functionName: "decimals" })),
    read(`balanceOf on ${token}`, () => client.readContract({ address: token, abi: erc20Abi, functionName: "balanceOf", args: [account] })),
  ]);
  return { tokenAddress: token, symbol, decimals: decimals ?? null, balance: amount.toString() };
}

/** `symbol()` as a string, or as bytes32 text (some early tokens). */
async function tokenSymbol(client: PublicClient, token: Address): Promise<string> {
  try {
    return await client.readContract({ address: token, abi: erc20Abi, functionName: "symbol" });
  } catch (err) {
    if (!isRevert(err)) throw err;
    const raw = await client.readContract({ address: token, abi: bytes32SymbolAbi, functionName: "symbol" });
    return hexToString(raw, { size: 32 });
  }
}

/** A read that may be missing (the token does not implement it): null when the contract refuses; RPC failures fail the step. */
async function optional<T>(run: () => Promise<T>): Promise<T | null> {
  try {
    return await run();
  } catch (err) {
    if (isRevert(err)) return null;
    return read("token metadata", () => Promise.reject(err));
  }
}
