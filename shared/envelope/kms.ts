/**
 * The KMS client (secret envelopes, the controller key, the health check), built on first use from the runtime's
 * settings and kept on the runtime. A module of its own so that only the functions that encrypt, decrypt or sign
 * load the KMS client: the read-only groups (executions, the stream) never do.
 */
import { KMSClient } from "@aws-sdk/client-kms";
import { LOCAL_CREDENTIALS, useRuntime, type Runtime } from "../current-runtime";

export function useKms(runtime: Runtime = useRuntime()): KMSClient {
  const { config } = runtime;
  return (runtime.kms ??= new KMSClient({
    region: config.region,
    ...(config.kmsEndpoint ? { endpoint: config.kmsEndpoint, credentials: LOCAL_CREDENTIALS } : {}),
  }));
}
