/**
 * A registry of node and trigger kinds (./kind.ts): the one list validation, the engine, fees and the OpenAPI
 * document iterate. The service's own is ./kinds.ts; `withKinds` makes another from it (a test's extra kind)
 * without touching it, and every consumer takes a registry as an option, the service's by default.
 *
 * `Shapes` is the part of a registry that only builds schemas (./shapes.ts lists the service's): the request
 * schemas and the OpenAPI document take it, so the functions that only validate shapes bundle no runner.
 */
import * as v from "valibot";
import { IdString, NameString, opt, strict, type DefinitionLimits } from "./support/schema-kit";
import type {
  AnyNodeKind,
  AnyNodeShape,
  AnyTriggerKind,
  AnyTriggerShape,
  KindLookup,
  Raw,
  SchemaContext,
  ShapeLookup,
  WriteCost,
} from "./kind";

interface KindSchemas {
  /** `{id, name, type, config}` per node kind, by type (registry order). */
  nodeOptions: Record<string, v.GenericSchema>;
  /** `{id?, name, type, config}` per trigger kind, by type. */
  triggerOptions: Record<string, v.GenericSchema>;
  /** The loop runner: `{type, config, id?, name?}` of the kinds that may run in a loop. */
  LoopRunner: v.GenericSchema;
  Node: v.GenericSchema;
  Trigger: v.GenericSchema;
}

export interface Shapes extends ShapeLookup {
  readonly nodes: readonly AnyNodeShape[];
  readonly triggers: readonly AnyTriggerShape[];
  readonly nodeTypes: readonly string[];
  readonly triggerTypes: readonly string[];
  /** The schemas for these limits (built once per distinct limits). */
  schemas(limits: DefinitionLimits): KindSchemas;
  /** A node (raw or validated) that sends a user operation when it runs (a writing kind, or a loop of one). */
  sendsUserOperation(node: unknown): boolean;
}

export interface Registry extends Omit<Shapes, "node" | "nodes" | "triggers">, KindLookup {
  readonly nodes: readonly AnyNodeKind[];
  readonly triggers: readonly AnyTriggerKind[];
  trigger(type: string): AnyTriggerKind | undefined;
  /** The fee rule of a node when it sends a user operation. */
  writeCost(node: { type: string; config: unknown }): WriteCost | undefined;
  /** The JavaScript texts a node runs. */
  javaScript(node: { type: string; config: unknown }): string[];
}

const isObject = (x: unknown): x is Raw => typeof x === "object" && x !== null && !Array.isArray(x);

/** The shapes of these kinds, in this order (the order of `must be one of ...` and of the OpenAPI unions). */
export function buildShapes(list: { nodes: readonly AnyNodeShape[]; triggers: readonly AnyTriggerShape[] }): Shapes {
  const nodeTypes = list.nodes.map((k) => k.type);
  const triggerTypes = list.triggers.map((k) => k.type);
  if (new Set(nodeTypes).size !== nodeTypes.length || new Set(triggerTypes).size !== triggerTypes.length) {
    throw new Error("two kinds share a type");
  }
  const cache = new Map<string, KindSchemas>();
  const byType = new Map(list.nodes.map((k) => [k.type, k]));
  const shapes: Shapes = {
    nodes: list.nodes,
    triggers: list.triggers,
    nodeTypes,
    triggerTypes,
    node: (type) => byType.get(type),
    sendsUserOperation(node) {
      if (!isObject(node)) return false;
      const writes = byType.get(String(node.type))?.writesOnChain ?? false;
      return typeof writes === "boolean" ? writes : writes(isObject(node.config) ? node.config : {}, shapes);
    },
    schemas(limits) {
      const key = JSON.stringify(limits);
      let built = cache.get(key);
      if (!built) cache.set(key, (built = buildSchemas(list.nodes, list.triggers, limits)));
      return built;
    },
  };
  return shapes;
}

/**
 * A registry of these kinds, in this order. Given `shapes` (the service's list of shapes), the kinds must be
 * exactly the kinds defined from those shapes, in the same order: the two lists cannot drift apart.
 */
export function buildRegistry(list: { nodes: readonly AnyNodeKind[]; triggers: readonly AnyTriggerKind[] }, shapes?: Shapes): Registry {
  if (shapes) {
    const same = (a: readonly { shape: unknown }[], b: readonly unknown[]) => a.length === b.length && a.every((k, i) => k.shape === b[i]);
    if (!same(list.nodes, shapes.nodes) || !same(list.triggers, shapes.triggers)) {
      throw new Error("the kinds are not the ones defined from the listed shapes, in their order (shapes.ts, kinds.ts)");
    }
  }
  const nodes = new Map(list.nodes.map((k) => [k.type, k]));
  const triggers = new Map(list.triggers.map((k) => [k.type, k]));
  const registry: Registry = {
    ...(shapes ?? buildShapes(list)),
    nodes: list.nodes,
    triggers: list.triggers,
    node: (type) => nodes.get(type),
    trigger: (type) => triggers.get(type),
    writeCost: ({ type, config }) => nodes.get(type)?.fee?.(config, registry),
    javaScript: ({ type, config }) => nodes.get(type)?.javaScript?.(config, registry) ?? [],
  };
  return registry;
}

/** `base` with more kinds appended (or replaced, by type): a new registry, `base` unchanged. */
export function withKinds(base: Registry, more: { nodes?: readonly AnyNodeKind[]; triggers?: readonly AnyTriggerKind[] }): Registry {
  const merge = <K extends { type: string }>(a: readonly K[], b: readonly K[] = []) => [
    ...a.map((k) => b.find((x) => x.type === k.type) ?? k),
    ...b.filter((x) => !a.some((k) => k.type === x.type)),
  ];
  return buildRegistry({ nodes: merge(base.nodes, more.nodes), triggers: merge(base.triggers, more.triggers) });
}

function buildSchemas(nodes: readonly AnyNodeShape[], triggers: readonly AnyTriggerShape[], limits: DefinitionLimits): KindSchemas {
  const runners = nodes.filter((k) => k.inLoop);
  const runnerTypes = runners.map((k) => k.type);
  // The runner variant first (a loop's config holds it), then every node config.
  const base = { limits, loopRunnerTypes: runnerTypes };
  const LoopRunner = v.variant(
    "type",
    runners.map((k) =>
      strict({ type: v.literal(k.type), config: k.config({ ...base, loopRunner: v.never() }), id: opt(IdString), name: opt(NameString) }),
    ) as v.VariantOptions<"type">,
    `must be one of ${runnerTypes.join(", ")}`,
  );
  const ctx: SchemaContext = { ...base, loopRunner: LoopRunner };

  const nodeOptions = Object.fromEntries(
    nodes.map((k) => [k.type, strict({ id: IdString, name: NameString, type: v.literal(k.type), config: k.config(ctx) })]),
  );
  const triggerOptions = Object.fromEntries(
    triggers.map((k) => [k.type, strict({ id: opt(IdString), name: NameString, type: v.literal(k.type), config: k.config(ctx) })]),
  );
  const Node = v.variant(
    "type",
    Object.values(nodeOptions) as v.VariantOptions<"type">,
    `must be one of ${nodes.map((k) => k.type).join(", ")}`,
  );
  const Trigger = v.variant(
    "type",
    Object.values(triggerOptions) as v.VariantOptions<"type">,
    `must be one of ${triggers.map((k) => k.type).join(", ")}`,
  );
  return { nodeOptions, triggerOptions, LoopRunner, Node, Trigger };
}
