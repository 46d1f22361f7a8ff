/**
 * The shapes of the service's kinds (./kind.ts `NodeShape`): type, doc and config schema, in the order of the
 * contract's tables. The request schemas and the OpenAPI document are built from this list alone, so the
 * functions that only validate shapes bundle no runner; ./kinds.ts lists the kinds defined from these shapes.
 */
import type * as v from "valibot";
import { buildShapes } from "./registry";
import { ethTransferShape } from "./nodes/eth-transfer";
import { contractWriteShape } from "./nodes/contract-write";
import { contractReadShape } from "./nodes/contract-read";
import { graphqlQueryShape } from "./nodes/graphql-query";
import { restApiShape } from "./nodes/rest-api";
import { customCodeShape } from "./nodes/custom-code";
import { branchShape } from "./nodes/branch";
import { filterShape } from "./nodes/filter";
import { loopShape } from "./nodes/loop";
import { balanceShape } from "./nodes/balance";
import { awaitShape } from "./nodes/await";
import { manualShape } from "./triggers/manual";
import { fixedTimeShape } from "./triggers/fixed-time";
import { cronShape } from "./triggers/cron";
import { blockShape } from "./triggers/block";
import { eventShape } from "./triggers/event";

const NODE_SHAPES = [
  ethTransferShape,
  contractWriteShape,
  contractReadShape,
  graphqlQueryShape,
  restApiShape,
  customCodeShape,
  branchShape,
  filterShape,
  loopShape,
  balanceShape,
  awaitShape,
] as const;
const TRIGGER_SHAPES = [manualShape, fixedTimeShape, cronShape, blockShape, eventShape] as const;

export const shapes = /* @__PURE__ */ buildShapes({ nodes: NODE_SHAPES, triggers: TRIGGER_SHAPES });

// Types of the stored document, by kind (outputs: defaults filled in, addresses EIP-55, null members dropped).
type NodeKinds = (typeof NODE_SHAPES)[number];
type TriggerKinds = (typeof TRIGGER_SHAPES)[number];
type ConfigOf<K> = K extends { config(ctx: never): infer S } ? (S extends v.GenericSchema ? v.InferOutput<S> : never) : never;
type NodeType = NodeKinds["type"];
export type TriggerType = TriggerKinds["type"];
type NodeOf<T extends NodeType> = { id: string; name: string; type: T; config: ConfigOf<Extract<NodeKinds, { type: T }>> };
type TriggerOf<T extends TriggerType> = {
  id?: string;
  name: string;
  type: T;
  config: ConfigOf<Extract<TriggerKinds, { type: T }>>;
};
export type Node = { [T in NodeType]: NodeOf<T> }[NodeType];
export type Trigger = { [T in TriggerType]: TriggerOf<T> }[TriggerType];
