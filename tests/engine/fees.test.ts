/**
 * Fees (API.md §9, shared/engine/fees.ts) on the real devnet: estimates from eth_estimateGas against what the same
 * writes really cost when sent as user operations, the runner's deployment, the fallbacks, the value-fee rule, the
 * configured rates, and an unreachable chain (503).
 */
import { beforeAll, describe, expect, it } from "vitest";
import * as v from "valibot";
import { parseEther, type Address } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { stackEnv, useTestRuntime } from "../support/runtime";
import { signIn, type SignedIn } from "../support/auth";
import { deployTestToken, setBalance } from "../support/chain";
import { transferFunction } from "../support/abis";
import { createServiceApp } from "../../shared/service/app";
import { ApiError } from "../../shared/errors";
import { validateDefinition } from "../../shared/workflow/definition";
import { erc20Transfer } from "../../shared/chain/account";
import { FALLBACK_GAS, estimateFees } from "../../shared/engine/fees";
import { executionFee, valueFeeFor } from "../../shared/engine/fee-rules";
import { walletSender } from "../../shared/wallet/operation";
import { useRuntime } from "../../shared/current-runtime";
import { FeeEstimate, type Cost } from "../../shared/engine/schemas";

const app = createServiceApp();
const DEAD_CHAIN = 424242;
let alice: SignedIn;

beforeAll(async () => {
  const chains = JSON.parse(stackEnv().CHAINS!) as { chainId: number; factory: string }[];
  const dev = chains.find((c) => c.chainId === 31337)!;
  await useTestRuntime({
    MAX_WALLETS_PER_OWNER: "100",
    EXECUTION_FEE_USD: "0.050",
    VALUE_FEE_TIERS: "tier1=0.04,tier2=0.1,tier3=0.2",
    CHAINS: JSON.stringify([
      ...chains,
      {
        chainId: DEAD_CHAIN,
        rpcUrl: "http://127.0.0.1:9/",
        bundlerUrl: "http://127.0.0.1:9/",
        factory: dev.factory,
        nativeToken: { symbol: "DEAD", decimals: 9 },
      },
    ]),
  });
  alice = await signIn(app);
});

let saltCounter = 0;
async function newWallet(): Promise<Address> {
  const res = await app.request("/wallets", {
    method: "POST",
    headers: { ...alice.headers, "Content-Type": "application/json" },
    body: JSON.stringify({ salt: String(++saltCounter) }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { address: Address }).address;
}

const someone = () => privateKeyToAccount(generatePrivateKey()).address;
const transferAbi = [transferFunction];

/** A definition as `:estimateFees` validates it. */
function definition(nodes: unknown[], chainId = 31337) {
  const { config, now } = useRuntime();
  return validateDefinition(
    {
      chainId,
      trigger: { name: "go", type: "manual", config: {} },
      nodes,
      createdAt: now(),
      expireAt: now() + 3_600_000,
      maxExecution: 1,
      inputVariables: {},
    },
    { mode: "estimateFees", now: now(), limits: config.limits, chains: config.chains, defaultChainId: config.defaultChainId },
  ).definition;
}

const ethTransfer = (id: string, destination: string, amount: string) => ({
  id,
  name: id,
  type: "ethTransfer",
  config: { destination, amount },
});
const tokenTransfer = (id: string, token: Address, to: string, amount: string, extra: Record<string, unknown> = {}) => ({
  id,
  name: id,
  type: "contractWrite",
  config: {
    contractAddress: token,
    contractAbi: transferAbi,
    methodCalls: [{ methodName: "transfer", methodParams: [to, amount] }],
    ...extra,
  },
});
const byNode = (cogs: Cost[]) => Object.fromEntries(cogs.map((c) => [c.nodeId, c]));

/** Every element priced at one gas price of its chain: fee = gasUnits × price. */
function expectPriced(cogs: Cost[]) {
  const prices = new Set(cogs.map((c) => BigInt(c.fee.amount) / BigInt(c.gasUnits)));
  expect(prices.size).toBe(1);
  const [price] = prices;
  expect(price).toBeGreaterThan(0n);
  for (const c of cogs) {
    expect(c.fee).toEqual({ amount: String(BigInt(c.gasUnits) * price!), unit: "WEI" });
    expect(c.chainId).toBe(31337);
  }
}

describe("estimateFees", () => {
  it("estimates an ETH transfer and a contract write from a deployed runner close to what they really use", async () => {
    const token = await deployTestToken();
    const wallet = await newWallet();
    await setBalance(wallet, parseEther("1"));
    await token.mint(wallet, 1000n);
    const send = walletSender({ owner: alice.owner, wallet });
    expect(await send({ chainId: 31337, calls: [{ to: someone(), value: 1n }] })).toMatchObject({ ok: true }); // deploys it
    const [x, y] = [someone(), someone()];

    const estimate = await estimateFees({
      definition: definition([ethTransfer("pay", x, "1000"), tokenTransfer("move", token.address, y, "10")]),
      runner: wallet,
      owner: alice.owner,
    });
    expect(v.is(FeeEstimate, estimate)).toBe(true);
    expect(estimate).toMatchObject({
      chainId: 31337,
      nativeToken: { symbol: "ETH", decimals: 18 },
      executionFee: { amount: "0.05", unit: "USD" },
      valueFee: { tier: "tier1", fee: { amount: "0.04", unit: "PERCENTAGE" } },
      discounts: [],
      pricingModel: "tiered_value_v1",
    });
    expect(estimate.cogs.map((c) => [c.nodeId, c.costType])).toEqual([
      ["pay", "gas"],
      ["move", "gas"],
    ]);
    expectPriced(estimate.cogs);

    const pay = await send({ chainId: 31337, calls: [{ to: x, value: 1000n }] });
    const move = await send({ chainId: 31337, calls: [{ to: token.address, data: erc20Transfer(y, 10n) }] });
    if (!pay.ok || !move.ok) throw new Error("the real sends failed");
    const units = byNode(estimate.cogs);
    for (const [estimated, used] of [
      [BigInt(units.pay!.gasUnits), pay.gasUsed],
      [BigInt(units.move!.gasUnits), move.gasUsed],
    ] as const) {
      expect(estimated).not.toBe(FALLBACK_GAS.ethTransfer);
      expect(estimated).not.toBe(FALLBACK_GAS.contractWrite);
      expect(Number(estimated) / Number(used)).toBeGreaterThan(0.75);
      expect(Number(estimated) / Number(used)).toBeLessThan(1.33);
    }
  });

  it("adds the runner's deployment when it has no code, estimated from the factory's createAccount; its writes take the fallbacks", async () => {
    const token = await deployTestToken();
    const wallet = await newWallet();
    const nodes = [ethTransfer("pay", someone(), "1000"), tokenTransfer("move", token.address, someone(), "10")];
    const estimate = await estimateFees({ definition: definition(nodes), runner: wallet, owner: alice.owner });
    expect(estimate.cogs.map((c) => [c.nodeId, c.costType, c.gasUnits])).toEqual([
      ["_wallet_creation", "walletCreation", expect.any(String)],
      ["pay", "gas", "50000"],
      ["move", "gas", "150000"],
    ]);
    expectPriced(estimate.cogs);
    const creation = BigInt(estimate.cogs[0]!.gasUnits);
    expect(creation).not.toBe(FALLBACK_GAS.walletCreation);

    // what deploying this very wallet really costs: its first operation less a later identical one
    await setBalance(wallet, parseEther("1"));
    const send = walletSender({ owner: alice.owner, wallet });
    const first = await send({ chainId: 31337, calls: [{ to: someone(), value: 1n }] });
    const second = await send({ chainId: 31337, calls: [{ to: someone(), value: 1n }] });
    if (!first.ok || !second.ok) throw new Error("the real sends failed");
    const deployment = first.gasUsed - second.gasUsed;
    expect(Number(creation) / Number(deployment)).toBeGreaterThan(0.75);
    expect(Number(creation) / Number(deployment)).toBeLessThan(1.5);

    // without any runner: the deployment of a fresh account, and the fallbacks
    const anonymous = await estimateFees({ definition: definition(nodes) });
    expect(anonymous.cogs.map((c) => c.nodeId)).toEqual(["_wallet_creation", "pay", "move"]);
    expect(Number(anonymous.cogs[0]!.gasUnits) / Number(creation)).toBeGreaterThan(0.9);
    expect(Number(anonymous.cogs[0]!.gasUnits) / Number(creation)).toBeLessThan(1.1);
  });

  it("takes the fallbacks for templated inputs, a reverting write, and a loop of writes; costs one loop iteration", async () => {
    const token = await deployTestToken();
    const wallet = await newWallet();
    await setBalance(wallet, parseEther("1"));
    expect(await walletSender({ owner: alice.owner, wallet })({ chainId: 31337, calls: [{ to: someone(), value: 1n }] })).toMatchObject({
      ok: true,
    });
    const estimate = await estimateFees({
      runner: wallet,
      owner: alice.owner,
      definition: definition([
        ethTransfer("toTemplate", "{{ go.data.to }}", "1000"),
        ethTransfer("amountTemplate", someone(), "{{ go.data.amount }}"),
        tokenTransfer("paramTemplate", token.address, someone(), "{{ go.data.amount }}"),
        tokenTransfer("reverts", token.address, someone(), "10"), // the wallet holds no tokens
        {
          id: "each",
          name: "each",
          type: "loop",
          config: {
            inputVariable: "{{ go.data.list }}",
            runner: { type: "ethTransfer", config: { destination: "{{ value }}", amount: "1" } },
          },
        },
        {
          id: "literalLoop",
          name: "literalLoop",
          type: "loop",
          config: { inputVariable: "{{ go.data.list }}", runner: { type: "ethTransfer", config: { destination: someone(), amount: "1" } } },
        },
        ethTransfer("max", someone(), "max"),
      ]),
    });
    const units = Object.fromEntries(estimate.cogs.map((c) => [c.nodeId, c.gasUnits]));
    expect(units).toMatchObject({
      toTemplate: "50000",
      amountTemplate: "50000",
      paramTemplate: "150000",
      reverts: "150000",
      each: "50000",
    });
    expect(BigInt(units.literalLoop!)).toBeGreaterThan(FALLBACK_GAS.ethTransfer!); // one iteration, really estimated
    expect(BigInt(units.max!)).toBeGreaterThan(FALLBACK_GAS.ethTransfer!);
    expect(units._wallet_creation).toBeUndefined();
    expectPriced(estimate.cogs);
  });

  it("has empty cogs and the unspecified value fee without write nodes; a simulated write costs no gas but still sets the tier", async () => {
    const offChain = await estimateFees({
      definition: definition([{ id: "code", name: "code", type: "customCode", config: { source: "return 1" } }]),
    });
    expect(offChain).toEqual({
      chainId: 31337,
      nativeToken: { symbol: "ETH", decimals: 18 },
      executionFee: { amount: "0.05", unit: "USD" },
      cogs: [],
      valueFee: {
        fee: { amount: "0", unit: "PERCENTAGE" },
        tier: "unspecified",
        classificationMethod: "ruleBased",
        confidence: 1,
        reason: "workflow contains no on-chain value-moving nodes",
      },
      discounts: [],
      pricingModel: "tiered_value_v1",
    });
    const token = await deployTestToken();
    const simulated = await estimateFees({
      definition: definition([tokenTransfer("dry", token.address, someone(), "1", { isSimulated: true })]),
    });
    expect(simulated.cogs).toEqual([]);
    expect(simulated.valueFee).toEqual({
      fee: { amount: "0.04", unit: "PERCENTAGE" },
      tier: "tier1",
      valueBase: "input_token_value",
      classificationMethod: "ruleBased",
      confidence: 1,
      reason: "workflow contains on-chain value-moving nodes",
    });
    expect(executionFee()).toEqual({ amount: "0.05", unit: "USD" });
    expect(valueFeeFor([]).tier).toBe("unspecified");
  });

  it("answers 503 UPSTREAM_UNAVAILABLE when the chain cannot be read, and needs no chain without costs", async () => {
    const err = await estimateFees({ definition: definition([ethTransfer("pay", someone(), "1")], DEAD_CHAIN), runner: someone() }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 503, code: "UPSTREAM_UNAVAILABLE" });
    const err2 = await estimateFees({ definition: definition([ethTransfer("pay", someone(), "1")], DEAD_CHAIN) }).catch((e: unknown) => e);
    expect(err2).toMatchObject({ status: 503, code: "UPSTREAM_UNAVAILABLE" });
    const offChain = await estimateFees({
      definition: definition([{ id: "code", name: "code", type: "customCode", config: { source: "return 1" } }], DEAD_CHAIN),
    });
    expect(offChain).toMatchObject({ chainId: DEAD_CHAIN, nativeToken: { symbol: "DEAD", decimals: 9 }, cogs: [] });
  });
});
