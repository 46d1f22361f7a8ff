/**
 * A synchronous Lambda invocation (Invoke, `RequestResponse`), signed with Signature Version 4 by node:crypto:
 * the sandbox port's transport on AWS (./remote.ts). It takes the caller's credentials from the environment
 * Lambda gives every function (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), reads them at each
 * call, and keeps its connections alive between calls (fetch's pool), so a warm call costs one round trip.
 * `AWS_ENDPOINT_URL_LAMBDA` redirects it, as it does the AWS SDK (the Lambda harness's stand-in).
 */
import { createHash, createHmac } from "node:crypto";

interface Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface SignInput {
  method: string;
  url: URL;
  /** Lower-case names; `host` and `x-amz-date` are added. */
  headers: Record<string, string>;
  body: string;
  service: string;
  region: string;
  credentials: Credentials;
  now?: Date;
}

const sha256 = (data: string) => createHash("sha256").update(data).digest("hex");
const hmac = (key: string | Buffer, data: string) => createHmac("sha256", key).update(data).digest();

/** The request's headers with Signature Version 4's `authorization` (and `x-amz-date`, `x-amz-security-token`). */
export function signV4({ method, url, headers, body, service, region, credentials, now = new Date() }: SignInput): Record<string, string> {
  const amzDate = now
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}/, "");
  const day = amzDate.slice(0, 8);
  const all: Record<string, string> = { ...headers, host: url.host, "x-amz-date": amzDate };
  if (credentials.sessionToken) all["x-amz-security-token"] = credentials.sessionToken;
  const names = Object.keys(all).sort();
  const signedHeaders = names.join(";");
  const query = [...url.searchParams]
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .sort()
    .join("&");
  const canonical = [
    method,
    url.pathname,
    query,
    names.map((n) => `${n}:${all[n]!.trim().replace(/\s+/g, " ")}\n`).join(""),
    signedHeaders,
    sha256(body),
  ].join("\n");
  const scope = `${day}/${region}/${service}/aws4_request`;
  const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256(canonical)].join("\n");
  let key = hmac(`AWS4${credentials.secretAccessKey}`, day);
  for (const part of [region, service, "aws4_request"]) key = hmac(key, part);
  const signature = createHmac("sha256", key).update(toSign).digest("hex");
  all.authorization = `AWS4-HMAC-SHA256 Credential=${credentials.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
  return all;
}

export interface LambdaTarget {
  functionName: string;
  /** A version or alias (the one with provisioned concurrency); none: `$LATEST`. */
  qualifier?: string;
  region: string;
}

/** The Lambda credentials and endpoint this process runs with. */
function fromEnvironment(env: NodeJS.ProcessEnv, region: string): { credentials: Credentials; endpoint: string } {
  const { AWS_ACCESS_KEY_ID: accessKeyId, AWS_SECRET_ACCESS_KEY: secretAccessKey, AWS_SESSION_TOKEN: sessionToken } = env;
  if (!accessKeyId || !secretAccessKey) throw new Error("no AWS credentials in the environment to invoke the sandbox function");
  return {
    credentials: { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) },
    endpoint: env.AWS_ENDPOINT_URL_LAMBDA ?? `https://lambda.${region}.amazonaws.com`,
  };
}

/** Invokes the function and answers its result parsed; throws on a refused call or a function error. */
export async function invokeLambda(target: LambdaTarget, payload: string, signal: AbortSignal): Promise<unknown> {
  const { credentials, endpoint } = fromEnvironment(process.env, target.region);
  const url = new URL(`/2015-03-31/functions/${encodeURIComponent(target.functionName)}/invocations`, endpoint);
  if (target.qualifier) url.searchParams.set("Qualifier", target.qualifier);
  const headers = signV4({
    method: "POST",
    url,
    headers: { "content-type": "application/json", "x-amz-invocation-type": "RequestResponse" },
    body: payload,
    service: "lambda",
    region: target.region,
    credentials,
  });
  delete headers.host; // fetch sets it
  const res = await fetch(url, { method: "POST", headers, body: payload, signal });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`Lambda Invoke answered ${res.status}: ${text.slice(0, 200)}`);
  const functionError = res.headers.get("x-amz-function-error");
  if (functionError) throw new Error(`the sandbox function failed (${functionError}): ${text.slice(0, 200)}`);
  return JSON.parse(text) as unknown;
}
