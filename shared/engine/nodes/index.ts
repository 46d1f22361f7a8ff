/** Every node kind of API.md §8.4 behind the one interface of ./kind.ts, by type. */
import type { NodeType } from "../../workflow/schemas";
import type { NodeKind } from "./kind";
import { balance } from "./balance";
import { branch } from "./branch";
import { contractRead } from "./contract-read";
import { contractWrite } from "./contract-write";
import { customCode } from "./custom-code";
import { ethTransfer } from "./eth-transfer";
import { filter } from "./filter";
import { graphqlQuery } from "./graphql-query";
import { loop } from "./loop";
import { restApi } from "./rest-api";

export const nodeKinds: Record<NodeType, NodeKind<never>> = {
  ethTransfer,
  contractWrite,
  contractRead,
  graphqlQuery,
  restApi,
  customCode,
  branch,
  filter,
  loop,
  balance,
};

export { StepFailure, type NodeEnv, type NodeKind, type NodeResult, type Gas } from "./kind";
export { chosenCondition } from "./branch";
