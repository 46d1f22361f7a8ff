/**
 * The process-wide resources every module uses: settings, the table client, the KMS client and the clock.
 * A host (the local server, a Lambda entry point, a test) installs one with setRuntime() before serving;
 * domain code reads it with useRuntime(). Only the endpoints differ between AWS and the local runtime.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { KMSClient } from "@aws-sdk/client-kms";
import { buildConfig, type Config } from "./config";
import type { Runtime } from "./current-runtime";

export { setRuntime, useRuntime, useConfig, type Runtime } from "./current-runtime";

/** Local endpoints take fixed dummy credentials; in AWS the default credential chain applies. */
const LOCAL_CREDENTIALS = { accessKeyId: "local", secretAccessKey: "local" };

export function createRuntime(options: {
  config?: Config;
  now?: () => number;
} = {}): Runtime {
  const config = options.config ?? buildConfig();
  const dynamo = new DynamoDBClient({
    region: config.region,
    ...(config.dynamoEndpoint ? { endpoint: config.dynamoEndpoint, credentials: LOCAL_CREDENTIALS } : {}),
  });
  const kms = new KMSClient({
    region: config.region,
    ...(config.kmsEndpoint ? { endpoint: config.kmsEndpoint, credentials: LOCAL_CREDENTIALS } : {}),
  });
  return {
    config,
    db: DynamoDBDocumentClient.from(dynamo, { marshallOptions: { removeUndefinedValues: true } }),
    kms,
    now: options.now ?? Date.now,
  };
}
