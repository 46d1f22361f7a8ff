/**
 * The runtime the host installed (setRuntime), without the code that builds one. Schema and contract modules
 * read settings through this module, so importing them never loads the AWS SDK clients (shared/runtime.ts
 * builds those and re-exports everything here).
 */
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import type { KMSClient } from "@aws-sdk/client-kms";
import type { Config } from "./config";

export interface Runtime {
  config: Config;
  db: DynamoDBDocumentClient;
  kms: KMSClient;
  now(): number;
}

let current: Runtime | undefined;

export function setRuntime(runtime: Runtime): Runtime {
  current = runtime;
  return runtime;
}

export function useRuntime(): Runtime {
  if (!current) throw new Error("The runtime has not been set up (setRuntime)");
  return current;
}

export const useConfig = () => useRuntime().config;
