/**
 * What ethTransfer and contractWrite share: whether the write is only simulated, the runner wallet, and
 * turning a SendOutcome into hashes, gas and a step failure with the sender's errorCode.
 */
import type { Address } from "viem";
import type { SendOutcome } from "../../wallet/send";
import { StepFailure, type Gas, type NodeEnv } from "../kind";

/** Simulated: inside `:simulate`, or when the run has no sender. */
export const simulated = (env: NodeEnv, isSimulated = false): boolean => isSimulated || env.mode === "simulate" || !env.sendCalls;

export function requireRunner(env: NodeEnv): Address {
  if (!env.runner) throw new StepFailure("INVALID_INPUT", "the workflow has no runner wallet (inputVariables.settings.runner)");
  return env.runner;
}

/** Hashes (and block) of an outcome, as output members; absent ones omitted. */
export function outcomeHashes(outcome: SendOutcome): { userOpHash?: string; transactionHash?: string; blockNumber?: number } {
  return {
    ...(outcome.userOpHash ? { userOpHash: outcome.userOpHash } : {}),
    ...(outcome.transactionHash ? { transactionHash: outcome.transactionHash } : {}),
    ...(outcome.blockNumber !== undefined ? { blockNumber: Number(outcome.blockNumber) } : {}),
  };
}

export function outcomeGas(outcome: SendOutcome): Gas | undefined {
  if (outcome.gasUsed === undefined || outcome.totalGasCost === undefined) return undefined;
  return { gasUsed: outcome.gasUsed, totalGasCost: outcome.totalGasCost };
}

/** The step failure of a failed send, carrying the output built so far and the gas the operation used. */
export const sendFailure = (outcome: Extract<SendOutcome, { ok: false }>, data: unknown) =>
  new StepFailure(outcome.errorCode, outcome.error, data, outcomeGas(outcome));
