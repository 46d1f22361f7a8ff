/**
 * `executionContext` of `POST /nodes:run` and `POST /triggers:run` (API.md §21.3): whether anything was sent, what
 * the part's work went through, and the chain it used. snake_case, as the reference client reads it there.
 * The choices per kind are in docs/decisions.md "executionContext".
 */
import { partChainId } from "../kinds/support/schema-kit";
import type { Node, Trigger } from "../kinds/shapes";

type Provider = "chain_rpc" | "bundler" | "sandbox" | "http";

export interface ExecutionContext {
  /** True when the part would send something (a user operation) and it was simulated instead. */
  is_simulated: boolean;
  provider: Provider;
  /** The chain the part used; null for a part that uses none. */
  chain_id: number | null;
}

/**
 * What each node kind's work goes through. A loop is its runner's kind; `await` never runs alone (§17.2). Every
 * kind must be named here, so a new kind cannot be added without deciding.
 */
const NODE_PROVIDERS: Record<Exclude<Node["type"], "loop" | "await">, Provider> = {
  contractRead: "chain_rpc",
  balance: "chain_rpc",
  // /nodes:run simulates writes (§17.2): the user operation is built and simulated, never handed to the bundler
  ethTransfer: "bundler",
  contractWrite: "bundler",
  restApi: "http",
  graphqlQuery: "http",
  customCode: "sandbox",
  branch: "sandbox",
  filter: "sandbox",
};

/** A trigger's answer comes from the chain (block, event) or is computed by the service alone (manual, time). */
const TRIGGER_PROVIDERS: Record<Trigger["type"], Provider> = {
  block: "chain_rpc",
  event: "chain_rpc",
  manual: "sandbox",
  cron: "sandbox",
  fixedTime: "sandbox",
};

/** The context of a node run alone (always in simulate mode) on `workflowChainId` unless its config names a chain. */
export function nodeRunContext(node: { type: string; config: unknown }, workflowChainId: number): ExecutionContext {
  const part = node.type === "loop" ? loopRunner(node.config) : node;
  const provider = NODE_PROVIDERS[part.type as keyof typeof NODE_PROVIDERS] ?? "sandbox";
  const onChain = provider === "chain_rpc" || provider === "bundler";
  return {
    is_simulated: provider === "bundler",
    provider,
    chain_id: onChain ? partChainId(part.config, workflowChainId) : null,
  };
}

/** The context of a trigger run: nothing is ever sent; block and event read `chainId`. */
export function triggerRunContext(trigger: Pick<Trigger, "type">, chainId: number): ExecutionContext {
  const provider = TRIGGER_PROVIDERS[trigger.type];
  return { is_simulated: false, provider, chain_id: provider === "chain_rpc" ? chainId : null };
}

function loopRunner(config: unknown): { type: string; config: unknown } {
  const runner = (config as { runner?: { type?: unknown; config?: unknown } } | undefined)?.runner;
  return { type: String(runner?.type), config: runner?.config };
}
