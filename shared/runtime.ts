/**
 * The process-wide resources every module uses: settings, the table client and the clock (the KMS client is
 * built on first use: shared/envelope/kms.ts).
 * A host (the local server, a Lambda entry point, a test) installs one with setRuntime() before serving;
 * domain code reads it with useRuntime(). Only the endpoints differ between AWS and the local runtime.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { buildConfig, type Config } from "./config";
import { LOCAL_CREDENTIALS, type Runtime } from "./current-runtime";

export function createRuntime(
  options: {
    config?: Config;
    now?: () => number;
  } = {},
): Runtime {
  const config = options.config ?? buildConfig();
  const dynamo = new DynamoDBClient({
    region: config.region,
    ...(config.dynamoEndpoint ? { endpoint: config.dynamoEndpoint, credentials: LOCAL_CREDENTIALS } : {}),
  });
  return {
    config,
    db: DynamoDBDocumentClient.from(dynamo, { marshallOptions: { removeUndefinedValues: true } }),
    now: options.now ?? Date.now,
  };
}
