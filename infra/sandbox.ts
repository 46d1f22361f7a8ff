// The sandbox function (functions/sandbox.ts): every JavaScript evaluation of a workflow runs here, one per
// invocation, invoked synchronously by the functions that run workflows (the runner; workflows: blocking
// triggers, :simulate, nodes:run). Its role grants nothing but logs and it links nothing: a script that escaped
// QuickJS finds no table, key, secret or credential worth having. docs/isolation.md, "Sandbox function on AWS".
import { production } from "./stage";

/** Production keeps this many instances initialized ahead (provisioned concurrency on a published version). */
const PROVISIONED = 2;
/**
 * Production reserves this many concurrent evaluations: a floor the runner's and the streams' bursts cannot take,
 * and a cap, so scripts cannot take the account (about 10,000 one-line evaluations a second; a throttled
 * invocation is sent again until its deadline, shared/sandbox/remote.ts). infra/api.ts sums the account's shares.
 */
export const SANDBOX_RESERVED = 150;
const BASIC_EXECUTION = "AWSLambdaBasicExecutionRole";

export const sandbox = new sst.aws.Function("Sandbox", {
  handler: "functions/sandbox.handler",
  runtime: "nodejs22.x",
  architecture: "arm64",
  // QuickJS needs ~16 MiB + the script's 64 MiB; the rest buys CPU (Lambda gives CPU in proportion to memory,
  // one vCPU at 1,769 MB), which is what a one-line evaluation's latency is made of.
  memory: "1024 MB",
  // The longest evaluation is sandbox_time_limit_ms (5 s), stopped by QuickJS's interrupt; Lambda's timeout is
  // the backstop for an instance the interrupt could not stop.
  timeout: "10 seconds",
  versioning: production,
  ...(production ? { concurrency: { provisioned: PROVISIONED, reserved: SANDBOX_RESERVED } } : {}),
  transform: {
    // Logs only: the stage's transform (infra/tracing.ts) gives every function X-Ray's write policy and active
    // tracing; this one keeps neither.
    role: (args) => {
      args.managedPolicyArns = $output(args.managedPolicyArns ?? []).apply((arns) =>
        arns.filter((arn) => String(arn).endsWith(BASIC_EXECUTION)),
      );
    },
    function: (fn) => {
      fn.tracingConfig = { mode: "PassThrough" };
    },
  },
});

/** The function the callers invoke: in production its published version, whose instances are provisioned. */
const target = production ? $interpolate`${sandbox.name}:${sandbox.nodes.function.version}` : sandbox.name;

/** What a function that runs scripts gets: the sandbox function's name, and the right to invoke it, nothing else. */
export const sandboxEnvironment = { SANDBOX_FUNCTION: target };
export const sandboxInvoke = { actions: ["lambda:InvokeFunction"], resources: [sandbox.arn, $interpolate`${sandbox.arn}:*`] };
