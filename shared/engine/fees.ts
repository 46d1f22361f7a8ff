/**
 * Fees (API.md §9): the flat execution fee, the rule-based value fee, and the estimate of `:estimateFees`: per
 * write node the gas the runner's account spends on its calls (eth_estimateGas, with the contract's fallbacks when
 * that is impossible) priced at the chain's current gas price, plus the runner's deployment when it has no code.
 * Which nodes write, their calls and their fallback gas are each kind's fee rule (shared/kinds/kind.ts).
 */
import { randomBytes } from "node:crypto";
import { getAddress, type Address, type PublicClient } from "viem";
import { chainSettings, isKnownFactory, publicClient } from "../chain/chains";
import { upstreamError } from "../chain/upstream";
import { get as getWallet } from "../wallet/wallet";
import { kinds as defaultKinds } from "../kinds/kinds";
import { type Registry } from "../kinds/registry";
import type { WriteCost } from "../kinds/kind";
import type { Cost, FeeEstimate } from "./schemas";
import { executionFee, valueFeeFor } from "./fee-rules";
import { encodeAccountCalls, encodeCreateAccount } from "../chain/userop-account";
import { partChainId } from "../kinds/support/schema-kit";

/** Gas units when estimation is impossible (API.md §9.6): each writing kind's fallback, and the wallet's creation. */
export const FALLBACK_GAS = {
  ...Object.fromEntries(defaultKinds.nodes.flatMap((k) => (k.fallbackGas !== undefined ? [[k.type, k.fallbackGas]] : []))),
  walletCreation: 500_000n,
} as Readonly<Record<string, bigint>> & { readonly walletCreation: bigint };
const WALLET_CREATION_NODE_ID = "_wallet_creation";
/**
 * What a user operation spends around its calls: the account's and the paymaster's validation and the bundler's
 * pre-verification gas (about 73,000 for a sponsored EntryPoint v0.7 operation of a ControlledAccount, measured on
 * the devnet). eth_estimateGas of the calls alone is under half of what the operation uses.
 */
const OPERATION_OVERHEAD_GAS = 70_000n;

export interface EstimateInput {
  /** The workflow chain and its nodes (a validated definition). */
  definition: { chainId: number; nodes: readonly { id: string; type: string; config: unknown }[] };
  /** The kinds the definition uses; default the service's. */
  kinds?: Registry;
  /** The wallet the gas is estimated from; any address. */
  runner?: Address;
  /** The caller: when `runner` is one of its registered wallets, the deployment is estimated for that very wallet. */
  owner?: Address;
}

/**
 * The fee estimate of one execution (API.md §9.5). Reads the chains; throws 503/502 UPSTREAM_UNAVAILABLE when a
 * chain that carries a cost cannot be read (its gas price, or whether the runner is deployed).
 */
export async function estimateFees({ definition, runner, owner, kinds = defaultKinds }: EstimateInput): Promise<FeeEstimate> {
  const chain = chainSettings(definition.chainId);
  const writes = definition.nodes.flatMap((node) => {
    const cost = kinds.writeCost(node);
    return cost ? [{ nodeId: node.id, cost, chainId: partChainId(cost.chainConfig, definition.chainId) }] : [];
  });

  const costs: Omit<Cost, "fee">[] = [];
  if (writes.length > 0 && !(runner && (await deployed(publicClient(chain), runner)))) {
    costs.push({
      nodeId: WALLET_CREATION_NODE_ID,
      costType: "walletCreation",
      gasUnits: String(await creationGas(definition.chainId, runner, owner)),
      chainId: definition.chainId,
    });
  }
  for (const write of writes) {
    const gas = await writeGas(write.cost, write.chainId, runner);
    costs.push({ nodeId: write.nodeId, costType: "gas", gasUnits: String(gas), chainId: write.chainId });
  }

  const prices = new Map<number, Promise<bigint>>();
  const priceOn = (chainId: number) => {
    let price = prices.get(chainId);
    if (!price) {
      price = publicClient(chainSettings(chainId))
        .getGasPrice()
        .catch((err: unknown) => {
          throw upstreamError(err);
        });
      prices.set(chainId, price);
    }
    return price;
  };
  const cogs: Cost[] = [];
  for (const cost of costs) {
    cogs.push({ ...cost, fee: { amount: String(BigInt(cost.gasUnits) * (await priceOn(cost.chainId))), unit: "WEI" } });
  }

  return {
    chainId: chain.chainId,
    nativeToken: { symbol: chain.nativeToken.symbol, decimals: chain.nativeToken.decimals },
    executionFee: executionFee(),
    cogs,
    valueFee: valueFeeFor(definition.nodes, kinds),
    discounts: [],
    pricingModel: "tiered_value_v1",
  };
}

async function deployed(client: PublicClient, address: Address): Promise<boolean> {
  try {
    const code = await client.getCode({ address });
    return code !== undefined && code !== "0x";
  } catch (err) {
    throw upstreamError(err);
  }
}

/**
 * Gas of the write from the runner: its calls as the runner's account executes them (the EntryPoint calling
 * execute/executeBatch, so the account's own work is counted with the calls'), plus the operation's overhead. Fallback when the runner is absent
 * or undeployed on the node's chain, an input is templated, or the estimate reverts.
 */
async function writeGas(cost: WriteCost, chainId: number, runner: Address | undefined): Promise<bigint> {
  const fallback = cost.fallbackGas;
  const calls = cost.calls;
  if (!runner || !calls) return fallback;
  const chain = chainSettings(chainId);
  const client = publicClient(chain);
  if (!(await deployed(client, runner))) return fallback;
  try {
    const execution = await client.estimateGas({ account: getAddress(chain.entryPoint), to: runner, data: encodeAccountCalls(calls) });
    return execution + OPERATION_OVERHEAD_GAS;
  } catch {
    return fallback; // the calls revert from this runner (or cannot be estimated): the contract's fallback
  }
}

/** The deployment of the runner: the factory's createAccount for its (owner, salt) when it is the caller's wallet. */
async function creationGas(chainId: number, runner: Address | undefined, owner: Address | undefined): Promise<bigint> {
  const chain = chainSettings(chainId);
  const record = runner && owner ? await getWallet(owner, chainId, runner) : undefined;
  const factory = record && isKnownFactory(chain, record.factoryAddress) ? record.factoryAddress : chain.factory;
  if (!factory) return FALLBACK_GAS.walletCreation;
  // Any other runner's account is unknown: a fresh (owner, salt) costs what its deployment would.
  const accountOwner = record?.owner ?? owner ?? runner ?? "0x000000000000000000000000000000000000dEaD";
  const salt = record ? BigInt(record.salt) : BigInt(`0x${randomBytes(32).toString("hex")}`);
  try {
    return await publicClient(chain).estimateGas({ to: getAddress(factory), data: encodeCreateAccount(getAddress(accountOwner), salt) });
  } catch {
    return FALLBACK_GAS.walletCreation;
  }
}
