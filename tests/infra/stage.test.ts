/**
 * What a deploy of a stage creates, read from the resource graph that `sst.config.ts` builds against Pulumi's
 * mocks (tests/infra/graph.ts): no AWS account, the same SST components and provider a deploy runs.
 */
import { FUNCTIONS } from "./functions";
import { describe, expect, it } from "vitest";
import { createPublicKey } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { DEFAULT_SECRETS, ROOT, stageGraph } from "./graph";

const { graph, ofType, one } = stageGraph();
const lambdas = () => ofType("aws:lambda/function:Function");

const HTTP = ["ApiCore", "ApiSecrets", "ApiWallets", "ApiWorkflows", "ApiExecutions", "ExecutionStream"];
/** The functions whose code starts or stops a workflow's schedules (create/resume/pause/cancel, completion). */
const SCHEDULING = ["ApiWorkflows", "ScheduleTarget", "Runner", "WithdrawalFollowUpHandler", "ChainWatcherHandler"];

const lambdaOf = (id: string) => one("aws:lambda/function:Function", `${id}Function`);
const environmentOf = (id: string) =>
  ((lambdaOf(id).inputs.environment as { variables?: Record<string, string> } | undefined)?.variables ?? {}) as Record<string, string>;

interface Statement {
  actions: string[];
  resources: string[];
}
const statementsOf = (id: string): Statement[] => {
  const role = one("aws:iam/role:Role", `${id}Role`);
  const policies = (role.inputs.inlinePolicies ?? []) as { policy: string }[];
  return policies.flatMap((p) => (JSON.parse(p.policy) as { Statement: Statement[] }).Statement);
};
const actionsOf = (id: string) => [...new Set(statementsOf(id).flatMap((s) => s.actions))].sort();

const TABLE = [
  "dynamodb:BatchGetItem",
  "dynamodb:ConditionCheckItem",
  "dynamodb:DeleteItem",
  "dynamodb:GetItem",
  "dynamodb:PutItem",
  "dynamodb:Query",
  "dynamodb:UpdateItem",
];
const STOP_SCHEDULES = ["scheduler:DeleteSchedule", "scheduler:ListSchedules"];
const MANAGE_SCHEDULES = [...STOP_SCHEDULES, "scheduler:CreateSchedule", "iam:PassRole"];

describe("functions: one per endpoint group, plus the workers and the stream", () => {
  it("deploys exactly these functions, each built from its entry point in functions/", () => {
    const built = Object.fromEntries(graph().builds.map((b) => [b.functionID, b.handler]));
    expect(built).toEqual(FUNCTIONS);
    for (const handler of Object.values(FUNCTIONS)) expect(existsSync(join(ROOT, handler.replace(/\.handler$/, ".ts")))).toBe(true);
    expect(lambdas()).toHaveLength(Object.keys(FUNCTIONS).length);
  });

  it("runs every function on Node 22 (arm64)", () => {
    for (const fn of lambdas()) {
      expect(fn.inputs.runtime, fn.name).toBe("nodejs22.x");
      expect(fn.inputs.architectures, fn.name).toEqual(["arm64"]);
    }
  });

  it("routes every API path to its group's one function, the rest to core", () => {
    const functionByArn = new Map(lambdas().map((fn) => [`arn:aws:lambda:us-east-1:123456789012:${String(fn.inputs.name)}`, fn.name]));
    const integrationById = new Map(ofType("aws:apigatewayv2/integration:Integration").map((i) => [`${i.name}-id`, i]));
    const routes = Object.fromEntries(
      ofType("aws:apigatewayv2/route:Route").map((route) => {
        const integration = integrationById.get(String(route.inputs.target).replace(/^integrations\//, ""));
        const fn = functionByArn.get(String(integration?.inputs.integrationUri));
        return [String(route.inputs.routeKey), fn?.replace(/Function$/, "")];
      }),
    );
    expect(routes).toEqual({
      "ANY /secrets": "ApiSecrets",
      "ANY /secrets/{proxy+}": "ApiSecrets",
      "ANY /wallets": "ApiWallets",
      "ANY /wallets/{proxy+}": "ApiWallets",
      "ANY /tokens/{proxy+}": "ApiWallets",
      "ANY /workflows": "ApiWorkflows",
      "ANY /workflows/{proxy+}": "ApiWorkflows",
      "ANY /workflows:count": "ApiWorkflows",
      "ANY /workflows:simulate": "ApiWorkflows",
      "ANY /workflows:estimateFees": "ApiWorkflows",
      "ANY /nodes:run": "ApiWorkflows",
      "ANY /triggers:run": "ApiWorkflows",
      "ANY /executions": "ApiExecutions",
      "ANY /executions/{proxy+}": "ApiExecutions",
      "ANY /executions:count": "ApiExecutions",
      "ANY /executions:stats": "ApiExecutions",
      $default: "ApiCore",
    });
  });

  it("leaves CORS to the app: no CORS configuration on API Gateway or the Function URL", () => {
    const [api] = ofType("aws:apigatewayv2/api:Api");
    expect(api?.inputs).not.toHaveProperty("corsConfiguration");
    const [url] = ofType("aws:lambda/functionUrl:FunctionUrl");
    expect(url?.inputs.cors).toBeUndefined();
  });

  it("streams through the Function URL (RESPONSE_STREAM), the stream's own function", () => {
    const urls = ofType("aws:lambda/functionUrl:FunctionUrl");
    expect(urls).toHaveLength(1);
    expect(urls[0]!.inputs.invokeMode).toBe("RESPONSE_STREAM");
    expect(urls[0]!.inputs.functionName).toBe(lambdaOf("ExecutionStream").inputs.name);
    expect(Number(environmentOf("ExecutionStream").STREAM_MAX_MS)).toBeLessThan(15 * 60_000);
    // Invocable by the router only (tests/infra/router.test.ts): IAM authorization, no grant to everyone.
    expect(urls[0]!.inputs.authorizationType).toBe("AWS_IAM");
    const grants = ofType("aws:lambda/permission:Permission").filter((p) => p.inputs.function === lambdaOf("ExecutionStream").inputs.name);
    expect(grants.map((p) => p.inputs.action).sort()).toEqual(["lambda:InvokeFunction", "lambda:InvokeFunctionUrl"]);
    for (const grant of grants) expect(grant.inputs.principal).toBe("cloudfront.amazonaws.com");
  });
});

describe("least privilege: links, IAM actions, settings", () => {
  it("links each function to what it uses only; no key is linked (the token key is in KMS: tests/infra/keys.test.ts)", () => {
    const links = Object.fromEntries(graph().builds.map((b) => [b.functionID, Object.keys(b.links).sort()]));
    expect(links).toEqual({
      ApiCore: ["Chains", "RouterSecret", "Table"],
      ApiSecrets: ["RouterSecret", "Table"],
      ApiWallets: ["Chains", "RouterSecret", "Table"],
      ApiWorkflows: ["Chains", "RouterSecret", "RunnerQueue", "Table"],
      ApiExecutions: ["RouterSecret", "RunnerQueue", "Table"],
      ExecutionStream: ["RouterSecret", "Table"],
      Runner: ["Chains", "Table"],
      ChainWatcherHandler: ["Chains", "RunnerQueue", "Table"],
      WithdrawalFollowUpHandler: ["Chains", "RunnerQueue", "Table"],
      ScheduleTarget: ["Chains", "RunnerQueue", "Table"],
      Sandbox: [],
    });
  });

  it("grants each function only the actions its code calls", () => {
    const actions = Object.fromEntries(Object.keys(FUNCTIONS).map((id) => [id, actionsOf(id)]));
    const sorted = (...lists: string[][]) => [...new Set(lists.flat())].sort();
    expect(actions).toEqual({
      ApiCore: sorted(TABLE, ["dynamodb:DescribeTable", "kms:DescribeKey", "kms:Sign"]),
      ApiSecrets: sorted(TABLE, ["kms:GenerateDataKey"]),
      ApiWallets: sorted(TABLE, ["kms:Sign", "kms:GetPublicKey"]),
      // Blocking triggers hand their run to the runner and simulations send nothing: no signing here.
      // Scripts of blocking triggers, simulations and nodes:run run in the sandbox function (infra/sandbox.ts).
      ApiWorkflows: sorted(TABLE, ["kms:Decrypt", "sqs:SendMessage", "lambda:InvokeFunction"], MANAGE_SCHEDULES),
      ApiExecutions: sorted(TABLE, ["sqs:SendMessage"]),
      ExecutionStream: sorted(TABLE),
      Runner: sorted(
        TABLE,
        ["kms:Decrypt", "kms:GenerateDataKey", "kms:Sign", "kms:GetPublicKey", "lambda:InvokeFunction"],
        ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"],
        STOP_SCHEDULES,
      ),
      // The workers' failure destinations (infra/watcher.ts, infra/sweeper.ts) are written with their roles.
      ChainWatcherHandler: sorted(TABLE, ["sqs:SendMessage"], STOP_SCHEDULES),
      WithdrawalFollowUpHandler: sorted(TABLE, ["sqs:SendMessage"], STOP_SCHEDULES),
      ScheduleTarget: sorted(TABLE, ["sqs:SendMessage"], MANAGE_SCHEDULES),
      // User JavaScript runs where no credential is: the role grants nothing but its logs.
      Sandbox: [],
    });
  });

  it("names resources in every statement: no wildcard action, `*` only for ListSchedules", () => {
    for (const id of Object.keys(FUNCTIONS)) {
      for (const s of statementsOf(id)) {
        expect(
          s.actions.filter((a) => a.includes("*")),
          id,
        ).toEqual([]);
        if (s.resources.includes("*")) expect(s.actions, id).toEqual(["scheduler:ListSchedules"]);
      }
    }
    const table = one("aws:dynamodb/table:Table", "TableTable").inputs.name as string;
    const tableArn = `arn:aws:dynamodb:us-east-1:123456789012:${table}`;
    const tableStatement = statementsOf("ApiExecutions").find((s) => s.actions.includes("dynamodb:GetItem"));
    expect(tableStatement?.resources.sort()).toEqual([tableArn, `${tableArn}/index/*`]);
  });

  it("keeps secrets out of plaintext environment variables", () => {
    const secretValues = [DEFAULT_SECRETS.Chains!];
    for (const id of Object.keys(FUNCTIONS)) {
      const environment = environmentOf(id);
      expect(Object.keys(environment), id).not.toContain("CHAINS");
      expect(Object.keys(environment), id).not.toContain("JWT_SIGNING_KEY");
      for (const value of Object.values(environment))
        for (const secret of secretValues) expect(value.includes(secret), `${id} carries a secret`).toBe(false);
    }
  });

  it("gives the HTTP functions the public half of the token key, core its KMS key; core the allowed sign-in URIs", () => {
    const [read] = graph().calls.filter((c) => c.token === "aws:kms/getPublicKey:getPublicKey");
    expect(read?.inputs.keyId).toBe(`arn:aws:kms:us-east-1:123456789012:TokenKey-physical`);
    const publicPem = environmentOf("ApiCore").JWT_PUBLIC_KEY;
    expect(createPublicKey(publicPem!).asymmetricKeyDetails?.namedCurve).toBe("prime256v1");
    for (const id of HTTP) expect(environmentOf(id).JWT_PUBLIC_KEY, id).toBe(publicPem);
    expect(environmentOf("ApiCore").JWT_KMS_KEY_ID).toBe(read?.inputs.keyId);
    for (const id of Object.keys(FUNCTIONS).filter((id) => !HTTP.includes(id)))
      expect(environmentOf(id), id).not.toHaveProperty("JWT_PUBLIC_KEY");
    for (const id of Object.keys(FUNCTIONS).filter((id) => id !== "ApiCore"))
      expect(environmentOf(id), id).not.toHaveProperty("JWT_KMS_KEY_ID");
    expect(environmentOf("ApiCore").AUTH_ALLOWED_URIS).toBe(DEFAULT_SECRETS.AuthAllowedUris);
  });

  it("configures the EventBridge scheduler wherever a workflow's schedules are made or removed", () => {
    const [group] = ofType("aws:scheduler/scheduleGroup:ScheduleGroup");
    for (const id of Object.keys(FUNCTIONS)) {
      const environment = environmentOf(id);
      if (SCHEDULING.includes(id)) {
        expect(environment.SCHEDULE_GROUP, id).toBe(group?.inputs.name);
        for (const name of ["SCHEDULE_TARGET_ARN", "SCHEDULER_ROLE_ARN", "SCHEDULE_DEAD_LETTER_ARN"])
          expect(environment[name], id).toBeTruthy();
      } else {
        expect(environment, id).not.toHaveProperty("SCHEDULE_GROUP");
      }
    }
    expect(environmentOf("ApiWorkflows").SCHEDULE_TARGET_ARN).toContain(String(lambdaOf("ScheduleTarget").inputs.name));
  });
});

describe("schedules and the workers", () => {
  it("lets EventBridge Scheduler invoke the schedule target only, through the stage's group", () => {
    const [group] = ofType("aws:scheduler/scheduleGroup:ScheduleGroup");
    expect(group?.inputs.name).toBe("workflow-automation-test");
    const target = String(lambdaOf("ScheduleTarget").inputs.name);
    const policy = JSON.parse(String(one("aws:iam/rolePolicy:RolePolicy", "SchedulerInvokesTarget").inputs.policy)) as {
      Statement: { Action: string; Resource: string | string[] }[];
    };
    const invoke = policy.Statement.find((s) => s.Action === "lambda:InvokeFunction");
    expect([invoke?.Resource ?? []].flat().map((arn) => arn.split(":function:")[1])).toEqual([target, `${target}:*`]);
    expect(policy.Statement.map((s) => s.Action).sort()).toEqual(["lambda:InvokeFunction", "sqs:SendMessage"]);
    expect(lambdaOf("ScheduleTarget").inputs.deadLetterConfig).toBeTruthy();
  });

  it("starts the watcher and the sweeper every minute", () => {
    for (const [rule, fn] of [
      ["ChainWatcher", "ChainWatcherHandler"],
      ["WithdrawalFollowUp", "WithdrawalFollowUpHandler"],
    ] as const) {
      expect(one("aws:cloudwatch/eventRule:EventRule", `${rule}Rule`).inputs.scheduleExpression).toBe("rate(1 minute)");
      expect(String(one("aws:cloudwatch/eventTarget:EventTarget", `${rule}Target`).inputs.arn)).toContain(String(lambdaOf(fn).inputs.name));
    }
  });
});
