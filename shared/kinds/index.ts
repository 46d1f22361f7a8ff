/**
 * The service's kinds (API.md §8.3, §8.4): adding a kind is one file in ./nodes or ./triggers and one line
 * here. The order is the order of the contract's tables (and of `must be one of ...`, and of the OpenAPI
 * unions). ./kind.ts says what a kind declares; ./registry.ts what a registry answers.
 */
import * as v from "valibot";
import { buildRegistry } from "./registry";
import { ethTransfer } from "./nodes/eth-transfer";
import { contractWrite } from "./nodes/contract-write";
import { contractRead } from "./nodes/contract-read";
import { graphqlQuery } from "./nodes/graphql-query";
import { restApi } from "./nodes/rest-api";
import { customCode } from "./nodes/custom-code";
import { branch } from "./nodes/branch";
import { filter } from "./nodes/filter";
import { loop } from "./nodes/loop";
import { balance } from "./nodes/balance";
import { manual } from "./triggers/manual";
import { fixedTime } from "./triggers/fixed-time";
import { cron } from "./triggers/cron";
import { block } from "./triggers/block";
import { event } from "./triggers/event";

const NODE_KINDS = [ethTransfer, contractWrite, contractRead, graphqlQuery, restApi, customCode, branch, filter, loop, balance] as const;
const TRIGGER_KINDS = [manual, fixedTime, cron, block, event] as const;

/** The service's registry: what every consumer uses unless given another (a test's, `withKinds`). */
export const kinds = buildRegistry({ nodes: NODE_KINDS, triggers: TRIGGER_KINDS });

// Types of the stored document, by kind (outputs: defaults filled in, addresses EIP-55, null members dropped).
type NodeKinds = (typeof NODE_KINDS)[number];
type TriggerKinds = (typeof TRIGGER_KINDS)[number];
type ConfigOf<K> = K extends { config(ctx: never): infer S } ? (S extends v.GenericSchema ? v.InferOutput<S> : never) : never;
export type NodeType = NodeKinds["type"];
export type TriggerType = TriggerKinds["type"];
export type NodeOf<T extends NodeType> = { id: string; name: string; type: T; config: ConfigOf<Extract<NodeKinds, { type: T }>> };
export type TriggerOf<T extends TriggerType> = {
  id?: string;
  name: string;
  type: T;
  config: ConfigOf<Extract<TriggerKinds, { type: T }>>;
};
export type Node = { [T in NodeType]: NodeOf<T> }[NodeType];
export type Trigger = { [T in TriggerType]: TriggerOf<T> }[TriggerType];

export { buildRegistry, withKinds, type Registry, type KindSchemas } from "./registry";
export {
  defineNode,
  defineTrigger,
  finishes,
  StepFailure,
  STEP_ERROR_CODES,
  type StepErrorCode,
  type NodeKind,
  type TriggerKind,
  type NodeEnv,
  type NodeResult,
  type NodeOutcome,
  type Suspension,
  type Gas,
} from "./kind";
export type { LoopRunner } from "./nodes/loop";
