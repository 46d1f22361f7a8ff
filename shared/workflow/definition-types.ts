/** The types of a validated workflow definition and of its validation's options (./definition.ts). */
import type { CompiledGraph } from "./graph";
import type { Edge } from "./schemas";
import type { Registry } from "../kinds/registry";
import type { DefinitionLimits } from "../kinds/support/schema-kit";
import type { Node, Trigger } from "../kinds/shapes";

export type Mode = "create" | "simulate" | "estimateFees";

/** A configured chain: its id and, optionally, its block time (API.md §5 table otherwise). */
export interface ChainInfo {
  chainId: number;
  blockTimeSeconds?: number;
}

export interface ValidateOptions<M extends Mode> {
  mode: M;
  /** The server's clock, ms. */
  now: number;
  limits: DefinitionLimits;
  chains: readonly ChainInfo[];
  defaultChainId: number;
  /** Id for a trigger sent without one; default a ULID of `now`. */
  newId?: () => string;
  /** The kinds a definition may use; default the service's (shared/kinds). */
  kinds?: Registry;
}

export type Settings = Record<string, unknown> & { runner?: string; chainId: number };

/** What create, simulate and estimateFees share once validated. */
export interface Definition {
  /** The workflow chain: body `chainId` (non-zero), else `default_chain_id`. */
  chainId: number;
  trigger: Trigger & { id: string };
  nodes: Node[];
  /** As sent, or the generated chain `_e0`, `_e1`, … when omitted or `[]`. */
  edges: Edge[];
  /** As sent, plus `settings.runner` (when there is a runner) and `settings.chainId`. */
  inputVariables: Record<string, unknown> & { settings: Settings };
}
export interface CreateDefinition extends Definition {
  name?: string;
  smartWalletAddress: string;
  startAt?: number;
  expiredAt?: number;
  maxExecution: number;
}
export interface SimulateDefinition extends Definition {
  /** `inputVariables.settings.runner` (EIP-55) when set; the route checks it is the caller's (item 9). */
  runner?: string;
  triggerOutput?: Record<string, unknown>;
}
export interface EstimateFeesDefinition extends Definition {
  /** Body `runner`, else `inputVariables.settings.runner`; any address. */
  runner?: string;
  createdAt: number;
  expireAt: number;
  maxExecution: number;
}
export type DefinitionFor<M extends Mode> = M extends "create"
  ? CreateDefinition
  : M extends "simulate"
    ? SimulateDefinition
    : EstimateFeesDefinition;

export interface ValidatedDefinition<M extends Mode> {
  definition: DefinitionFor<M>;
  graph: CompiledGraph;
}
