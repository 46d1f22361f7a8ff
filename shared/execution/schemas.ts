/**
 * The shapes of executions (API.md §10): written once here and shared by the execution store and routes (which
 * record and answer them), the trigger, simulate and estimateFees routes, and the OpenAPI document. What a run
 * produces (statuses, step error codes, fees, costs, steps) is declared by the engine (shared/engine/schemas.ts),
 * imported from there. No I/O, no chain code.
 */
import * as v from "valibot";
import { component, described } from "../http/endpoint";
import { ChainId, TimeMs, Ulid } from "../http/schemas";
import { page } from "../http/paging";
import { EXECUTION_STATUSES, Cost, Fee, Step, ValueFee } from "../engine/schemas";

export const Status = v.picklist(EXECUTION_STATUSES, "must be pending, success, failed, error or waiting");

/** The kinds of wait `waitingFor` shows (API.md §17.1.2); an internal wait (a timer) is not shown. */
export const SHOWN_WAIT_KINDS = ["signal", "chainEvent"] as const;

/** One open wait of an `await` node (API.md §17.1.2). */
const WaitingFor = described(
  v.array(
    component(
      "WaitingFor",
      v.object({
        nodeId: v.string(),
        name: v.string(),
        kind: v.picklist(SHOWN_WAIT_KINDS),
        since: described(TimeMs, "When the wait began."),
        deadline: described(TimeMs, "`since` + `timeoutSeconds` × 1000: the wait ends AWAIT_TIMEOUT then (at most 60 s later)."),
        prompt: v.optional(v.string()),
        approvers: v.optional(described(v.array(v.string()), "signal waits: who may signal besides the owner (EIP-55).")),
      }),
    ),
  ),
  "One element per open wait, in node order; absent when no wait is open.",
);

export const Execution = component(
  "Execution",
  v.object({
    id: Ulid,
    workflowId: Ulid,
    chainId: described(ChainId, "The workflow chain at run time."),
    index: described(v.pipe(v.number(), v.integer(), v.minValue(0)), "0-based claim order within the workflow."),
    startAt: described(TimeMs, "Claim time."),
    endAt: v.optional(described(TimeMs, "Present exactly when the status is terminal.")),
    status: Status,
    error: v.optional(described(v.string(), "Present when status is `failed` or `error`.")),
    waitingFor: v.optional(WaitingFor),
    steps: described(
      v.array(Step),
      "The trigger step first, then one step per executed node, ordered by `startAt` (ties by position in `nodes`).",
    ),
    executionFee: Fee,
    cogs: v.array(Cost),
    valueFee: ValueFee,
  }),
);
export type Execution = v.InferOutput<typeof Execution>;

export const ExecutionPage = page("ExecutionPage", Execution);

/** Where an execution stands: its status, start, end once terminal and error when it failed. */
const outcome = { status: Status, startAt: TimeMs, endAt: v.optional(TimeMs), error: v.optional(v.string()) };

export const StatusSummary = component(
  "ExecutionStatusSummary",
  v.object({ id: Ulid, workflowId: Ulid, ...outcome, waitingFor: v.optional(WaitingFor) }),
);
export type StatusSummary = v.InferOutput<typeof StatusSummary>;

export const Stats = component(
  "ExecutionStats",
  v.object({
    total: v.pipe(v.number(), v.integer()),
    succeeded: v.pipe(v.number(), v.integer()),
    failed: described(v.pipe(v.number(), v.integer()), "Status `failed` or `error`."),
    pending: v.pipe(v.number(), v.integer()),
    waiting: described(v.pipe(v.number(), v.integer()), "Status `waiting` (API.md §17.1)."),
    avgExecutionTime: v.optional(
      described(v.pipe(v.number(), v.integer()), "Milliseconds; mean of `endAt − startAt` over terminal executions in the window."),
    ),
  }),
);
export type Stats = v.InferOutput<typeof Stats>;

/** The answer of `POST /workflows/{id}:trigger` (§8.8.7). */
export const TriggerResult = component("TriggerResult", v.object({ executionId: Ulid, ...outcome }));
export type TriggerResult = v.InferOutput<typeof TriggerResult>;
