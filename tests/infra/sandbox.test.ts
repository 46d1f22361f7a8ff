/**
 * The sandbox function (infra/sandbox.ts) on the offline resource graph (tests/infra/graph.ts): user JavaScript
 * runs where no credential is. Its role grants nothing but logs, it links nothing, the functions that run scripts
 * may invoke it and nothing more of it, production keeps instances initialized ahead, and its bundle is the
 * QuickJS evaluation alone (no AWS SDK, no table, no keys).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { bundleLambda } from "../../bench/lambda-bundle";
import { buildGraph, ensurePlatform, type Graph, type GraphResource } from "./graph";

let test: Graph;
let production: Graph;
beforeAll(async () => {
  ensurePlatform();
  [test, production] = await Promise.all([buildGraph(), buildGraph({ stage: "production" })]);
}, 300_000);

const functions = (g: Graph) => g.resources.filter((r) => r.type === "aws:lambda/function:Function");
const variables = (fn: GraphResource) => (fn.inputs.environment as { variables: Record<string, string> }).variables;
const sandboxOf = (g: Graph) => functions(g).find((f) => f.inputs.handler === "functions/sandbox.handler")!;
/** The role resource a function runs with (its `role` input is the role's ARN, which ends with the role's name). */
const roleOf = (g: Graph, fn: GraphResource) =>
  g.resources.find((r) => r.type === "aws:iam/role:Role" && String(fn.inputs.role).endsWith(String(r.inputs.name)))!;
type Statement = { actions: string[]; resources: string[] };
const statements = (role: GraphResource) =>
  ((role.inputs.inlinePolicies ?? []) as { policy: string }[]).flatMap(
    (p) => (JSON.parse(p.policy) as { Statement: Statement[] }).Statement,
  );

describe("the sandbox function", () => {
  it("runs with a role that grants nothing but logs: no inline statement, only Lambda's basic execution policy, no tracing", () => {
    const sandbox = sandboxOf(test);
    const role = roleOf(test, sandbox);
    expect(statements(role)).toEqual([]);
    expect(role.inputs.managedPolicyArns).toEqual(["arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"]);
    expect(sandbox.inputs.tracingConfig).toEqual({ mode: "PassThrough" });
  });

  it("links nothing: no table, secret, key or resource of the app in its environment", () => {
    const env = variables(sandboxOf(test));
    expect(Object.keys(env).sort()).toEqual(["METRICS_NAMESPACE", "SST_KEY_FILE", "SST_RESOURCE_App"]);
    expect(env.SST_RESOURCE_App).toBe(JSON.stringify({ name: "workflow-automation", stage: "test" }));
  });

  it("is sized for QuickJS and its CPU share, and times out behind the scripts' own limit", () => {
    expect(sandboxOf(test).inputs).toMatchObject({ memorySize: 1024, timeout: 10, architectures: ["arm64"], runtime: "nodejs22.x" });
  });

  it("may be invoked by the runner and the workflows function only, which may do nothing else with it", () => {
    const sandbox = sandboxOf(test);
    const arn = `arn:aws:lambda:us-east-1:123456789012:${String(sandbox.inputs.name)}`;
    const callers = functions(test).filter((f) => variables(f).SANDBOX_FUNCTION !== undefined);
    expect(callers.map((f) => f.inputs.handler).sort()).toEqual(["functions/runner.handler", "functions/workflows.handler"]);
    for (const fn of callers) expect(variables(fn).SANDBOX_FUNCTION).toBe(sandbox.inputs.name);
    const grants = new Map<string, Statement[]>();
    for (const role of test.resources.filter((r) => r.type === "aws:iam/role:Role")) {
      const onSandbox = statements(role).filter((s) => s.resources.some((r) => r.startsWith(arn)));
      if (onSandbox.length) grants.set(role.name, onSandbox);
    }
    expect([...grants.keys()].sort()).toEqual(callers.map((f) => roleOf(test, f).name).sort());
    for (const [role, list] of grants)
      expect(list, role).toEqual([{ actions: ["lambda:InvokeFunction"], effect: "Allow", resources: [arn, `${arn}:*`] }]);
  });

  it("keeps instances initialized ahead in production: provisioned concurrency on the published version the callers invoke", () => {
    const sandbox = sandboxOf(production);
    expect(sandbox.inputs.publish).toBe(true);
    const [provisioned] = production.resources.filter(
      (r) => r.type === "aws:lambda/provisionedConcurrencyConfig:ProvisionedConcurrencyConfig",
    );
    expect(provisioned?.inputs).toMatchObject({ functionName: sandbox.inputs.name, provisionedConcurrentExecutions: 2 });
    const runner = functions(production).find((f) => f.inputs.handler === "functions/runner.handler")!;
    expect(variables(runner).SANDBOX_FUNCTION).toBe(`${String(sandbox.inputs.name)}:${String(provisioned!.inputs.qualifier)}`);
    expect(sandboxOf(test).inputs.publish).toBe(false); // previews pay for no idle instance
  });
});

/** What the sandbox function must never carry: the AWS SDK and its clients, SST's resources, the app's other code. */
const NEVER = ["@aws-sdk/", "@smithy/", "@aws-crypto/", "sst", "hono", "viem", "ox", "jose", "croner", "@noble/"];

describe("the sandbox function's bundle", () => {
  it("is the QuickJS evaluation alone: no AWS SDK, no table, no keys, no wiring", async () => {
    const bundle = await bundleLambda("functions/sandbox.ts");
    const packages = [...bundle.packages.keys()];
    expect(packages).toEqual(expect.arrayContaining(["quickjs-emscripten-core", "valibot"]));
    expect(packages.filter((name) => NEVER.some((n) => (n.endsWith("/") ? name.startsWith(n) : name === n)))).toEqual([]);
    const own = Object.entries(Object.values(bundle.metafile.outputs)[0]!.inputs)
      .filter(([path, input]) => !path.includes("node_modules/") && input.bytesInOutput > 0)
      .map(([path]) => path);
    expect(own).toEqual(expect.arrayContaining(["functions/sandbox.ts", "shared/sandbox/evaluator.ts", "shared/sandbox/quickjs.ts"]));
    // Only the evaluation's own modules: not the pool or its workers, not the invoker, nothing outside the sandbox.
    const foreign = own.filter((path) => path !== "functions/sandbox.ts" && !path.startsWith("shared/sandbox/"));
    const dispatch = own.filter((path) => /shared\/sandbox\/(pool|worker|remote|lambda-invoke|session)\.ts$/.test(path));
    expect([...foreign, ...dispatch]).toEqual([]);
  }, 60_000);
});
