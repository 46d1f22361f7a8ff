/**
 * contractWrite (API.md §8.4.2): the calls (raw `callData`, or `methodCalls` ABI-encoded from their typed
 * params) sent as ONE user operation from the runner; several calls are batched (all succeed or all revert).
 * Simulated (`isSimulated`, or inside `:simulate`): each call is an `eth_call` from the runner and nothing is
 * sent. `X` = one element per call `{methodName?, contractAddress, success, error?, value, isSimulated,
 * userOpHash?, transactionHash?, blockNumber?}`; `value` is the decoded return value of a simulated call.
 */
import * as v from "valibot";
import { encodeFunctionData, getAddress, isAddress, type Hex } from "viem";
import { hasTemplate } from "../../templates";
import { address, hex, wei } from "../support/inputs";
import { callAll, callsFailure, prepareCalls, type PreparedCall } from "../support/calls";
import { defineNode, nodeShape, type Raw } from "../kind";
import { outcomeGas, outcomeHashes, requireRunner, sendFailure, simulated } from "../support/send";
import { findFunction, methodCallProblems, parseParams } from "../support/abi";
import {
  AddressOrTemplate,
  ChainId,
  ContractAbi,
  HexOrTemplate,
  MethodCall,
  Uint256OrTemplate,
  bool,
  list,
  opt,
  strict,
} from "../support/schema-kit";
import type { AccountCall } from "../../chain/userop-account";
import { Uint256String } from "../../http/validate";

const config = strict(
  {
    contractAddress: AddressOrTemplate,
    callData: opt(HexOrTemplate),
    methodCalls: opt(list(MethodCall, 1, 20, "method calls")),
    contractAbi: opt(ContractAbi),
    value: opt(Uint256OrTemplate),
    gasLimit: opt(Uint256String),
    isSimulated: opt(bool(), false),
    chainId: opt(ChainId),
  },
  'contractWrite. Exactly one of `callData` and `methodCalls`; `contractAbi` required when a method call has no `callData`; `value` (default "0") only with `callData` or a single method call.',
);
type Config = v.InferOutput<typeof config>;

const present = (x: unknown) => x !== undefined && x !== null;

function problems(config: Raw, at: string, add: (path: string, message: string) => void) {
  const calls = Array.isArray(config.methodCalls) ? config.methodCalls : undefined;
  if (present(config.callData) && calls) add(`${at}.methodCalls`, "must be absent when callData is given (one or the other)");
  if (!present(config.callData) && !calls) add(at, "must set callData or methodCalls");
  const abi = Array.isArray(config.contractAbi) ? config.contractAbi : undefined;
  if (!abi && calls?.some((call) => typeof call === "object" && call !== null && !present((call as Raw).callData))) {
    add(`${at}.contractAbi`, "is required when a method call has no callData");
  }
  if (present(config.value) && calls && calls.length > 1) add(`${at}.value`, "is allowed only with callData or a single method call");
  methodCallProblems(calls ?? [], abi, `${at}.methodCalls`, add);
}

const literal = (value: string | undefined): value is string => value !== undefined && !hasTemplate(value);

/** The calls of the write when every input is literal (for the fee estimate), else undefined. */
function literalCalls(config: Config): AccountCall[] | undefined {
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
    const data = literalCallData(call, config.contractAbi);
    if (!literal(to) || !isAddress(to) || data === undefined) return undefined;
    calls.push({ to: getAddress(to), data });
  }
  if (calls.length === 0) return undefined;
  if (calls.length === 1) calls[0]!.value = BigInt(value);
  return calls;
}

/** A method call's data when it is literal: its callData, or the ABI encoding of its parameters. */
function literalCallData(call: MethodCall, abi: readonly unknown[] | undefined): Hex | undefined {
  if (call.callData !== undefined) return literal(call.callData) ? (call.callData as Hex) : undefined;
  const params = call.methodParams ?? [];
  if (!abi || params.some(hasTemplate)) return undefined;
  const fn = findFunction(abi, call.methodName, params.length);
  if (!fn) return undefined;
  try {
    return encodeFunctionData({ abi: [fn], functionName: fn.name, args: parseParams(fn, params, "methodParams") });
  } catch {
    return undefined;
  }
}

export const contractWriteShape = nodeShape({
  type: "contractWrite",
  doc: "Calls contract methods from the runner wallet in one user operation (or simulates them).",
  config: () => config,
  chainAware: true,
  inLoop: true,
  writesOnChain: true,
});

export const contractWrite = /* @__PURE__ */ defineNode(contractWriteShape, {
  problems,
  normalise(config) {
    if (config.value !== undefined) return config;
    return config.callData !== undefined || config.methodCalls?.length === 1 ? { ...config, value: "0" } : config;
  },
  cutOff: "RPC_ERROR",
  fallbackGas: 150_000n,
  fee: (config) => (config.isSimulated ? undefined : { fallbackGas: 150_000n, calls: literalCalls(config), chainConfig: config }),
  run: async (stored: Config, env) => {
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
});
