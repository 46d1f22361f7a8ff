// One public base URL for the whole API, the stream included: a CloudFront distribution in front of API Gateway
// and the stream's Function URL. Built here rather than with SST's Router, whose routes match segment-bounded
// path prefixes only (a `:stream` suffix cannot be told apart) and whose origins read for 20 s.
//
// - `GET /executions/{id}:stream` reaches the Function URL: a cache behaviour matches the colon, and the
//   viewer-request function sends the percent-encoded forms (`%3Astream`, `%3astream`) there too. Nothing else does.
// - Everything else reaches API Gateway, whose origin reads for 60 s: a blocking trigger answers within 25 s
//   (blocking_trigger_wait_ms), a simulation within 27 s, and API Gateway itself gives up at 30 s.
// - Nothing is cached (CachingDisabled); every viewer header but Host, every query string and cookie is forwarded
//   (AllViewerExceptHostHeader: API Gateway and Function URLs route on their own Host).
// - Per-IP rate limits (API.md §4.2) key on the viewer's address: the viewer-request function writes it to
//   `x-viewer-address` and the stage's router secret to `x-router-secret` (replacing whatever the client sent);
//   the functions trust that address only next to the secret (functions/viewer.ts), so calling API Gateway or the
//   Function URL directly cannot choose it.
// - The stream's origin is signed (origin access control, SigV4 for Lambda), and the distribution is the only
//   principal allowed to invoke it (infra/stream.ts). Signing replaces the `Authorization` header, so the viewer
//   function carries the client's bearer token to the stream in `x-client-authorization` (dropping one a client
//   sent itself), where functions/viewer.ts puts it back next to the router's secret.
import { api } from "./api";
import { stream } from "./stream";
import { routerSecretHeader } from "./secrets";

/** CloudFront's managed policies. */
const CACHING_DISABLED = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad";
const ALL_VIEWER_EXCEPT_HOST_HEADER = "b689b0a8-53d0-40ab-baf2-68738e2966ac";

/** Seconds CloudFront waits for an origin's next bytes: above the 25 s blocking waits and the 27 s simulate cap. */
export const ORIGIN_READ_TIMEOUT_S = 60;

/** Where the client's `Authorization` travels to the signed stream origin. */
export const CLIENT_AUTHORIZATION = "x-client-authorization";

/** The requests the stream function answers: `/executions/{id}:stream`, the colon as is or percent-encoded. */
export const STREAM_PATH = /^\/executions\/[^/]+(?::|%3[Aa])stream$/;

const host = (url: $util.Input<string>) => $util.output(url).apply((u) => new URL(u).host);
const streamHost = host(stream.url);

const streamAccess = new aws.cloudfront.OriginAccessControl("StreamOriginAccess", {
  name: `${$app.name}-${$app.stage}-stream`,
  description: "Signs the router's requests to the stream's Function URL",
  originAccessControlOriginType: "lambda",
  signingBehavior: "always",
  signingProtocol: "sigv4",
});

const origin = (originId: string, domainName: $util.Input<string>, originAccessControlId?: $util.Input<string>) => ({
  originId,
  domainName,
  ...(originAccessControlId ? { originAccessControlId } : {}),
  customOriginConfig: {
    httpPort: 80,
    httpsPort: 443,
    originProtocolPolicy: "https-only",
    originSslProtocols: ["TLSv1.2"],
    originReadTimeout: ORIGIN_READ_TIMEOUT_S,
    originKeepaliveTimeout: 5,
  },
});

/**
 * Viewer request (cloudfront-js-2.0): the viewer's address for the rate limits, and the encoded `:stream` paths,
 * which the cache behaviour's pattern does not match, sent to the stream's origin.
 */
export const viewerRequestCode = $interpolate`import cf from "cloudfront";
var STREAM_PATH = ${STREAM_PATH.toString()};
async function handler(event) {
  var request = event.request;
  request.headers["x-viewer-address"] = { value: event.viewer.ip };
  request.headers["${routerSecretHeader.name}"] = { value: "${routerSecretHeader.value}" };
  delete request.headers["${CLIENT_AUTHORIZATION}"];
  if (STREAM_PATH.test(request.uri)) {
    if (request.headers.authorization) request.headers["${CLIENT_AUTHORIZATION}"] = request.headers.authorization;
    cf.updateRequestOrigin({
      domainName: "${streamHost}",
      customOriginConfig: { port: 443, protocol: "https", sslProtocols: ["TLSv1.2"] },
      originAccessControlConfig: { enabled: true, signingBehavior: "always", signingProtocol: "sigv4", originType: "lambda" },
      timeouts: { readTimeout: ${ORIGIN_READ_TIMEOUT_S} },
    });
  }
  return request;
}
`;

const viewerRequest = new aws.cloudfront.Function("RouterViewerRequest", {
  runtime: "cloudfront-js-2.0",
  comment: "Viewer address for rate limits; encoded :stream paths to the stream",
  code: viewerRequestCode,
  publish: true,
});

const behaviour = (targetOriginId: string) => ({
  targetOriginId,
  viewerProtocolPolicy: "redirect-to-https",
  allowedMethods: ["DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"],
  cachedMethods: ["GET", "HEAD"],
  compress: false,
  cachePolicyId: CACHING_DISABLED,
  originRequestPolicyId: ALL_VIEWER_EXCEPT_HOST_HEADER,
  functionAssociations: [{ eventType: "viewer-request", functionArn: viewerRequest.arn }],
});

export const router = new sst.aws.Cdn("Router", {
  comment: `${$app.name} ${$app.stage}: API and stream`,
  origins: [origin("api", host(api.url)), origin("stream", streamHost, streamAccess.id)],
  defaultCacheBehavior: behaviour("api"),
  orderedCacheBehaviors: [{ pathPattern: "/executions/*:stream", ...behaviour("stream") }],
  wait: true,
});

// The distribution, and nothing else, may invoke the stream: through its URL (signed by the origin access control)
// and, as Function URLs require since October 2025, the function itself.
for (const [name, action] of [
  ["ExecutionStreamRouterUrlAccess", "lambda:InvokeFunctionUrl"],
  ["ExecutionStreamRouterInvoke", "lambda:InvokeFunction"],
] as const)
  new aws.lambda.Permission(name, {
    action,
    function: stream.name,
    principal: "cloudfront.amazonaws.com",
    sourceArn: router.nodes.distribution.arn,
    ...(action === "lambda:InvokeFunctionUrl" ? { functionUrlAuthType: "AWS_IAM" } : {}),
  });
