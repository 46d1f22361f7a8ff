/**
 * Every endpoint group of the API, as declarations only (no handlers, no chain or storage code): the
 * OpenAPI document is generated from this table, and the catch-all function uses it to answer 404/405
 * exactly for routes other functions serve. Adding a group here documents it.
 */
import type { Group } from "../http/contract";
import { serviceContract } from "./contract";
import { authContract } from "../auth/contract";
import { secretContract } from "../secret/contract";
import { walletContract } from "../wallet/contract";
import { tokenContract } from "../token/contract";
import { workflowContract } from "../workflow/contract";
import { runContract } from "../execution/run-contract";
import { executionContract, workflowExecutionsContract } from "../execution/contract";

export const api: readonly Group[] = [
  serviceContract,
  authContract,
  secretContract,
  walletContract,
  tokenContract,
  workflowContract,
  runContract,
  workflowExecutionsContract,
  executionContract,
];
