/**
 * Every endpoint group of the API, as declarations only (no handlers, no chain or storage code): the
 * OpenAPI document is generated from this table, and the catch-all function uses it to answer 404/405
 * exactly for routes other functions serve. Adding a group here documents it.
 */
import type { Group } from "../http/endpoint";
import { serviceContract } from "./endpoints";
import { authContract } from "../auth/endpoints";
import { secretContract } from "../secret/endpoints";
import { walletContract } from "../wallet/endpoints";
import { tokenContract } from "../token/endpoints";
import { workflowContract } from "../workflow/endpoints";
import { runContract } from "../execution/run-endpoints";
import { executionContract, workflowExecutionsContract } from "../execution/endpoints";

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
