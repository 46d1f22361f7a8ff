/**
 * The shapes of a workflow definition (API.md §8.1, §8.3-§8.5, §8.8.1, §8.8.8, §8.8.9) as valibot schemas: one
 * definition of each shape for request validation, the stored document, the engine's types and the OpenAPI
 * document (they convert with @valibot/to-json-schema: regexes come before transforms, and what a schema
 * cannot say is in `description`).
 *
 * Scope: field shapes and formats (§8.7 item 1). Rules that relate several fields (ids unique, ABI lookups,
 * branch condition order...) are in definition.ts and the kinds, reported together with these.
 *
 * Conventions of the contract applied here:
 * - Unknown members are rejected (strict objects) except in free-form objects: `inputVariables`, manual `data`,
 *   `triggerOutput`, ABI items, restApi `options` and the compatibility members of balance.
 * - An optional member sent as `null` is treated as absent (§1.3), and absent members with a default are
 *   filled in (the stored document carries the defaults, §8.1).
 * - Templated fields of node configs: a string containing `{{` is a template and must use paths only (§8.6);
 *   any other string is checked as the literal it stands for (Address, Uint256, Hex, URL). Addresses are
 *   returned in EIP-55 form, templates as sent. Trigger configs are never templated.
 *
 * This module builds the definition's schemas around the kinds' (shared/kinds: each trigger and node kind
 * declares its config schema, its registry builds the Trigger and Node unions) from the pieces they share
 * (shared/kinds/support/schema-kit.ts).
 */
import * as v from "valibot";
import { UlidString } from "../http/validate";
import { AddressString } from "../http/address-schemas";
import { shapes as defaultShapes, type Node, type Trigger, type TriggerType } from "../kinds/shapes";
import type { Shapes } from "../kinds/registry";
import { manualData } from "../kinds/triggers/manual";
import {
  type DefinitionLimits,
  DEFAULT_LIMITS,
  record,
  ID_PATTERN,
  IdString,
  TimeMs,
  ChainId,
  strict,
  opt,
  int,
  str,
  stringMap,
  IDENTIFIER_PATTERN,
} from "../kinds/support/schema-kit";

/** Names that `inputVariables` keys may not take (§8.7 item 3); trigger and node names are checked too. */
export const RESERVED_INPUT_KEYS = ["secrets", "apContext", "context", "date", "value", "index"] as const;
export const WORKFLOW_STATUSES = ["enabled", "disabled", "completed", "failed"] as const;
export const COMPLETION_REASONS = ["MAX_EXECUTIONS_REACHED", "EXPIRED", "CONSECUTIVE_ERRORS"] as const;
/** The trigger types of the service's kinds (shared/kinds/kinds.ts), in order. */
export const TRIGGER_TYPES = defaultShapes.triggerTypes as readonly TriggerType[];

// ---------------------------------------------------------------------------------------------------------
// The schemas that depend on the limits (and on the registry of kinds)

/** Every schema of a definition for the given limits and kinds (cached per distinct limits and registry). */
export function workflowSchemas(limits: DefinitionLimits = DEFAULT_LIMITS, kinds: Shapes = defaultShapes) {
  const key = `${limits.maxManualDataBytes}/${limits.maxSourceBytes}/${limits.maxNodes}/${limits.maxEdges}/${limits.defaultMaxExecution}`;
  let byLimits = cache.get(kinds);
  if (!byLimits) cache.set(kinds, (byLimits = new Map()));
  let schemas = byLimits.get(key);
  if (!schemas) {
    schemas = build(limits, kinds);
    byLimits.set(key, schemas);
  }
  return schemas;
}
const cache = new WeakMap<Shapes, Map<string, ReturnType<typeof build>>>();

function build(limits: DefinitionLimits, kinds: Shapes) {
  const { nodeOptions, triggerOptions, LoopRunner } = kinds.schemas(limits);
  // Typed as the service's kinds' union (another registry's extra kinds are checked alike at run time).
  const Node = kinds.schemas(limits).Node as v.GenericSchema<unknown, Node>;
  const Trigger = kinds.schemas(limits).Trigger as v.GenericSchema<unknown, Trigger>;
  const Edge = edgeSchema();
  const InputVariables = inputVariablesSchema();
  const parts = { Node, Trigger, Edge, InputVariables };
  return {
    nodeOptions,
    triggerOptions,
    Trigger,
    LoopRunner,
    Node,
    Edge,
    InputVariables,
    ...requestBodies(limits, parts),
    Workflow: workflowSchema(parts),
  };
}

/** The schemas a definition is made of: its trigger, nodes, edges and input variables. */
interface Parts {
  Node: v.GenericSchema<unknown, Node>;
  Trigger: v.GenericSchema<unknown, Trigger>;
  Edge: ReturnType<typeof edgeSchema>;
  InputVariables: ReturnType<typeof inputVariablesSchema>;
}

// Edges (§8.5) -----------------------------------------------------------------------------------------
function edgeSchema() {
  return strict(
    {
      id: IdString,
      source: v.pipe(
        str(),
        v.regex(/^[A-Za-z0-9_-]{1,64}(?:\.[A-Za-z0-9_-]{1,64})?$/, "must be a trigger or node id, or <branchNodeId>.<conditionId>"),
      ),
      target: v.pipe(str(), v.regex(ID_PATTERN, "must be a node id")),
    },
    "Edge. Ids unique among edges; `source` names the trigger, a node that is not a branch, or `<branchNodeId>.<conditionId>`; `target` names a node other than the source node.",
  );
}

// Bodies (§8.8.1, §8.8.8, §8.8.9) ------------------------------------------------------------------------
function inputVariablesSchema() {
  return v.pipe(
    record(
      v.pipe(
        str(),
        v.regex(IDENTIFIER_PATTERN, "must be an identifier"),
        v.notValues(RESERVED_INPUT_KEYS, `must not be one of ${RESERVED_INPUT_KEYS.join(", ")}`),
      ),
      v.unknown(),
    ),
    v.description(
      "Free-form. Keys are identifiers, not trigger or node names and not secrets, apContext, context, date, value or index; `settings`, if present, is an object. The service writes `settings.runner` and `settings.chainId`.",
    ),
  );
}

/** The members every body that carries a definition shares: chainId, trigger, nodes and edges within the limits. */
function definitionEntries(limits: DefinitionLimits, { Node, Trigger, Edge }: Parts) {
  const nodes = v.pipe(
    v.array(Node, "must be an array"),
    v.minLength(1, "must have at least 1 node"),
    v.maxLength(limits.maxNodes, `must have at most ${limits.maxNodes} nodes`),
  );
  const edges = v.pipe(v.array(Edge, "must be an array"), v.maxLength(limits.maxEdges, `must have at most ${limits.maxEdges} edges`));
  return {
    chainId: opt(ChainId),
    trigger: Trigger,
    nodes,
    edges: opt(
      v.pipe(
        edges,
        v.description(
          "Optional: omitted or [] means trigger → nodes[0] → nodes[1] → … (edge ids _e0, _e1, …); not allowed with branch nodes.",
        ),
      ),
    ),
  };
}

/** The request bodies that carry a definition (create, simulate, estimate fees) and the trigger outputs they take. */
function requestBodies(limits: DefinitionLimits, parts: Parts) {
  const { InputVariables } = parts;
  const entries = definitionEntries(limits, parts);
  const MaxExecution = int(1);
  const CreateBody = strict({
    name: opt(v.pipe(str(), v.minLength(1, "must be 1-255 characters"), v.maxLength(255, "must be 1-255 characters"))),
    smartWalletAddress: AddressString,
    ...entries,
    inputVariables: opt(InputVariables),
    startAt: opt(TimeMs),
    expiredAt: opt(v.pipe(TimeMs, v.description("After now and after `startAt`."))),
    maxExecution: opt(
      v.pipe(MaxExecution, v.description(`At least 1; default ${limits.defaultMaxExecution}.`)),
      limits.defaultMaxExecution,
    ),
  });
  const TriggerOutput = v.pipe(
    record(str(), v.unknown()),
    v.description(
      "For manual only `data`, `headers` and `pathParams` (each defaulting to the trigger config's value); other types: the trigger step's `output.data`.",
    ),
  );
  const SimulateBody = strict({
    ...entries,
    inputVariables: v.pipe(
      InputVariables,
      v.description("Required (may be {}). `settings.runner` is required when a node sends a user operation."),
    ),
    triggerOutput: opt(TriggerOutput),
  });
  const EstimateFeesBody = strict({
    ...entries,
    runner: opt(v.pipe(AddressString, v.description("Overrides `inputVariables.settings.runner`; any address."))),
    createdAt: TimeMs,
    expireAt: v.pipe(TimeMs, v.description("After `createdAt`.")),
    maxExecution: MaxExecution,
    inputVariables: opt(InputVariables),
  });
  const ManualTriggerOutput = strict({
    data: opt(manualData(limits)),
    headers: opt(stringMap(str("must be a string"), 50)),
    pathParams: opt(stringMap(str("must be a string"), 50)),
  });
  return { CreateBody, SimulateBody, EstimateFeesBody, TriggerOutput, ManualTriggerOutput };
}

// The Workflow object (§8.1), as returned -----------------------------------------------------------------
function workflowSchema({ Node, Trigger, Edge }: Parts) {
  return v.object({
    id: UlidString,
    name: v.optional(str()),
    owner: AddressString,
    smartWalletAddress: AddressString,
    chainId: ChainId,
    trigger: Trigger,
    nodes: v.array(Node),
    edges: v.array(Edge),
    inputVariables: record(str(), v.unknown()),
    status: v.picklist(WORKFLOW_STATUSES),
    startAt: v.optional(TimeMs),
    expiredAt: v.optional(TimeMs),
    maxExecution: int(1),
    executionCount: int(0),
    remainingExecutions: int(0),
    completionReason: v.optional(v.picklist(COMPLETION_REASONS)),
    lastRanAt: v.optional(TimeMs),
    createdAt: TimeMs,
    completedAt: v.optional(TimeMs),
  });
}

// ---------------------------------------------------------------------------------------------------------
// Types (outputs: defaults filled in, addresses EIP-55, null members dropped)

type WorkflowSchemas = ReturnType<typeof build>;
type Out<K extends keyof WorkflowSchemas> = WorkflowSchemas[K] extends v.GenericSchema ? v.InferOutput<WorkflowSchemas[K]> : never;
export type Edge = Out<"Edge">;
export type Workflow = Out<"Workflow">;
