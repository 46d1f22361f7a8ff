/**
 * contractWrite (API.md §8.4.2): the calls (raw `callData`, or `methodCalls` ABI-encoded from their typed
 * params) sent as ONE user operation from the runner; several calls are batched (all succeed or all revert).
 * Simulated (`isSimulated`, or inside `:simulate`): each call is an `eth_call` from the runner and nothing is
 * sent. `X` = one element per call `{methodName?, contractAddress, success, error?, value, isSimulated,
 * userOpHash?, transactionHash?, blockNumber?}`; `value` is the decoded return value of a simulated call.
 */
import type { NodeOf } from "../../workflow/schemas";
import { address, hex, wei } from "./inputs";
import { callAll, callsFailure, prepareCalls, type PreparedCall } from "./contract-read";
import type { NodeKind } from "./kind";
import { outcomeGas, outcomeHashes, requireRunner, sendFailure, simulated } from "./send";

type Config = NodeOf<"contractWrite">["config"];

export const contractWrite: NodeKind<Config> = {
  async run(stored, env) {
    const config = env.render(stored);
    const value = config.value !== undefined ? wei(config.value, "value") : 0n;
    const calls: PreparedCall[] =
      config.callData !== undefined
        ? [{ methodName: "", contractAddress: address(config.contractAddress, "contractAddress"), data: hex(config.callData, "callData") }]
        : prepareCalls(config.methodCalls ?? [], config.contractAddress, config.contractAbi);
    const named = (call: PreparedCall) => ({
      ...(call.methodName ? { methodName: call.methodName } : {}),
      contractAddress: call.contractAddress,
    });

    if (simulated(env, config.isSimulated)) {
      const { elements, failures } = await callAll(env.chainId, calls, env.runner, value);
      const data = elements.map(({ success, error, value: returned }, i) => ({
        ...named(calls[i]!),
        success,
        ...(error !== undefined ? { error } : {}),
        value: returned,
        isSimulated: true,
      }));
      const failure = callsFailure(failures, calls.length, data);
      if (failure) throw failure;
      return { data };
    }

    requireRunner(env);
    const outcome = await env.sendCalls!({
      chainId: env.chainId,
      calls: calls.map((call) => ({ to: call.contractAddress, data: call.data, ...(value ? { value } : {}) })),
      ...(config.gasLimit !== undefined ? { gasLimit: BigInt(config.gasLimit) } : {}),
    });
    const hashes = outcomeHashes(outcome);
    const data = calls.map((call) => ({
      ...named(call),
      success: outcome.ok,
      ...(outcome.ok ? {} : { error: outcome.error }),
      value: null,
      isSimulated: false,
      ...hashes,
    }));
    if (!outcome.ok) throw sendFailure(outcome, data);
    const gas = outcomeGas(outcome);
    return { data, ...(gas ? { gas } : {}) };
  },
};
