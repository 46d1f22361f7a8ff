/**
 * Validating a workflow definition (API.md §8.7) for create, simulate and estimateFees, and normalising it into
 * what is stored and run: defaults filled in, the chain edges generated, the trigger id assigned, `settings`
 * written, addresses in EIP-55 form, plus the compiled graph for the engine.
 *
 * Pure: no I/O, no chain code, no global config; the route passes `now`, the limits and the chains.
 *
 * Items of §8.7 and where they are checked:
 *   1-4  shapes (schemas.ts) and the rules across fields (field-rules.ts): one 400 VALIDATION_FAILED listing every
 *        problem
 *   5    non-zero chain ids are configured (chain-rules.ts): 400 UNSUPPORTED_CHAIN
 *   6    graph rules (graph.ts): 400 WORKFLOW_GRAPH_INVALID
 *   7    (create) frequency floors of cron and block triggers (chain-rules.ts): 400 TRIGGER_TOO_FREQUENT
 *   8-10 need I/O and belong to the route, after `validateDefinition` returns, in this order:
 *        8  (create) the stored document (canonical JSON, UTF-8) is at most `max_workflow_bytes` → 413 PAYLOAD_TOO_LARGE
 *        9  (create) `smartWalletAddress` is a wallet the caller registered, else 400 WALLET_NOT_OWNED
 *           (simulate: the same check on `definition.runner` when set)
 *        10 (create) the caller's active workflows are under the cap → 429 WORKFLOWS_LIMIT_REACHED
 */
import * as v from "valibot";
import { ulid } from "ulid";
import { validationFailed, type FieldError } from "../errors";
import { fieldErrors } from "../http/validate";
import { checkGraph, chainEdges, compileGraph } from "./graph";
import { workflowSchemas, type Edge } from "./schemas";
import type {
  Mode,
  ValidateOptions,
  Settings,
  Definition,
  CreateDefinition,
  SimulateDefinition,
  EstimateFeesDefinition,
  DefinitionFor,
  ValidatedDefinition,
} from "./definition-types";
import { address, crossFieldProblems } from "./field-rules";
import { kinds as defaultKinds } from "../kinds/kinds";
import { type Registry } from "../kinds/registry";
import { unsupportedChains, frequencyProblems } from "./chain-rules";
import { type DefinitionLimits } from "../kinds/support/schema-kit";
import { type Node, type Trigger } from "../kinds/shapes";

/**
 * §8.7 items 1-7 in order; throws ApiError (400 VALIDATION_FAILED, UNSUPPORTED_CHAIN, WORKFLOW_GRAPH_INVALID,
 * TRIGGER_TOO_FREQUENT) with FieldErrors whose paths start with `body.`. `input` is the parsed JSON body; an
 * optional member sent as `null` counts as absent at every level (API.md §1.3), so the HTTP layer's dropping of
 * top-level nulls is not needed here.
 */
export function validateDefinition<M extends Mode>(input: unknown, options: ValidateOptions<M>): ValidatedDefinition<M> {
  const { mode, limits } = options;
  const kinds = options.kinds ?? defaultKinds;
  const schemas = workflowSchemas(limits, kinds);
  const schema = mode === "create" ? schemas.CreateBody : mode === "simulate" ? schemas.SimulateBody : schemas.EstimateFeesBody;

  // Items 1-4: every problem together.
  const parsed = v.safeParse(schema, input, { abortEarly: false });
  const errors: FieldError[] = parsed.success ? [] : fieldErrors(parsed.issues, "body");
  errors.push(...crossFieldProblems(input, options));
  if (errors.length || !parsed.success) throw validationFailed(dedupe(errors));

  const body = parsed.output as Record<string, unknown>;
  const definition = normalise(body, options);

  // Item 5.
  const chainProblems = unsupportedChains(definition, options.chains, kinds);
  if (chainProblems.length) throw validationFailed(chainProblems, "UNSUPPORTED_CHAIN");

  // Item 6.
  const graphProblems = graphRules(definition, body.edges as Edge[] | undefined, kinds);
  if (graphProblems.length) throw validationFailed(graphProblems, "WORKFLOW_GRAPH_INVALID");
  const graph = compileGraph(definition);

  // Item 7.
  if (mode === "create") {
    const floor = frequencyProblems(definition, options);
    if (floor.length) throw validationFailed(floor, "TRIGGER_TOO_FREQUENT");
  }
  return { definition: definition as DefinitionFor<M>, graph };
}

function dedupe(errors: FieldError[]): FieldError[] {
  const seen = new Set<string>();
  return errors.filter((e) => {
    const key = `${e.path}\u0000${e.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

// ---------------------------------------------------------------------------------------------------------
// Normalising (after items 1-4 passed)

function normalise(body: Record<string, unknown>, options: ValidateOptions<Mode>): Definition {
  const chainId = (body.chainId as number | undefined) || options.defaultChainId;
  const trigger = body.trigger as Trigger;
  const withId = { id: trigger.id ?? options.newId?.() ?? ulid(options.now), ...trigger } as Trigger & { id: string };
  const kinds = options.kinds ?? defaultKinds;
  const nodes = (body.nodes as Node[]).map((node) => normaliseNode(node, kinds));
  const sentEdges = body.edges as Edge[] | undefined;
  // With a branch node the generated chain is refused by the graph rules (item 6), which see that edges were omitted.
  const edges = sentEdges?.length ? sentEdges : chainEdges(withId.id, nodes);

  const inputVariables = { ...((body.inputVariables as Record<string, unknown> | undefined) ?? {}) };
  const sent = (inputVariables.settings as Record<string, unknown> | undefined) ?? {};
  let runner: string | undefined;
  if (options.mode === "create") runner = body.smartWalletAddress as string;
  else if (options.mode === "estimateFees") runner = (body.runner as string | undefined) ?? address(sent.runner);
  else runner = address(sent.runner);
  const settings: Settings = { ...sent, ...(runner ? { runner } : {}), chainId };
  inputVariables.settings = settings;

  const common: Definition = { chainId, trigger: withId, nodes, edges, inputVariables: inputVariables as Definition["inputVariables"] };
  if (options.mode === "create") {
    const out: CreateDefinition = {
      ...(body.name !== undefined ? { name: body.name as string } : {}),
      smartWalletAddress: body.smartWalletAddress as string,
      ...common,
      ...(body.startAt !== undefined ? { startAt: body.startAt as number } : {}),
      ...(body.expiredAt !== undefined ? { expiredAt: body.expiredAt as number } : {}),
      maxExecution: body.maxExecution as number,
    };
    return out;
  }
  if (options.mode === "simulate") {
    const out: SimulateDefinition = {
      ...common,
      ...(runner ? { runner } : {}),
      ...(body.triggerOutput !== undefined ? { triggerOutput: triggerOutput(body.triggerOutput, trigger, options.limits) } : {}),
    };
    return out;
  }
  const out: EstimateFeesDefinition = {
    ...common,
    ...(runner ? { runner } : {}),
    createdAt: body.createdAt as number,
    expireAt: body.expireAt as number,
    maxExecution: body.maxExecution as number,
  };
  return out;
}

function triggerOutput(value: unknown, trigger: Trigger, limits: DefinitionLimits): Record<string, unknown> {
  if (trigger.type !== "manual") return value as Record<string, unknown>;
  return v.parse(workflowSchemas(limits).ManualTriggerOutput, value) as Record<string, unknown>;
}

/** What the stored document fills in, by the node's kind. */
function normaliseNode(node: Node, kinds: Registry): Node {
  const normalise = kinds.node(node.type)?.normalise;
  return normalise ? ({ ...node, config: normalise(node.config, kinds) } as Node) : node;
}

// ---------------------------------------------------------------------------------------------------------
// Item 6: graph

function graphRules(definition: Definition, sentEdges: Edge[] | undefined, kinds: Registry): FieldError[] {
  const prefix = (problems: { path: string; message: string }[]) => problems.map((p) => ({ path: `body.${p.path}`, message: p.message }));
  if (!sentEdges?.length) {
    const branches = definition.nodes.flatMap((n, i) => (kinds.node(n.type)?.conditions ? [i] : []));
    if (branches.length) {
      return branches.map((i) => ({
        path: `body.nodes[${i}]`,
        message: "is a branch node: branches need explicit edges (edges may be omitted only when the nodes form a chain)",
      }));
    }
  }
  return prefix(checkGraph(definition, kinds));
}
