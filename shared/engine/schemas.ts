/**
 * The shapes a run produces (API.md §9, §10): execution statuses, step error codes, fees and costs, and the
 * step. The engine (which produces them) and the execution records, routes and OpenAPI document (which record
 * and answer them, through ../execution/schemas.ts) share them. No I/O, no chain code.
 */
import * as v from "valibot";
import { component, described } from "../http/endpoint";
import { ChainId, TimeMs, Uint256 } from "../http/schemas";
import { STEP_ERROR_CODES } from "../kinds/kind";

export const EXECUTION_STATUSES = ["pending", "success", "failed", "error", "waiting"] as const;
export type ExecutionStatus = (typeof EXECUTION_STATUSES)[number];
export const isTerminal = (status: ExecutionStatus) => status !== "pending" && status !== "waiting";

/** Step `errorCode` values (API.md §10.2), declared with the kinds that fail with them. */

// ---------------------------------------------------------------------------------------------------------
// Fees (§9)

export const Fee = component(
  "Fee",
  v.object({
    amount: described(
      v.pipe(v.string(), v.regex(/^(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$/)),
      'Decimal in its shortest form (`"0.02"`, `"0"`, `"2100000000000000"`).',
    ),
    unit: v.picklist(["USD", "WEI", "PERCENTAGE"]),
  }),
);
export type Fee = v.InferOutput<typeof Fee>;

export const Cost = component(
  "CostElement",
  v.object({
    nodeId: described(v.string(), 'The node id, or `"_wallet_creation"` for deploying the runner.'),
    costType: v.picklist(["gas", "externalApi", "walletCreation"]),
    fee: described(Fee, "Unit `WEI`, in the native token of `chainId`."),
    gasUnits: described(Uint256, "Gas units behind `fee`."),
    chainId: described(ChainId, "Chain the cost is paid on."),
  }),
);
export type Cost = v.InferOutput<typeof Cost>;

export const ValueFee = component(
  "ValueFee",
  v.object({
    fee: described(Fee, "Unit `PERCENTAGE`."),
    tier: v.picklist(["unspecified", "tier1", "tier2", "tier3"]),
    valueBase: v.optional(described(v.literal("input_token_value"), "When the tier is not `unspecified`.")),
    classificationMethod: v.picklist(["ruleBased", "llm"]),
    confidence: v.pipe(v.number(), v.minValue(0), v.maxValue(1)),
    reason: v.string(),
  }),
);
export type ValueFee = v.InferOutput<typeof ValueFee>;

export const FeeEstimate = component(
  "FeeEstimate",
  v.object({
    chainId: ChainId,
    nativeToken: v.object({ symbol: v.string(), decimals: v.pipe(v.number(), v.integer()) }),
    executionFee: Fee,
    cogs: v.array(Cost),
    valueFee: ValueFee,
    discounts: described(v.array(v.unknown()), "Always `[]` in this version."),
    pricingModel: v.literal("tiered_value_v1"),
  }),
);
export type FeeEstimate = v.InferOutput<typeof FeeEstimate>;

// ---------------------------------------------------------------------------------------------------------
// Steps and executions (§10)

export const Step = component(
  "Step",
  v.object({
    id: described(v.string(), "Trigger or node id."),
    type: described(v.string(), "The trigger type (`manual`, `cron`...) or node type (`restApi`...)."),
    name: v.string(),
    success: described(v.boolean(), "Always `true` for the trigger step."),
    error: v.optional(v.string()),
    errorCode: v.optional(v.picklist(STEP_ERROR_CODES)),
    log: v.optional(described(v.string(), "customCode console output; at most 64 KiB (truncated with a final `…[truncated]`).")),
    inputs: v.optional(described(v.array(v.string()), "The template paths this step resolved; never values.")),
    config: v.optional(described(v.record(v.string(), v.unknown()), "The config as stored, templates unexpanded.")),
    output: described(
      v.record(v.string(), v.unknown()),
      "§8.3.6 for the trigger, `{data: X}` for nodes; `{data: null, truncated: true, originalSize}` when over 256 KiB serialized.",
    ),
    startAt: TimeMs,
    endAt: TimeMs,
    gasUsed: v.optional(Uint256),
    gasPrice: v.optional(Uint256),
    totalGasCost: v.optional(Uint256),
  }),
);
export type Step = v.InferOutput<typeof Step>;
