/**
 * The workflow graph (API.md §8.5): the graph rules checked at create, simulate and estimateFees
 * (WORKFLOW_GRAPH_INVALID), the generated chain edges, and the compiled form the engine runs from (each node's
 * incoming edges, a topological order, ancestors).
 *
 * Pure. Problems carry paths relative to the body (`edges[3].source`, `nodes[2]`); the caller prefixes them.
 */
import { findTemplates, forEachString, wholeTemplatePath, type TemplatePath, type ValuePath } from "../templates";
import { kinds as defaultKinds } from "../kinds/kinds";
import { type Registry } from "../kinds/registry";

interface GraphNode {
  id: string;
  name: string;
  type: string;
  config: unknown;
}
export interface GraphEdge {
  id: string;
  source: string;
  target: string;
}
export interface GraphInput {
  trigger: { id: string; name: string };
  nodes: readonly GraphNode[];
  edges: readonly GraphEdge[];
}

export interface GraphProblem {
  /** Relative to the body: `edges[3].source`, `nodes[2]`, `nodes[1].config.url`. */
  path: string;
  message: string;
}

/** An edge into a node, as the engine needs it. */
interface IncomingEdge {
  edgeId: string;
  /** The trigger id or a node id (for a branch condition, the branch node's id). */
  source: string;
  /** For an edge out of a branch: the condition id (`source` is then the branch node). */
  condition?: string;
}

export interface CompiledGraph {
  triggerId: string;
  /** Node ids in a topological order; ties keep the order of `nodes`. */
  order: readonly string[];
  /** Incoming edges of every node, in edge order. */
  incoming: ReadonlyMap<string, readonly IncomingEdge[]>;
  /** Outgoing edges of the trigger and of every node, in edge order (targets). */
  outgoing: ReadonlyMap<string, readonly { edgeId: string; target: string; condition?: string }[]>;
  /** For each node: the trigger and node ids from which it can be reached. */
  ancestors: ReadonlyMap<string, ReadonlySet<string>>;
}

/** The edges of `trigger → nodes[0] → nodes[1] → …`, ids `_e0`, `_e1`, … (edges omitted or `[]`). */
export function chainEdges(triggerId: string, nodes: readonly { id: string }[]): GraphEdge[] {
  return nodes.map((node, i) => ({ id: `_e${i}`, source: i === 0 ? triggerId : nodes[i - 1]!.id, target: node.id }));
}

interface Endpoint {
  node: string;
  condition?: string;
}

/** Splits an edge source into its node and (for a branch) condition. */
function splitSource(source: string): Endpoint {
  const dot = source.indexOf(".");
  return dot < 0 ? { node: source } : { node: source.slice(0, dot), condition: source.slice(dot + 1) };
}

/**
 * The graph rules of §8.5, in stages: edge references (unknown ids, a plain edge out of a branch, an edge into
 * the trigger or back to its own source, a duplicate `(source, target)`); then cycles; then reachability and
 * the ancestor rule of templates. A stage reports only when the previous ones passed, so one mistake is not
 * reported three times.
 */
export function checkGraph(input: GraphInput, kinds: Registry = defaultKinds): GraphProblem[] {
  const referenceProblems = checkReferences(input, kinds);
  if (referenceProblems.length) return referenceProblems;
  const cycle = findCycle(input);
  if (cycle) return [cycle];
  const graph = compileGraph(input);
  return [...checkReachable(input, graph), ...checkTemplateAncestors(input, graph)];
}

function checkReferences({ trigger, nodes, edges }: GraphInput, kinds: Registry): GraphProblem[] {
  const problems: GraphProblem[] = [];
  const byId = new Map(nodes.map((n) => [n.id, n]));
  // A branching kind (the branch): edges leave it from one of its conditions, never plainly.
  const branching = (node: GraphNode | undefined) => (node ? kinds.node(node.type)?.conditions !== undefined : false);
  const seen = new Map<string, number>();
  edges.forEach((edge, i) => {
    const { node, condition } = splitSource(edge.source);
    const sourceNode = byId.get(node);
    if (condition === undefined) {
      if (node !== trigger.id && !sourceNode) {
        problems.push({ path: `edges[${i}].source`, message: `names no trigger or node: ${edge.source}` });
      } else if (branching(sourceNode)) {
        problems.push({
          path: `edges[${i}].source`,
          message: `is the branch node ${node}: an edge out of a branch must name one of its conditions as ${node}.<conditionId>`,
        });
      }
    } else if (!sourceNode || !branching(sourceNode)) {
      problems.push({ path: `edges[${i}].source`, message: `names no branch condition: ${node} is not a branch node` });
    } else if (!conditionIds(sourceNode, kinds).includes(condition)) {
      problems.push({ path: `edges[${i}].source`, message: `names no condition of branch ${node}: ${condition}` });
    }
    if (edge.target === trigger.id) {
      problems.push({ path: `edges[${i}].target`, message: "must be a node, not the trigger" });
    } else if (!byId.has(edge.target)) {
      problems.push({ path: `edges[${i}].target`, message: `names no node: ${edge.target}` });
    } else if (edge.target === node) {
      problems.push({ path: `edges[${i}].target`, message: "must not be the source node itself" });
    }
    const key = `${edge.source}\u0000${edge.target}`;
    const first = seen.get(key);
    if (first !== undefined) {
      problems.push({ path: `edges[${i}]`, message: `duplicates edges[${first}]: same source and target` });
    } else seen.set(key, i);
  });
  return problems;
}

/** The condition ids of a branching node (its kind reads them from its validated config). */
function conditionIds(node: GraphNode, kinds: Registry): string[] {
  return kinds.node(node.type)?.conditions?.(node.config) ?? [];
}

/** The first cycle found (depth-first, in node order), named by node ids: `cycle: a -> b -> c -> a`. */
function findCycle({ nodes, edges }: GraphInput): GraphProblem | null {
  const next = new Map<string, { target: string; index: number }[]>();
  edges.forEach((edge, index) => {
    const from = splitSource(edge.source).node;
    next.set(from, [...(next.get(from) ?? []), { target: edge.target, index }]);
  });
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (id: string): GraphProblem | null => {
    state.set(id, "open");
    stack.push(id);
    for (const { target, index } of next.get(id) ?? []) {
      const s = state.get(target);
      if (s === "open") {
        const cycle = [...stack.slice(stack.indexOf(target)), target];
        return { path: `edges[${index}]`, message: `cycle: ${cycle.join(" -> ")}` };
      }
      if (s === undefined) {
        const found = visit(target);
        if (found) return found;
      }
    }
    stack.pop();
    state.set(id, "done");
    return null;
  };
  for (const node of nodes) {
    if (state.has(node.id)) continue;
    const found = visit(node.id);
    if (found) return found;
  }
  return null;
}

/**
 * The compiled graph of a definition whose edges passed the reference and cycle rules (a stored workflow
 * always has). Nodes that cannot be reached keep an empty ancestor set.
 */
export function compileGraph({ trigger, nodes, edges }: GraphInput): CompiledGraph {
  const incoming = new Map<string, IncomingEdge[]>(nodes.map((n) => [n.id, []]));
  const outgoing = new Map<string, { edgeId: string; target: string; condition?: string }[]>(
    [trigger.id, ...nodes.map((n) => n.id)].map((id) => [id, []]),
  );
  for (const edge of edges) {
    const { node, condition } = splitSource(edge.source);
    incoming.get(edge.target)?.push({ edgeId: edge.id, source: node, ...(condition !== undefined ? { condition } : {}) });
    outgoing.get(node)?.push({ edgeId: edge.id, target: edge.target, ...(condition !== undefined ? { condition } : {}) });
  }

  // Kahn's algorithm; among ready nodes the one earliest in `nodes` goes first.
  const position = new Map(nodes.map((n, i) => [n.id, i]));
  const waiting = new Map(
    nodes.map((n) => [
      n.id,
      new Set(
        incoming
          .get(n.id)!
          .map((e) => e.source)
          .filter((s) => s !== trigger.id),
      ),
    ]),
  );
  const order: string[] = [];
  const ready = nodes.filter((n) => waiting.get(n.id)!.size === 0).map((n) => n.id);
  while (ready.length) {
    ready.sort((a, b) => position.get(a)! - position.get(b)!);
    const id = ready.shift()!;
    order.push(id);
    for (const { target } of outgoing.get(id) ?? []) {
      const set = waiting.get(target);
      if (set?.delete(id) && set.size === 0) ready.push(target);
    }
  }

  const ancestors = new Map<string, Set<string>>();
  for (const id of order) {
    const set = new Set<string>();
    for (const { source } of incoming.get(id)!) {
      set.add(source);
      for (const a of ancestors.get(source) ?? []) set.add(a);
    }
    ancestors.set(id, set);
  }
  // A node on a cycle has no place in the order; it still gets an (empty) entry.
  for (const n of nodes) if (!ancestors.has(n.id)) ancestors.set(n.id, new Set());
  return { triggerId: trigger.id, order, incoming, outgoing, ancestors };
}

function checkReachable({ trigger, nodes }: GraphInput, graph: CompiledGraph): GraphProblem[] {
  return nodes.flatMap((node, i) =>
    graph.ancestors.get(node.id)!.has(trigger.id) ? [] : [{ path: `nodes[${i}]`, message: `is not reachable from the trigger` }],
  );
}

/** Config members whose text is JavaScript: `{{ … }}` there is substituted only when it is a path. */
const INPUT_VARIABLE_KEYS = new Set(["inputVariable"]);

/** Every template path in a node config with where it is (contractAbi skipped; `inputVariable` is a whole path). */
function configTemplatePaths(config: unknown): { path: TemplatePath; at: ValuePath }[] {
  const found: { path: TemplatePath; at: ValuePath }[] = [];
  forEachString(config, (text, at) => {
    const key = at[at.length - 1];
    if (typeof key === "string" && INPUT_VARIABLE_KEYS.has(key) && at.length === 1) {
      const path = wholeTemplatePath(text);
      if (path) found.push({ path, at });
      return;
    }
    for (const t of findTemplates(text)) if (t.path) found.push({ path: t.path, at });
  });
  return found;
}

/** A template rooted at a node name must name an ancestor of the node that uses it (§8.5). */
function checkTemplateAncestors({ nodes }: GraphInput, graph: CompiledGraph): GraphProblem[] {
  const idByName = new Map(nodes.map((n) => [n.name, n.id]));
  const problems: GraphProblem[] = [];
  nodes.forEach((node, i) => {
    const reported = new Set<string>();
    for (const { path, at } of configTemplatePaths(node.config)) {
      const target = idByName.get(path.root);
      if (target === undefined || graph.ancestors.get(node.id)!.has(target)) continue;
      const where = `nodes[${i}].config${formatPath(at)}`;
      if (reported.has(`${where}\u0000${path.root}`)) continue;
      reported.add(`${where}\u0000${path.root}`);
      problems.push({
        path: where,
        message: `template ${path.text} refers to node ${path.root}, which is not an ancestor of node ${node.id}`,
      });
    }
  });
  return problems;
}

/** `["headers", "X-Key"]` → `.headers.X-Key`; numbers as `[i]`. */
function formatPath(at: ValuePath): string {
  return at.map((k) => (typeof k === "number" ? `[${k}]` : `.${k}`)).join("");
}
