/**
 * The service's kinds (API.md §8.3, §8.4): adding a kind is one file in ./nodes or ./triggers, its shape listed
 * in ./shapes.ts and the kind here (the registry refuses the two lists if they differ). The order is the order
 * of the contract's tables (and of `must be one of ...`, and of the OpenAPI unions). ./kind.ts says what a kind
 * declares; ./registry.ts what a registry answers.
 */
import { buildRegistry } from "./registry";
import { shapes } from "./shapes";
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
import { awaitNode } from "./nodes/await";
import { manual } from "./triggers/manual";
import { fixedTime } from "./triggers/fixed-time";
import { cron } from "./triggers/cron";
import { block } from "./triggers/block";
import { event } from "./triggers/event";

/** The service's registry: what every consumer uses unless given another (a test's, `withKinds`). */
export const kinds = /* @__PURE__ */ buildRegistry(
  {
    nodes: [ethTransfer, contractWrite, contractRead, graphqlQuery, restApi, customCode, branch, filter, loop, balance, awaitNode],
    triggers: [manual, fixedTime, cron, block, event],
  },
  shapes,
);

export { shapes } from "./shapes";

export { buildRegistry, withKinds, type Registry } from "./registry";
export {
  defineNode,
  nodeShape,
  isSuspend,
  StepFailure,
  type NodeEnv,
  type NodeResult,
  type NodeOutcome,
  type Gas,
  type Suspension,
  type WaitKind,
  type WaitOf,
  type StepErrorCode,
} from "./kind";
