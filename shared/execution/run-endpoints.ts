/**
 * Running workflows (API.md §8.8.7-§8.8.9) as declarations: the manual trigger of a stored workflow, and the
 * simulation and fee estimate of a definition that is stored nowhere. Bodies are checked by the domain
 * (shared/execution/trigger.ts, shared/workflow/definition.ts) in the contract's order; the schemas document them.
 */
import * as v from "valibot";
import { component, described, endpoint, group } from "../http/endpoint";
import { ChainId, IdempotencyHeaders, TimeMs } from "../http/schemas";
import { Execution, TriggerResult } from "./schemas";
import { STEP_ERROR_CODES } from "../kinds/kind";
import { TRIGGER_TYPES, workflowSchemas } from "../workflow/schemas";
import { FeeEstimate } from "../engine/schemas";
import { record } from "../kinds/support/schema-kit";

const schemas = workflowSchemas();

/** `POST /workflows/{id}:trigger` body (§8.8.7). */
export const TriggerBody = v.strictObject({
  triggerType: described(v.picklist(TRIGGER_TYPES), "Must equal the workflow's trigger type, else 400 `TRIGGER_TYPE_MISMATCH`."),
  triggerOutput: v.optional(
    described(
      record(v.string(), v.unknown()),
      "Replaces what the service would have observed. manual: only `data`, `headers`, `pathParams`, each defaulting to the trigger config's value. Other types: the trigger step's `output.data` verbatim. Omitted: manual uses its config; fixedTime and cron use now; block reads the latest block of its chain at run time (a failed read ends the execution `error`); event uses `null`.",
    ),
  ),
  triggerInput: v.optional(
    described(
      record(v.string(), v.unknown()),
      "Merged over `inputVariables` for this run only (top-level keys replaced). Keys follow the `inputVariables` key rules; `settings` is not allowed.",
    ),
  ),
  isBlocking: v.optional(described(v.boolean(), "Default `false`.")),
});

const WorkflowIdParams = v.object({
  id: described(v.string(), "The workflow's ULID. A malformed or unknown id answers 404 `WORKFLOW_NOT_FOUND` (after the body checks)."),
});

export const trigger = endpoint({
  method: "POST",
  path: "/workflows/{id}:trigger",
  operationId: "triggerWorkflow",
  summary: "Run a workflow now (manual trigger)",
  description: ({ limits }) =>
    `Claims one execution atomically (concurrent triggers never exceed \`maxExecution\`) and writes it \`pending\`, then runs it: asynchronously by default (202 and \`Location\` of the execution), or in the request with \`isBlocking\` (200 with the terminal result, or the current \`pending\` state after ${limits.blockingTriggerWaitMs} ms while the run continues). Order of checks: body fields (400), workflow lookup (404), \`triggerType\` (400 \`TRIGGER_TYPE_MISMATCH\`), \`triggerInput\` keys against the workflow's names (400), idempotency replay or conflict, runnable (412 \`WORKFLOW_NOT_RUNNABLE\` with \`reason\`: the \`completionReason\` of a completed workflow, \`FAILED\`, \`DISABLED\` or \`NOT_STARTED\`). A repeat under the same \`Idempotency-Key\` (same body) creates nothing and answers the same \`executionId\` in its current state, with the original's status code (waiting again when blocking), even if the workflow has since become unrunnable.`,
  idempotent: true,
  params: WorkflowIdParams,
  headers: IdempotencyHeaders,
  body: TriggerBody,
  checkedByDomain: ["params", "body"],
  responses: {
    202: {
      description: "`isBlocking` false: the execution was claimed and handed to a runner (`status` `pending`).",
      body: TriggerResult,
      headers: { Location: described(v.string(), "`/executions/{executionId}?workflowId={id}`.") },
    },
    200: {
      description: "`isBlocking` true: the terminal result, or the current state (`pending`, no `endAt`) when the wait ran out.",
      body: TriggerResult,
    },
  },
  errors: {
    400: ["VALIDATION_FAILED", "TRIGGER_TYPE_MISMATCH"],
    404: ["WORKFLOW_NOT_FOUND"],
    412: ["WORKFLOW_NOT_RUNNABLE"],
  },
});

export const simulate = endpoint({
  method: "POST",
  path: "/workflows:simulate",
  operationId: "simulateWorkflow",
  summary: "Run a workflow definition once without storing or sending anything",
  description: ({ limits }) =>
    `Validates the definition (API.md §8.7 without the create-only rules) and runs it once, synchronously: \`ethTransfer\` and \`contractWrite\` are simulated (\`eth_call\` from the runner; ethTransfer checks the balance); \`contractRead\`, \`balance\`, \`restApi\`, \`graphqlQuery\` and JavaScript nodes really run. Secrets resolve to the caller's user-scoped secrets. Past ${limits.simulateTimeoutMs} ms no further node starts and the result is \`error\` "simulation timed out". The answer is an Execution whose \`id\` and \`workflowId\` are fresh ULIDs stored nowhere, \`index\` 0; 200 whatever its status.`,
  body: schemas.SimulateBody,
  checkedByDomain: ["body"],
  responses: { 200: { description: "The simulated execution (terminal status, steps, fees).", body: Execution } },
  errors: { 400: ["VALIDATION_FAILED", "UNSUPPORTED_CHAIN", "WORKFLOW_GRAPH_INVALID", "WALLET_NOT_OWNED"] },
  notes: { 400: "`WALLET_NOT_OWNED`: `inputVariables.settings.runner` is not one of the caller's registered wallets (on any chain)." },
});

export const estimateFees = endpoint({
  method: "POST",
  path: "/workflows:estimateFees",
  operationId: "estimateWorkflowFees",
  summary: "Estimate the fees of one execution of a workflow definition",
  description:
    "Validates the definition (API.md §8.7 without the create-only rules) and estimates the fees of one execution: the execution fee, one gas cost per node that sends a user operation (estimated on its chain from the runner, fallbacks when that is impossible), the runner's creation when it is not deployed, and the value fee. `createdAt`, `expireAt` and `maxExecution` are validated but scale nothing.",
  body: schemas.EstimateFeesBody,
  checkedByDomain: ["body"],
  responses: { 200: { description: "The fee estimate, per execution.", body: FeeEstimate } },
  errors: {
    400: ["VALIDATION_FAILED", "UNSUPPORTED_CHAIN", "WORKFLOW_GRAPH_INVALID"],
    502: ["UPSTREAM_UNAVAILABLE"],
    503: ["UPSTREAM_UNAVAILABLE"],
  },
  notes: {
    502: "A chain's RPC answered a gas-price read with something invalid.",
    503: "A chain's RPC could not be reached for its gas price.",
  },
});

/** `POST /nodes:run` body (§17.2). */
const NodeRunBody = v.strictObject({
  node: described(schemas.Node, "Any node kind of §8.4 except `await`, validated by the §8.7 field rules."),
  inputVariables: v.optional(
    described(
      schemas.InputVariables,
      "Variables for templates and JavaScript: each top-level key is a variable root, as if it were an earlier node's name; `settings` as in `:simulate` (`settings.runner` required when the node sends a user operation).",
    ),
  ),
  chainId: v.optional(
    described(
      ChainId,
      "The chain for kinds that need one when the node names none; default the caller's default chain (the JWT `aud` chain, else the service default).",
    ),
  ),
});

/** API.md §21.3; decided per kind in shared/execution/execution-context.ts. */
const ExecutionContext = component(
  "ExecutionContext",
  v.pipe(
    v.object({
      is_simulated: described(
        v.boolean(),
        "`true` when the part would send something (an `ethTransfer` or `contractWrite` user operation, a loop of them) and it was simulated instead; otherwise `false`.",
      ),
      provider: described(
        v.picklist(["chain_rpc", "bundler", "sandbox", "http"]),
        "What the work went through: `chain_rpc` (contractRead, balance; block and event triggers), `bundler` (ethTransfer, contractWrite: a user operation built and simulated), `sandbox` (customCode, branch, filter; manual, cron and fixedTime triggers, computed by the service alone), `http` (restApi, graphqlQuery). A loop is its runner's kind.",
      ),
      chain_id: described(
        v.nullable(ChainId),
        "The chain used (the part's `chainId`, else the request's chain); `null` for a part that uses none.",
      ),
    }),
    v.description(
      "Whether anything was sent, what the work went through and the chain it used (snake_case, as the reference client reads it).",
    ),
  ),
);

const NodeRunResult = component(
  "NodeRunResult",
  v.object({
    success: v.boolean(),
    error: v.optional(described(v.string(), "As in a step, when `success` is false.")),
    errorCode: v.optional(v.picklist(STEP_ERROR_CODES)),
    output: described(
      v.record(v.string(), v.unknown()),
      "`{data: X}` as the node kind defines (§8.4); truncated above 256 KiB as in a step.",
    ),
    log: v.optional(described(v.string(), "As in a step.")),
    inputs: v.optional(described(v.array(v.string()), "The template paths the node resolved; never values.")),
    startAt: TimeMs,
    endAt: TimeMs,
    executionContext: ExecutionContext,
  }),
);

export const runNode = endpoint({
  method: "POST",
  path: "/nodes:run",
  operationId: "runNode",
  summary: "Run one node alone, once, without storing or sending anything",
  description: ({ limits }) =>
    `Runs the node exactly as it would run inside a workflow under \`:simulate\`: \`ethTransfer\` and \`contractWrite\` are simulated and never sent; reads, HTTP and JavaScript really run, with the same guards (private and metadata addresses refused), sandbox and execution budgets. \`{{secrets.X}}\` resolves to the caller's user-scoped secrets and is redacted everywhere. Run time is capped at ${limits.simulateTimeoutMs} ms. Nothing is stored. 200 whatever the node's outcome: the fields of its step.`,
  body: NodeRunBody,
  checkedByDomain: ["body"],
  responses: { 200: { description: "The node's outcome, as its step would record it.", body: NodeRunResult } },
  errors: { 400: ["VALIDATION_FAILED", "UNSUPPORTED_CHAIN", "WALLET_NOT_OWNED"] },
  notes: { 400: "`WALLET_NOT_OWNED`: `inputVariables.settings.runner` is not one of the caller's registered wallets (on any chain)." },
});

/** `POST /triggers:run` body (§17.3). */
const TriggerRunBody = v.strictObject({
  trigger: described(schemas.Trigger, "Validated as at create (frequency floors included)."),
  triggerInput: v.optional(
    described(
      record(v.string(), v.unknown()),
      "manual only: `data`, `headers`, `pathParams`, each overriding the config's value (as `triggerOutput` of `:trigger`).",
    ),
  ),
});

const TriggerRunResult = component(
  "TriggerRunResult",
  v.object({
    success: described(v.boolean(), "`false` only for an event trigger with no match, or when a chain read failed."),
    error: v.optional(v.string()),
    errorCode: v.optional(
      described(v.picklist(["NO_MATCH", "RPC_ERROR"]), "`NO_MATCH`: no matching log; `RPC_ERROR`: a chain read failed."),
    ),
    output: described(
      v.record(v.string(), v.unknown()),
      "The trigger output a fire would carry (§8.3.6): manual its data; block the latest block whose number is a multiple of `interval`; event the most recent matching log within the last `max_catchup_blocks` blocks (`{data: null}` when none); fixedTime and cron the next fire after now.",
    ),
    nextFires: v.optional(described(v.array(TimeMs), "fixedTime and cron: the next fire instants after now (at most 5).")),
    executionContext: ExecutionContext,
  }),
);

export const runTrigger = endpoint({
  method: "POST",
  path: "/triggers:run",
  operationId: "runTrigger",
  summary: "Show what a trigger would produce, from real data, storing nothing",
  description: ({ limits }) =>
    `Validates the trigger as at create, then answers the output a fire would carry. Block: the latest block whose number is a multiple of \`interval\`. Event: the most recent log matching a query (conditions and \`methodCalls\` applied) within the last ${limits.maxCatchupBlocks} blocks, asked in bounded \`eth_getLogs\` requests from the head back, newest first. fixedTime and cron: the next fire after now and \`nextFires\`. Manual: its data, \`triggerInput\` overriding. 200 whatever the outcome.`,
  body: TriggerRunBody,
  checkedByDomain: ["body"],
  responses: { 200: { description: "What the trigger would produce.", body: TriggerRunResult } },
  errors: { 400: ["VALIDATION_FAILED", "UNSUPPORTED_CHAIN", "TRIGGER_TOO_FREQUENT"] },
});

export const runContract = group({
  name: "Workflow runs",
  description:
    "Running a stored workflow by hand, simulating or pricing a definition without storing it, and running one node or one trigger alone.",
  codes: {
    WORKFLOW_NOT_FOUND: { meaning: "Workflow unknown, malformed id, deleted, or another owner's." },
    TRIGGER_TYPE_MISMATCH: { meaning: "`triggerType` differs from the workflow's trigger type.", fields: true },
    WORKFLOW_NOT_RUNNABLE: {
      meaning:
        "The workflow is expired, at `maxExecution`, failed, disabled or not yet started; `reason` is `EXPIRED`, `MAX_EXECUTIONS_REACHED`, `FAILED`, `DISABLED` or `NOT_STARTED`.",
      example: () => ({ reason: "DISABLED" }),
    },
    WORKFLOW_GRAPH_INVALID: {
      meaning:
        "Edges naming unknown ids, plain edge out of a branch, duplicate edge, cycle (named), unreachable node, template naming a non-ancestor node.",
      fields: true,
    },
    WALLET_NOT_OWNED: { meaning: "`inputVariables.settings.runner` is not a wallet the caller registered." },
    TRIGGER_TOO_FREQUENT: { meaning: "Cron fires closer together than the floor, or a block period under the floor.", fields: true },
  },
  endpoints: [trigger, simulate, estimateFees, runNode, runTrigger],
});
