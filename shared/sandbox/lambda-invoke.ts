/**
 * A synchronous Lambda invocation (Invoke, `RequestResponse`) through the AWS SDK: the sandbox port's transport on
 * AWS (./remote.ts). The client takes the caller's credentials from the environment Lambda gives every function and
 * keeps its connections alive between calls, so a warm call costs one round trip. `AWS_ENDPOINT_URL_LAMBDA`
 * redirects it (the Lambda harness's stand-in).
 */
import { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";

export interface LambdaTarget {
  functionName: string;
  /** A version or alias (the one with provisioned concurrency); none: `$LATEST`. */
  qualifier?: string;
  region: string;
}

const clients = new Map<string, LambdaClient>();
const clientFor = (region: string) => {
  let client = clients.get(region);
  if (!client) clients.set(region, (client = new LambdaClient({ region, maxAttempts: 1 })));
  return client;
};

/** Invokes the function and answers its result parsed; throws on a refused call or a function error. */
export async function invokeLambda(target: LambdaTarget, payload: string, signal: AbortSignal): Promise<unknown> {
  const answer = await clientFor(target.region).send(
    new InvokeCommand({
      FunctionName: target.functionName,
      ...(target.qualifier ? { Qualifier: target.qualifier } : {}),
      InvocationType: "RequestResponse",
      Payload: new TextEncoder().encode(payload),
    }),
    { abortSignal: signal },
  );
  const text = new TextDecoder().decode(answer.Payload ?? new Uint8Array());
  if (answer.FunctionError) throw new Error(`the sandbox function failed (${answer.FunctionError}): ${text.slice(0, 200)}`);
  return JSON.parse(text) as unknown;
}
