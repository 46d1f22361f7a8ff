/**
 * Method calls as contractRead, contractWrite and the event trigger's `methodCalls` make them (API.md §8.4.2,
 * §8.4.3): prepared (target, ABI-encoded call data), run with eth_call, and the step failure of those that failed.
 */
import { BaseError, decodeFunctionResult, encodeFunctionData, type AbiFunction, type Address, type Hex } from "viem";
import { address, hex, invalid } from "./inputs";
import { findFunction, outputValue, parseParams } from "./abi";
import { callFailure, chainClient, ethCall, type CallFailure } from "./chain";
import { StepFailure } from "../kind";
import type { MethodCall } from "./schema-kit";

/** A method call ready to send: target, call data, and the function (when known) to decode the result. */
export interface PreparedCall {
  methodName: string;
  contractAddress: Address;
  data: Hex;
  fn?: AbiFunction;
}

/** Expanded MethodCalls → targets and call data (ABI-encoded from `methodParams` unless `callData` is given). */
export function prepareCalls(
  calls: readonly MethodCall[],
  defaultAddress: string,
  abi: readonly unknown[] | undefined,
  field = "methodCalls",
): PreparedCall[] {
  const fallback = address(defaultAddress, "contractAddress");
  return calls.map((call, i) => {
    const at = `${field}[${i}]`;
    const contractAddress = call.contractAddress !== undefined ? address(call.contractAddress, `${at}.contractAddress`) : fallback;
    const fn = findFunction(abi, call.methodName, call.methodParams?.length ?? 0);
    if (call.callData !== undefined)
      return { methodName: call.methodName, contractAddress, data: hex(call.callData, `${at}.callData`), ...(fn ? { fn } : {}) };
    if (!fn) throw invalid(`${at}.methodName`, `names no function of contractAbi: ${call.methodName}`);
    const args = parseParams(fn, call.methodParams ?? [], `${at}.methodParams`);
    let data: Hex;
    try {
      data = encodeFunctionData({ abi: [fn], functionName: fn.name, args });
    } catch (err) {
      throw invalid(`${at}.methodParams`, `cannot be encoded: ${err instanceof BaseError ? err.shortMessage : "invalid value"}`);
    }
    return { methodName: call.methodName, contractAddress, data, fn };
  });
}

export type CallElement = { methodName?: string; contractAddress: Address; success: boolean; error?: string; value: unknown };

/** Runs prepared calls with eth_call (from `from` when set); elements and the failures among them. */
export async function callAll(chainId: number, calls: readonly PreparedCall[], from?: Address, value?: bigint) {
  const client = chainClient(chainId);
  const failures: CallFailure[] = [];
  const elements = await Promise.all(
    calls.map(async (call): Promise<CallElement> => {
      const base = { methodName: call.methodName, contractAddress: call.contractAddress };
      const result = await ethCall(client, {
        ...(from ? { from } : {}),
        to: call.contractAddress,
        data: call.data,
        ...(value ? { value } : {}),
      });
      if (!result.ok) {
        failures.push(result);
        return { ...base, success: false, error: result.message, value: null };
      }
      if (!call.fn) return { ...base, success: true, value: null };
      try {
        const decoded = decodeFunctionResult({ abi: [call.fn], functionName: call.fn.name, data: result.data });
        return { ...base, success: true, value: outputValue(call.fn, decoded) };
      } catch (err) {
        const failure = callFailure(err);
        failures.push({ code: "CALL_REVERTED", message: failure.message });
        return {
          ...base,
          success: false,
          error: failure.code === "CALL_REVERTED" ? failure.message : "the result does not decode with contractAbi",
          value: null,
        };
      }
    }),
  );
  return { elements, failures };
}

/** The step failure when some calls failed: CALL_REVERTED if any contract refused, else RPC_ERROR. */
export function callsFailure(failures: CallFailure[], total: number, data: unknown): StepFailure | undefined {
  if (!failures.length) return undefined;
  const code = failures.some((f) => f.code === "CALL_REVERTED") ? "CALL_REVERTED" : "RPC_ERROR";
  return new StepFailure(code, `${failures.length} of ${total} method calls failed`, data);
}
