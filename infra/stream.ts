// The live execution stream (API.md §10.9): API Gateway buffers Lambda answers, so the stream has its own
// function behind a Function URL with response streaming. Clients reach it through the router (infra/router.ts)
// on the same host as every other route: `GET <url>/executions/{id}:stream`.
import { table } from "./table";
import { jwtPublicKey, routerSecret } from "./secrets";

/** A Function URL invocation lives at most 15 minutes: the stream closes itself 30 s earlier (clients reconnect). */
const STREAM_MAX_MS = 15 * 60_000;

export const stream = new sst.aws.Function("ExecutionStream", {
  handler: "functions/stream.handler",
  runtime: "nodejs22.x",
  architecture: "arm64",
  memory: "256 MB",
  timeout: "15 minutes",
  streaming: true,
  url: { cors: false /* answered by the app (API.md §1.4) */ },
  link: [table, routerSecret],
  environment: { STREAM_MAX_MS: String(STREAM_MAX_MS - 30_000), JWT_PUBLIC_KEY: jwtPublicKey },
});

// A public Function URL needs both grants since October 2025: SST adds `lambda:InvokeFunction` for everyone; this
// is the `lambda:InvokeFunctionUrl` one (the console adds it, the API does not). The router reaches the URL with them.
new aws.lambda.Permission("ExecutionStreamUrlAccess", {
  action: "lambda:InvokeFunctionUrl",
  function: stream.name,
  principal: "*",
  functionUrlAuthType: "NONE",
});
