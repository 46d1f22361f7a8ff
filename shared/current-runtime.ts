/**
 * The runtime the host installed (setRuntime), without the code that builds one. Schema and contract modules
 * read settings through this module, so importing them never loads the AWS SDK clients (shared/runtime.ts
 * builds those).
 */
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import type { KMSClient } from "@aws-sdk/client-kms";
import type { Config } from "./config";

export interface Runtime {
  config: Config;
  db: DynamoDBDocumentClient;
  /** Built on first use by useKms (shared/envelope/kms.ts), so functions that never touch keys never load the client. */
  kms?: KMSClient;
  now(): number;
}

/** Local endpoints take fixed dummy credentials; in AWS the default credential chain applies. */
export const LOCAL_CREDENTIALS = { accessKeyId: "local", secretAccessKey: "local" };

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
