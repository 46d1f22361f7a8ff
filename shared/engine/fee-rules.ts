/**
 * The fee rules a claim needs (API.md §9.6), apart from the estimate: the execution fee and the value fee's tier.
 * Only the kinds' shapes are needed to classify nodes, so a function that claims executions (the sweeper, the
 * schedule target) bundles no runner and no chain client for it.
 */
import { shapes as defaultShapes } from "../kinds/shapes";
import type { Shapes } from "../kinds/registry";
import type { Fee, ValueFee } from "./schemas";
import { useConfig } from "../current-runtime";

/** `{amount: execution_fee_usd, unit: "USD"}`. */
export function executionFee(): Fee {
  return { amount: useConfig().fees.executionFeeUsd, unit: "USD" };
}

/** The rule of API.md §9.6: tier1 when the workflow has a value-moving node (a kind that writes on-chain, or a loop of one). */
export function valueFeeFor(
  nodes: readonly { type: string; config: unknown }[],
  kinds: Pick<Shapes, "sendsUserOperation"> = defaultShapes,
): ValueFee {
  if (nodes.some((node) => kinds.sendsUserOperation(node))) {
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
