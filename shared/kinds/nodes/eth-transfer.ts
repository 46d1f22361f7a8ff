/**
 * ethTransfer (API.md §8.4.1): one user operation from the runner sending `amount` wei (or `max`) to
 * `destination`. Simulated (inside `:simulate`), it is only checked against the runner's balance.
 * `X` = `{from, to, value, chainId, isSimulated, userOpHash?, transactionHash?}`.
 */
import * as v from "valibot";
import { getAddress, isAddress } from "viem";
import { hasTemplate } from "../../templates";
import { address, wei } from "../support/inputs";
import { chainClient, read } from "../support/chain";
import { StepFailure, defineNode, nodeShape } from "../kind";
import { outcomeGas, outcomeHashes, requireRunner, sendFailure, simulated } from "../support/send";
import { AmountOrTemplate, ChainId, NonZeroAddressOrTemplate, opt, strict } from "../support/schema-kit";
import type { AccountCall } from "../../chain/userop-account";

const config = strict({
  destination: NonZeroAddressOrTemplate,
  amount: AmountOrTemplate,
  chainId: opt(ChainId),
});
type Config = v.InferOutput<typeof config>;

/** The transfer as a call when its inputs are literal (`max` moves the balance: any non-zero value costs the same gas). */
function literalTransfer({ destination, amount }: Config): AccountCall[] | undefined {
  if (hasTemplate(destination) || hasTemplate(amount) || !isAddress(destination)) return undefined;
  return [{ to: getAddress(destination), value: amount === "max" ? 1n : BigInt(amount) }];
}

export const ethTransferShape = nodeShape({
  type: "ethTransfer",
  doc: "Sends native tokens from the runner wallet in one user operation.",
  config: () => config,
  chainAware: true,
  inLoop: true,
  writesOnChain: true,
});

export const ethTransfer = /* @__PURE__ */ defineNode(ethTransferShape, {
  cutOff: "RPC_ERROR",
  fallbackGas: 50_000n,
  fee: (config) => ({ fallbackGas: 50_000n, calls: literalTransfer(config), chainConfig: config }),
  run: async (stored: Config, env) => {
    const config = env.render(stored);
    const to = address(config.destination, "destination", { nonZero: true });
    const max = config.amount === "max";
    const amount = max ? undefined : wei(config.amount, "amount", { positive: true });
    const from = requireRunner(env);
    const chainId = env.chainId;

    if (simulated(env)) {
      const balance = await read("runner balance", () => chainClient(chainId).getBalance({ address: from }));
      const value = amount ?? balance;
      const data = { from, to, value: value.toString(), chainId, isSimulated: true };
      if (balance === 0n || balance < value) {
        throw new StepFailure("INSUFFICIENT_BALANCE", `the runner's balance (${balance} wei) is below the amount (${value} wei)`, data);
      }
      return { data };
    }

    const outcome = await env.sendCalls!({ chainId, calls: [{ to, value: amount ?? 0n }], ...(max ? { sendMax: true } : {}) });
    // `max` is resolved by the sender; its amount is reported when the sender gives it (SendOutcome.value).
    const sent = (outcome as { value?: unknown }).value;
    const value = amount !== undefined ? amount.toString() : typeof sent === "bigint" ? sent.toString() : "max";
    const { blockNumber: _block, ...hashes } = outcomeHashes(outcome);
    const data = { from, to, value, chainId, isSimulated: false, ...hashes };
    if (!outcome.ok) throw sendFailure(outcome, data);
    const gas = outcomeGas(outcome);
    return { data, ...(gas ? { gas } : {}) };
  },
});
