// The HTTP API: API Gateway (HTTP API) with one Lambda per endpoint group. API Gateway cannot route on the `:verb`
// inside a path segment, so each group takes its prefix whole and its Hono app matches the exact route; everything
// else reaches the core function, which knows every route and answers 404/405 exactly. Each group is one function
// that all its routes share (one cold start and one in-process nonce lock per group), linked to what it uses only.
// Clients reach it through the router (infra/router.ts), which also carries the stream.
import { table, tableDescribe } from "./table";
import { keyEnvironment, keyPermissions, tokenEnvironment } from "./kms";
import { authAllowedUrisValue, chains, routerSecret } from "./secrets";
import { runnerQueue } from "./bus";
import { schedulerEnvironment, schedulerPermissions } from "./scheduler";
import { production } from "./stage";
import { partnerEnvironment } from "./partners";
import { sandboxEnvironment, sandboxInvoke } from "./sandbox";

type Permission = { actions: string[]; resources: $util.Input<string>[] };

// Each group's reserved concurrency: a floor no burst of runs or streams can take from it (and also its cap). Of
// the account's 1,000: workflows 150 (a blocking trigger holds an instance up to 25 s: 6 new ones a second, with
// every other route of the group beside them), core 50, executions 50, wallets 25, secrets 25; the stream reserves
// 200 (infra/stream.ts), the sandbox function 150 (infra/sandbox.ts), the runner takes at most 200
// (infra/runner.ts), 150 stay for the rest. Production only:
// previews share the account, and AWS keeps 100 of it unreserved.
const RESERVED: Record<string, number> = { Core: 50, Secrets: 25, Wallets: 25, Workflows: 150, Executions: 50 };

interface Group {
  handler: string;
  link?: unknown[];
  environment?: Record<string, $util.Input<string>>;
  permissions?: Permission[];
}

/** One group's function: the table and the router's secret (to trust the viewer's address), plus its own needs. */
const group = (name: string, { handler, link = [], environment = {}, permissions = [] }: Group) =>
  new sst.aws.Function(`Api${name}`, {
    handler,
    // Node 22: Node 20 reached its end of life in April 2026 and the AWS SDK's releases from January 2027
    // require 22. SST bundles with esbuild (target esnext, ESM, minified); bench/lambda-bundle.ts reproduces
    // that build with target node22 for the bundle budget and tests/functions/bundles.test.ts. The code itself keeps
    // running on Node 20 (package.json engines) for `npm start` and the tests.
    runtime: "nodejs22.x",
    architecture: "arm64",
    memory: "512 MB",
    // API Gateway gives up at 30 s; a blocking trigger answers by 25 s (blocking_trigger_wait_ms).
    timeout: "29 seconds",
    link: [table, routerSecret, ...link],
    environment: { ...keyEnvironment, ...environment },
    permissions,
    concurrency: production ? { reserved: RESERVED[name] } : undefined,
  });

/** Only sign-in signs tokens (with the stage's KMS token key); every other group verifies them with the public half. */
const verify = tokenEnvironment.verify;

/** Health, sign-in, JWKS, the API document and the catch-all. Health checks the table, the key and the default chain. */
export const core = group("Core", {
  handler: "functions/core.handler",
  link: [chains],
  environment: { AUTH_ALLOWED_URIS: authAllowedUrisValue, ...tokenEnvironment.sign },
  permissions: [tableDescribe, keyPermissions.describe, keyPermissions.signTokens],
});

/** Write-only secrets: sealing needs a fresh data key, never a decryption. */
export const secrets = group("Secrets", {
  handler: "functions/secrets.handler",
  environment: verify,
  permissions: [keyPermissions.seal],
});

/** Wallets: addresses from the controller key, withdrawals signed with it; and token metadata read from the chains. */
export const wallets = group("Wallets", {
  handler: "functions/wallets.handler",
  link: [chains],
  environment: { ...verify, ...partnerEnvironment },
  permissions: [keyPermissions.sign],
});

/**
 * Workflows and running them: create, resume, pause, cancel and delete manage the workflow's schedules;
 * asynchronous triggers publish `execution.requested`; simulations and `:run` run here, opening secrets. It never
 * signs: a blocking trigger's run is handed to the runner (the bus is remote on AWS), and simulations send nothing.
 */
export const workflows = group("Workflows", {
  handler: "functions/workflows.handler",
  link: [chains, runnerQueue],
  environment: { ...verify, ...schedulerEnvironment, ...sandboxEnvironment },
  // Scripts run in the sandbox function (infra/sandbox.ts).
  permissions: [keyPermissions.open, ...schedulerPermissions.manage, sandboxInvoke],
});

/**
 * Reading executions (the buffered `:stream` is reached only by calling API Gateway directly), and signals, which
 * hand a run whose wait ended to the runner through the bus.
 */
export const executions = group("Executions", { handler: "functions/executions.handler", link: [runnerQueue], environment: verify });

// SST writes an empty CORS configuration for `cors: false`, and API Gateway then answers every preflight itself,
// without CORS headers. With no configuration at all, OPTIONS reaches the app, which answers CORS (API.md §1.4).
export const api = new sst.aws.ApiGatewayV2("Api", {
  cors: false,
  transform: {
    api: (args) => {
      delete args.corsConfiguration;
    },
  },
});

const routes: [string, sst.aws.Function][] = [
  ["ANY /secrets", secrets], // the app answers 405 for methods /secrets does not take
  ["ANY /secrets/{proxy+}", secrets],
  ["ANY /wallets", wallets],
  ["ANY /wallets/{proxy+}", wallets],
  ["ANY /tokens/{proxy+}", wallets], // GET /tokens/{address} (API.md §17.4)
  ["ANY /workflows", workflows],
  ["ANY /workflows/{proxy+}", workflows],
  // Top-level verbs (`/workflows:count`) are a segment of their own: neither route above matches them.
  ...["count", "simulate", "estimateFees"].map((verb): [string, sst.aws.Function] => [`ANY /workflows:${verb}`, workflows]),
  // Running one part (API.md §17.2, §17.3) is the workflows group's too.
  ["ANY /nodes:run", workflows],
  ["ANY /triggers:run", workflows],
  ["ANY /executions", executions],
  ["ANY /executions/{proxy+}", executions],
  ...["count", "stats"].map((verb): [string, sst.aws.Function] => [`ANY /executions:${verb}`, executions]),
  ["$default", core],
];
for (const [route, fn] of routes) api.route(route, fn.arn);
