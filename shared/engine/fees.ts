/**
 * Fees (API.md §9): the flat execution fee, the rule-based value fee, and the estimate of `:estimateFees`: per
 * write node the gas the runner's account spends on its calls (eth_estimateGas, with the contract's fallbacks when
 * that is impossible) priced at the chain's current gas price, plus the runner's deployment when it has no code.
 */
import { randomBytes } from "node:crypto";
import {
  encodeFunctionData,
  getAddress,
  isAddress,
  toFunctionSignature,
  type Abi,
  type AbiFunction,
  type AbiParameter,
  type Address,
  type Hex,
  type PublicClient,
} from "viem";
import { useConfig } from "../runtime";
import { chainSettings, isKnownFactory, publicClient } from "../chain/chains";
import { encodeAccountCalls, encodeCreateAccount, type AccountCall } from "../chain/userop";
import { upstreamError } from "../chain/upstream";
import { partChainId, sendsUserOperation } from "../workflow/definition";
import { hasTemplate } from "../templates";
import { get as getWallet } from "../wallet/wallet";
import type { Cost, Fee, FeeEstimate, ValueFee } from "./schemas";
import type { LoopRunner, MethodCall, Node, NodeOf } from "../workflow/schemas";

/** Gas units when estimation is impossible (API.md §9.6). */
export const FALLBACK_GAS = { contractWrite: 150_000n, ethTransfer: 50_000n, walletCreation: 500_000n } as const;
export const WALLET_CREATION_NODE_ID = "_wallet_creation";
/**
 * What a user operation spends around its calls: the account's and the paymaster's validation and the bundler's
 * pre-verification gas (about 73,000 for a sponsored EntryPoint v0.7 operation of a ControlledAccount, measured on
 * the devnet). eth_estimateGas of the calls alone is under half of what the operation uses.
 */
export const OPERATION_OVERHEAD_GAS = 70_000n;

/** `{amount: execution_fee_usd, unit: "USD"}`. */
export function executionFee(): Fee {
  return { amount: useConfig().fees.executionFeeUsd, unit: "USD" };
}

/** The rule of API.md §9.6: tier1 when the workflow has a value-moving node (ethTransfer, contractWrite, or a loop of one). */
export function valueFeeFor(nodes: readonly Node[]): ValueFee {
  if (nodes.some(sendsUserOperation)) {
    return {
      fee: { amount: useConfig().fees.valueFeeTiers.tier1, unit: "PERCENTAGE" },
      tier: "tier1",
      valueBase: "input_token_value",
      classificationMethod: "ruleBased",
      confidence: 1,
      reason: "workflow contains on-chain value-moving nodes",
    };
  }
  return {
    fee: { amount: "0", unit: "PERCENTAGE" },
    tier: "unspecified",
    classificationMethod: "ruleBased",
    confidence: 1,
    reason: "workflow contains no on-chain value-moving nodes",
  };
}

/** The node (or loop runner) that sends a user operation when it runs: ethTransfer, or contractWrite not `isSimulated`. */
type WriteStep = Pick<NodeOf<"ethTransfer">, "type" | "config"> | Pick<NodeOf<"contractWrite">, "type" | "config">;

function writeStepOf(node: Node | LoopRunner): WriteStep | undefined {
  if (node.type === "ethTransfer") return node;
  if (node.type === "contractWrite") return node.config.isSimulated ? undefined : node;
  if (node.type === "loop") return writeStepOf(node.config.runner);
  return undefined;
}

export interface EstimateInput {
  /** The workflow chain and its nodes (a validated definition). */
  definition: { chainId: number; nodes: readonly Node[] };
  /** The wallet the gas is estimated from; any address. */
  runner?: Address;
  /** The caller: when `runner` is one of its registered wallets, the deployment is estimated for that very wallet. */
  owner?: Address;
}

/**
 * The fee estimate of one execution (API.md §9.5). Reads the chains; throws 503/502 UPSTREAM_UNAVAILABLE when a
 * chain that carries a cost cannot be read (its gas price, or whether the runner is deployed).
 */
export async function estimateFees({ definition, runner, owner }: EstimateInput): Promise<FeeEstimate> {
  const chain = chainSettings(definition.chainId);
  const writes = definition.nodes.flatMap((node) => {
    const step = writeStepOf(node);
    return step ? [{ nodeId: node.id, step, chainId: partChainId(step.config, definition.chainId) }] : [];
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
    const gas = await writeGas(write.step, write.chainId, runner);
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
    valueFee: valueFeeFor(definition.nodes),
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
async function writeGas(step: WriteStep, chainId: number, runner: Address | undefined): Promise<bigint> {
  const fallback = FALLBACK_GAS[step.type];
  const calls = literalCalls(step);
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

// ---------------------------------------------------------------------------------------------
// The calls of a write whose inputs are all literal

const literal = (value: string | undefined): value is string => value !== undefined && !hasTemplate(value);

function literalCalls(step: WriteStep): AccountCall[] | undefined {
  if (step.type === "ethTransfer") {
    const { destination, amount } = step.config;
    if (!literal(destination) || !literal(amount) || !isAddress(destination)) return undefined;
    // `max` moves the balance: a non-zero value costs the same gas whatever its size
    return [{ to: getAddress(destination), value: amount === "max" ? 1n : BigInt(amount) }];
  }
  const config = step.config;
  const value = config.value ?? "0";
  if (!literal(config.contractAddress) || !literal(value)) return undefined;
  if (config.callData !== undefined) {
    return literal(config.callData)
      ? [{ to: getAddress(config.contractAddress), value: BigInt(value), data: config.callData as Hex }]
      : undefined;
  }
  const calls: AccountCall[] = [];
  for (const call of config.methodCalls ?? []) {
    const to = call.contractAddress ?? config.contractAddress;
    const data = callData(call, config.contractAbi as Abi | undefined);
    if (!literal(to) || !isAddress(to) || data === undefined) return undefined;
    calls.push({ to: getAddress(to), data });
  }
  if (calls.length === 0) return undefined;
  if (calls.length === 1) calls[0]!.value = BigInt(value);
  return calls;
}

/** A method call's data when it is literal: its callData, or the ABI encoding of its parameters. */
function callData(call: MethodCall, abi: Abi | undefined): Hex | undefined {
  if (call.callData !== undefined) return literal(call.callData) ? (call.callData as Hex) : undefined;
  const params = call.methodParams ?? [];
  if (!abi || params.some(hasTemplate)) return undefined;
  const name = call.methodName.replace(/\s+/g, "");
  const functions = abi.filter((item): item is AbiFunction => item.type === "function");
  const fn = name.includes("(")
    ? functions.find((f) => toFunctionSignature(f) === name)
    : functions.find((f) => f.name === name && f.inputs.length === params.length);
  if (!fn) return undefined;
  try {
    return encodeFunctionData({ abi: [fn], functionName: fn.name, args: fn.inputs.map((input, i) => parameter(input, params[i])) });
  } catch {
    return undefined;
  }
}

/** A parameter from its text (API.md §8.4.2): integers decimal or hex, bools, arrays and tuples as JSON text. */
function parameter(param: AbiParameter, value: unknown): unknown {
  const array = /^(.*)\[\d*\]$/.exec(param.type);
  if (array) {
    const items: unknown = typeof value === "string" ? JSON.parse(value) : value;
    if (!Array.isArray(items)) throw new Error("not an array");
    return items.map((item) => parameter({ ...param, type: array[1]! }, item));
  }
  if (param.type === "tuple") {
    const tuple: unknown = typeof value === "string" ? JSON.parse(value) : value;
    const components = (param as { components?: readonly AbiParameter[] }).components ?? [];
    const fields = Array.isArray(tuple) ? tuple : components.map((c) => (tuple as Record<string, unknown>)[c.name ?? ""]);
    return components.map((component, i) => parameter(component, fields[i]));
  }
  if (/^u?int\d*$/.test(param.type)) return BigInt(value as string | number);
  if (param.type === "bool") {
    if (value === true || value === "true") return true;
    if (value === false || value === "false") return false;
    throw new Error("not a bool");
  }
  return value;
}
