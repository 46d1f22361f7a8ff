/**
 * ethTransfer (API.md §8.4.1): one user operation from the runner sending `amount` wei (or `max`) to
 * `destination`. Simulated (inside `:simulate`), it is only checked against the runner's balance.
 * `X` = `{from, to, value, chainId, isSimulated, userOpHash?, transactionHash?}`.
 */
import type { NodeOf } from "../../workflow/schemas";
import { address, wei } from "./inputs";
import { chainClient, read } from "./chain";
import { StepFailure, type NodeKind } from "./kind";
import { outcomeGas, outcomeHashes, requireRunner, sendFailure, simulated } from "./send";

type Config = NodeOf<"ethTransfer">["config"];

export const ethTransfer: NodeKind<Config> = {
  async run(stored, env) {
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
};
