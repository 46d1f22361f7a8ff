// The HTTP API: one Lambda per endpoint group. API Gateway cannot route on the `:verb` inside a path
// segment, so each group takes its prefix whole and its Hono app matches the exact route; everything
// else reaches the core function, which knows every route and answers 404/405 exactly.
import { table } from "./table";
import { keyPermissions, controllerKey, secretsKey } from "./keys";
import { jwtSigningKey, chains } from "./secrets";
import { bus } from "./bus";
import { schedulerEnvironment, schedulerPermissions } from "./scheduler";

const environment = {
  SECRETS_KMS_KEY_ID: secretsKey.arn,
  CONTROLLER_KMS_KEY_ID: controllerKey.arn,
  CHAINS: chains.value,
};

const fn = (handler: string, permissions: { actions: string[]; resources: $util.Input<string>[] }[] = []) => ({
  handler,
  // Node 22: Node 20 reached its end of life in April 2026 and the AWS SDK's releases from January 2027
  // require 22. SST bundles with esbuild (target esnext, ESM, minified); bench/lambda-bundle.ts reproduces
  // that build with target node22 for the bundle budget and tests/bundles.test.ts. The code itself keeps
  // running on Node 20 (package.json engines) for `npm start` and the tests.
  runtime: "nodejs22.x" as const,
  architecture: "arm64" as const,
  memory: "512 MB" as const,
  timeout: "29 seconds" as const,
  link: [table, jwtSigningKey],
  environment,
  permissions,
});

export const api = new sst.aws.ApiGatewayV2("Api", { cors: false /* answered by the app (API.md §1.4) */ });

const core = fn("functions/core.handler", [keyPermissions.secrets]);
const secrets = fn("functions/secrets.handler", [keyPermissions.secrets]);
const wallets = fn("functions/wallets.handler", [keyPermissions.controller]);
// Linked to the bus: asynchronous triggers publish `execution.requested` (infra/bus.ts).
const workflows = {
  ...fn("functions/workflows.handler", [keyPermissions.secrets, keyPermissions.controller, ...schedulerPermissions]),
  link: [table, jwtSigningKey, bus],
  // Create, resume, pause and cancel manage the workflow's schedules (infra/scheduler.ts).
  environment: { ...environment, ...schedulerEnvironment },
};

api.route("ANY /secrets", secrets); // the app answers 405 for methods /secrets does not take
api.route("ANY /secrets/{proxy+}", secrets);
api.route("ANY /wallets", wallets);
api.route("ANY /wallets/{proxy+}", wallets);
api.route("ANY /workflows", workflows);
api.route("ANY /workflows/{proxy+}", workflows);
// Top-level verbs (`/workflows:count`) are a segment of their own: neither route above matches them.
for (const verb of ["count", "simulate", "estimateFees"]) api.route(`ANY /workflows:${verb}`, workflows);
const executions = fn("functions/executions.handler");
api.route("ANY /executions", executions);
api.route("ANY /executions/{proxy+}", executions);
for (const verb of ["count", "stats"]) api.route(`ANY /executions:${verb}`, executions);
api.route("$default", core);

// Pending withdrawals are also followed up in the background, not only when read.
export const sweeper = new sst.aws.Cron("WithdrawalFollowUp", {
  schedule: "rate(1 minute)",
  // Linked to the bus: claims a crash interrupted are finished and handed to the runner.
  function: { ...fn("functions/sweeper.handler", [keyPermissions.controller]), link: [table, jwtSigningKey, bus] },
});
