/**
 * contractRead (API.md §8.4.3): one `eth_call` per method call on the node's chain, concurrently. `X` = one
 * element per call `{methodName, contractAddress, success, error?, value}`; if any fails the step fails
 * (CALL_REVERTED when a contract refused, else RPC_ERROR) with `"<k> of <n> method calls failed"`, the output
 * still listing every element.
 */
import * as v from "valibot";
import { methodCallProblems } from "../support/abi";
import { callAll, callsFailure, prepareCalls } from "../support/calls";
import { defineNode, nodeShape } from "../kind";
import { AddressOrTemplate, ChainId, ContractAbi, MethodCall, list, opt, strict } from "../support/schema-kit";

const config = strict({
  contractAddress: AddressOrTemplate,
  contractAbi: ContractAbi,
  methodCalls: list(MethodCall, 1, 50, "method calls"),
  chainId: opt(ChainId),
});
type Config = v.InferOutput<typeof config>;

export const contractReadShape = nodeShape({
  type: "contractRead",
  doc: "Reads contract methods with eth_call.",
  config: () => config,
  chainAware: true,
  inLoop: true,
  writesOnChain: false,
});

export const contractRead = /* @__PURE__ */ defineNode(contractReadShape, {
  problems(config, at, add) {
    const abi = Array.isArray(config.contractAbi) ? config.contractAbi : undefined;
    methodCallProblems(Array.isArray(config.methodCalls) ? config.methodCalls : [], abi, `${at}.methodCalls`, add);
  },
  cutOff: "RPC_ERROR",
  run: async (stored: Config, env) => {
    const config = env.render(stored);
    const calls = prepareCalls(config.methodCalls, config.contractAddress, config.contractAbi);
    const { elements, failures } = await callAll(env.chainId, calls);
    const failure = callsFailure(failures, calls.length, elements);
    if (failure) throw failure;
    return { data: elements };
  },
});
