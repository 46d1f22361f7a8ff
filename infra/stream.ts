// The live execution stream (API.md §10.9): API Gateway buffers Lambda answers, so the stream has its own
// function behind a Function URL with response streaming. Clients reach it through the router (infra/router.ts)
// on the same host as every other route: `GET <url>/executions/{id}:stream`.
//
// Only the router may invoke it: the URL takes IAM authorization, which the router's origin access control signs
// (infra/router.ts grants the distribution, and only it, both invoke permissions). A public URL would need
// `lambda:InvokeFunction` for everyone since October 2025, and the pinned provider cannot narrow that grant to
// URL invocations (`invokedViaFunctionUrl`), so anyone could invoke the function with an event of their making.
import { table } from "./table";
import { routerSecret } from "./secrets";
import { tokenEnvironment } from "./kms";
import { production } from "./stage";

/** A Function URL invocation lives at most 15 minutes: the stream closes itself 30 s earlier (clients reconnect). */
const STREAM_MAX_MS = 15 * 60_000;

export const stream = new sst.aws.Function("ExecutionStream", {
  handler: "functions/stream.handler",
  runtime: "nodejs22.x",
  architecture: "arm64",
  memory: "256 MB",
  timeout: "15 minutes",
  streaming: true,
  url: { authorization: "iam", cors: false /* answered by the app (API.md §1.4) */ },
  link: [table, routerSecret],
  environment: { STREAM_MAX_MS: String(STREAM_MAX_MS - 30_000), ...tokenEnvironment.verify },
  // A cap (and a floor): each open stream holds an instance for up to 15 minutes, so without one 50 owners at their
  // 20 streams (MAX_OPEN_STREAMS_PER_OWNER) would take the account's 1,000 concurrent executions. 200 is a fifth of
  // them; a viewer past it is throttled, not the API. Production only: previews share the account.
  concurrency: production ? { reserved: 200 } : undefined,
});
