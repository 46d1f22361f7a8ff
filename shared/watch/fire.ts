/** Firing: one automatic fire's claim and hand-over, and the `methodCalls` of an event fire's output. */
import type { Hex } from "viem";
import { ApiError } from "../errors";
import { callAll, prepareCalls } from "../kinds/support/calls";
import { claimExecution, handOver } from "../execution/claim";
import { useRuntime } from "../current-runtime";
import { DuplicateFire } from "../workflow/claim";
import type { EventQuery } from "../kinds/support/event-query";

/** Fire records outlive any re-processing of their block. */
const FIRE_RECORD_TTL_S = 7 * 24 * 3600;

/** `methodCalls` against the log's contract: contractRead output elements (§8.4.3), failures included. */
export async function methodResults(chainId: number, query: EventQuery, contract: Hex): Promise<unknown[]> {
  const calls = query.methodCalls ?? [];
  try {
    const prepared = prepareCalls(calls, contract, query.contractAbi);
    return (await callAll(chainId, prepared)).elements;
  } catch (err) {
    return calls.map((c) => ({
      methodName: c.methodName,
      contractAddress: c.contractAddress ?? contract,
      success: false,
      error: (err as Error).message,
      value: null,
    }));
  }
}

export type FireOutcome = { kind: "fired"; executionId: string } | { kind: "duplicate" } | { kind: "stopped"; reason: string };

/**
 * Claims the execution of one automatic fire (its trigger step's `output` given) with `fireId` as the claim's intent
 * (its fire record, put conditionally before the workflow's count is taken), then publishes it for a runner. A fire
 * already claimed → `duplicate`; a workflow deleted or not runnable → `stopped` with the reason (WORKFLOW_NOT_FOUND
 * or the §8.8.7 reason).
 */
export async function fireExecution(workflowId: string, fireId: string, output: Record<string, unknown>): Promise<FireOutcome> {
  const now = useRuntime().now();
  let executionId: string;
  try {
    executionId = await claimExecution(workflowId, {
      now,
      fire: { fireId, expiresAt: Math.floor(now / 1000) + FIRE_RECORD_TTL_S },
      stepOutput: output,
      runInput: { triggerOutput: output },
    });
  } catch (err) {
    if (err instanceof DuplicateFire) return { kind: "duplicate" };
    if (err instanceof ApiError && (err.status === 404 || err.status === 412))
      return { kind: "stopped", reason: err.extra.reason ?? err.code };
    throw err;
  }
  await handOver(workflowId, executionId);
  return { kind: "fired", executionId };
}
