/**
 * The bundled functions run as Lambda runs them (tests/support/lambda-host.ts): API Gateway and Function URL
 * payloads, runner queue deliveries, the response-streaming contract, and instances frozen between invocations.
 * What these catch: work left running after an answer (it would be frozen, not finished), an invocation whose
 * event loop empties while it waits (Runtime.NodeJsExit), a watcher that keeps its lease or never returns.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createTestClient, http } from "viem";
import { GetCommand } from "@aws-sdk/lib-dynamodb";
import { stackEnv, useTestRuntime } from "../support/runtime";
import { signIn, type SignedIn } from "../support/auth";
import { LambdaHost, httpEvent, sqsEvent } from "../support/lambda-host";
import { startLambdaInvokeStub, type LambdaInvokeStub } from "../support/lambda-invoke-stub";
import { startSqsStub, type SqsStub } from "../support/sqs-stub";
import { fromSqsRecord } from "../../shared/execution/bus/sqs";
import { createServiceApp } from "../../shared/service/app";
import { Keys } from "../../shared/store/item-keys";
import { useRuntime } from "../../shared/current-runtime";

const WAIT_MS = 2_000;
let workflows: LambdaHost;
let runner: LambdaHost;
let stream: LambdaHost;
let sqs: SqsStub;
/** The sandbox function, which the workflows and runner functions invoke for every script (infra/sandbox.ts). */
let sandbox: LambdaInvokeStub;
let alice: SignedIn & { wallet: string };
let mainTable: string;
const app = createServiceApp();

async function hostEnv(tableName: string): Promise<Record<string, string>> {
  const env = stackEnv();
  return {
    ...env,
    LOG_LEVEL: "error",
    BLOCKING_TRIGGER_WAIT_MS: String(WAIT_MS),
    MIN_BLOCK_INTERVAL_S: "0",
    SST_RESOURCE_Table: JSON.stringify({ name: tableName }),
    SST_RESOURCE_JwtSigningKey: JSON.stringify({ value: env.JWT_SIGNING_KEY }),
    // The queue's URL names its endpoint (the SDK sends there): the stub's.
    SST_RESOURCE_RunnerQueue: JSON.stringify({ url: `${sqs.url}/123456789012/app-RunnerQueue` }),
    AWS_ENDPOINT_URL_SQS: sqs.url,
    SANDBOX_FUNCTION: "sandbox",
    AWS_ENDPOINT_URL_LAMBDA: sandbox.url,
    AWS_REGION: "us-east-1",
    AWS_ACCESS_KEY_ID: "AKIDHARNESS",
    AWS_SECRET_ACCESS_KEY: "harness-secret",
  };
}

beforeAll(async () => {
  const tableName = (mainTable = `harness-${randomUUID()}`);
  await useTestRuntime({ TABLE_NAME: tableName, MIN_BLOCK_INTERVAL_S: "0" });
  sandbox = await startLambdaInvokeStub("sandbox", {
    AWS_REGION: "us-east-1",
    AWS_ACCESS_KEY_ID: "AKIDSANDBOX",
    AWS_SECRET_ACCESS_KEY: "sandbox",
  });
  sqs = await startSqsStub({
    // The runner queue's event source mapping hands each message to the runner.
    deliver: async (m) => void (await runner.invoke(sqsEvent([{ body: m.MessageBody, groupId: m.MessageGroupId }]), { timeoutMs: 60_000 })),
  });
  const env = await hostEnv(tableName);
  [workflows, runner, stream] = await Promise.all([
    LambdaHost.start("workflows", env),
    LambdaHost.start("runner", env),
    LambdaHost.start("stream", env),
  ]);
  alice = await withWallet(await signIn(app));
}, 120_000);

async function withWallet(who: SignedIn): Promise<SignedIn & { wallet: string }> {
  const res = await app.request("/wallets", {
    method: "POST",
    headers: { ...who.headers, "content-type": "application/json" },
    body: JSON.stringify({ salt: "1" }),
  });
  expect(res.status).toBe(201);
  return { ...who, wallet: ((await res.json()) as { address: string }).address };
}

afterAll(async () => {
  await Promise.all([workflows?.close(), runner?.close(), stream?.close()]);
  await sqs?.close();
  await sandbox?.close();
});

/** What the functions sent to the runner queue: each message's group and the event its body holds. */
const requested = () => sqs.messages.map((m) => [m.MessageGroupId, fromSqsRecord({ body: m.MessageBody })] as const);

type Answer = { statusCode: number; headers?: Record<string, string>; body?: string };
const call = async (host: LambdaHost, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
  const { result } = await host.invoke<Answer>(
    httpEvent(method, path, {
      headers: { ...alice.headers, "content-type": "application/json", ...headers },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    }),
  );
  return { status: result.statusCode, json: (result.body ? JSON.parse(result.body) : null) as Record<string, unknown> };
};

/** A manual workflow whose one step spins for `ms` in the sandbox. */
async function slowWorkflow(ms: number): Promise<string> {
  const created = await call(workflows, "POST", "/workflows", {
    smartWalletAddress: alice.wallet,
    trigger: { name: "go", type: "manual", config: {} },
    nodes: [
      {
        id: "spin",
        name: "spin",
        type: "customCode",
        config: { source: `const t = Date.now() + ${ms}; while (Date.now() < t) {} return "done";` },
      },
    ],
    maxExecution: 10,
  });
  expect(created.status, JSON.stringify(created.json)).toBe(201);
  return String(created.json.id);
}

/** A blocking manual trigger through the workflows function, with an Idempotency-Key. */
const blockingTrigger = (workflowId: string, key: string) =>
  call(workflows, "POST", `/workflows/${workflowId}:trigger`, { triggerType: "manual", isBlocking: true }, { "idempotency-key": key });

async function execution(workflowId: string, executionId: string) {
  const res = await app.request(`/executions/${executionId}?workflowId=${workflowId}`, { headers: alice.headers });
  return (await res.json()) as { status: string; steps: { id: string; output: { data: unknown } }[] };
}

async function until<T>(read: () => Promise<T>, done: (t: T) => boolean, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > end) return value;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe("a blocking trigger on Lambda", () => {
  it("answers pending at the wait while the run goes on in the runner function, the HTTP instance frozen", async () => {
    const id = await slowWorkflow(WAIT_MS + 2_000);
    const started = Date.now();
    const answer = await call(workflows, "POST", `/workflows/${id}:trigger`, { triggerType: "manual", isBlocking: true });
    const took = Date.now() - started;
    expect(answer.status).toBe(200);
    expect(answer.json.status).toBe("pending");
    expect(took).toBeGreaterThanOrEqual(WAIT_MS - 100);
    expect(workflows.frozen).toBe(true);
    // The run was handed to the runner through its queue, in alice's group, not left in the frozen HTTP instance.
    const executionId = String(answer.json.executionId);
    expect(requested()).toContainEqual([
      alice.owner.toLowerCase(),
      { type: "execution.requested", workflowId: id, executionId, owner: alice.owner },
    ]);
    const finished = await until(
      () => execution(id, executionId),
      (e) => e.status !== "pending",
    );
    expect(finished.status).toBe("success");
    expect(finished.steps.find((s) => s.id === "spin")?.output.data).toBe("done");
    expect(workflows.frozen).toBe(true);
  }, 60_000);

  it("answers a finished run at once, and a replay of its Idempotency-Key answers the same execution", async () => {
    const id = await slowWorkflow(10);
    const key = randomUUID();
    const first = await blockingTrigger(id, key);
    expect([first.status, first.json.status]).toEqual([200, "success"]);
    const again = await blockingTrigger(id, key);
    expect(again.status).toBe(200);
    expect(again.json).toEqual(first.json);
  }, 60_000);

  it("a replay that arrives while the run goes on waits for it in the invocation (no empty event loop) and answers its end", async () => {
    const id = await slowWorkflow(WAIT_MS + 1_000);
    const key = randomUUID();
    const first = await blockingTrigger(id, key);
    expect(first.json.status).toBe("pending");
    const again = await blockingTrigger(id, key);
    expect(again.status).toBe(200);
    expect(again.json.executionId).toBe(first.json.executionId);
    expect(again.json.status).toBe("success");
  }, 60_000);
});

describe("an await node on Lambda (API.md §17.1)", () => {
  it("the run suspends in the runner function; a signal to the executions function hands it back through the runner queue", async () => {
    const executions = await LambdaHost.start("executions", await hostEnv(mainTable));
    try {
      const created = await call(workflows, "POST", "/workflows", {
        smartWalletAddress: alice.wallet,
        trigger: { id: "t", name: "go", type: "manual", config: { data: { n: 1 } } },
        nodes: [
          { id: "gate", name: "gate", type: "await", config: { channel: "api" } },
          { id: "after", name: "after", type: "customCode", config: { source: "return go.data.n + gate.data.payload" } },
        ],
      });
      expect(created.status, JSON.stringify(created.json)).toBe(201);
      const id = String(created.json.id);
      const started = await call(workflows, "POST", `/workflows/${id}:trigger`, { triggerType: "manual", isBlocking: true });
      expect(started.json.status).toBe("waiting");
      const executionId = String(started.json.executionId);
      const signalled = await call(executions, "POST", `/executions/${executionId}:signal?workflowId=${id}`, {
        decision: "approve",
        payload: 41,
      });
      expect(signalled.status, JSON.stringify(signalled.json)).toBe(200);
      const settled = await until(
        () => execution(id, executionId),
        (e) => e.status !== "pending" && e.status !== "waiting",
      );
      // The answer waits at most BLOCKING_TRIGGER_WAIT_MS (2 s here) for the resumed run; a cold sandbox may take longer.
      expect(["pending", "success"]).toContain(signalled.json.status);
      expect(settled.status).toBe("success");
      expect(requested()).toContainEqual([
        alice.owner.toLowerCase(),
        {
          type: "execution.requested",
          workflowId: id,
          executionId,
          owner: alice.owner,
          resume: true,
          from: { generation: 1, pendingMs: expect.any(Number) },
        },
      ]);
      expect(settled.steps.find((s) => s.id === "after")?.output.data).toBe(42);
    } finally {
      await executions.close();
    }
  }, 90_000);
});

describe("running one part on Lambda (API.md §17.2, §17.3)", () => {
  it("the workflows function answers /nodes:run and /triggers:run", async () => {
    const node = { id: "c", name: "c", type: "customCode", config: { source: "return 6 * 7" } };
    const ran = await call(workflows, "POST", "/nodes:run", { node });
    expect(ran.status, JSON.stringify(ran.json)).toBe(200);
    expect(ran.json).toMatchObject({ success: true, output: { data: 42 } });
    const manual = { id: "m", name: "m", type: "manual", config: { data: { a: 1 } } };
    const trigger = await call(workflows, "POST", "/triggers:run", { trigger: manual });
    expect(trigger.status, JSON.stringify(trigger.json)).toBe(200);
    expect(trigger.json).toEqual({
      success: true,
      output: { data: { a: 1 }, headers: {}, pathParams: {} },
      executionContext: { is_simulated: false, provider: "sandbox", chain_id: null },
    });
  });
});

describe("the stream through the Function URL contract", () => {
  it("streams the frames of a running execution as they happen, and ends with it", async () => {
    const id = await slowWorkflow(2_500);
    const answer = await call(workflows, "POST", `/workflows/${id}:trigger`, { triggerType: "manual", isBlocking: false });
    expect(answer.status).toBe(202);
    const executionId = String(answer.json.executionId);
    const res = await stream.stream(
      httpEvent("GET", `/executions/${executionId}:stream`, {
        functionUrl: true,
        rawQueryString: `workflowId=${id}`,
        headers: { ...alice.headers, accept: "text/event-stream" },
      }),
      { timeoutMs: 60_000 },
    );
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^text\/event-stream/);
    expect(res.body).toMatch(/"status":"success"/);
    // Frames arrived over the run, not as one buffered answer at its end.
    expect(res.arrivals.length).toBeGreaterThan(1);
    expect(res.arrivals.at(-1)! - res.arrivals[0]!).toBeGreaterThan(1_000);
    expect(stream.frozen).toBe(true);
  }, 60_000);
});

describe("the watcher invocation", () => {
  it("with nothing to watch returns at once and takes no lease; with a block workflow fires, awaits its work and releases its lease", async () => {
    const env = await hostEnv(`harness-watch-${randomUUID()}`);
    await useTestRuntime({ TABLE_NAME: JSON.parse(env.SST_RESOURCE_Table!).name, MIN_BLOCK_INTERVAL_S: "0" });
    const watcher = await LambdaHost.start("watcher", env);
    const chainId = 31337;
    try {
      let started = Date.now();
      await watcher.invoke({ source: "aws.scheduler" }, { timeoutMs: 14_000 });
      expect(Date.now() - started).toBeLessThan(2_000);
      const { db, config } = useRuntime();
      const checkpoint = () =>
        db.send(new GetCommand({ TableName: config.tableName, Key: Keys.chainCheckpoint(chainId), ConsistentRead: true }));
      expect((await checkpoint()).Item).toBeUndefined();

      const bob = await withWallet(await signIn(app));
      const created = await app.request("/workflows", {
        method: "POST",
        headers: { ...bob.headers, "content-type": "application/json" },
        body: JSON.stringify({
          smartWalletAddress: bob.wallet,
          trigger: { name: "tick", type: "block", config: { interval: 1 } },
          nodes: [{ id: "n", name: "n", type: "customCode", config: { source: "return tick.data.blockNumber" } }],
          maxExecution: 3,
        }),
      });
      expect(created.status).toBe(201);
      const rpcUrl = (JSON.parse(env.CHAINS!) as { chainId: number; rpcUrl: string }[]).find((c) => c.chainId === chainId)!.rpcUrl;
      const mining = setInterval(() => void createTestClient({ mode: "anvil", transport: http(rpcUrl) }).mine({ blocks: 1 }), 500);
      started = Date.now();
      try {
        await watcher.invoke({ source: "aws.scheduler" }, { timeoutMs: 14_000 });
      } finally {
        clearInterval(mining);
      }
      // It loops until its margin (8 s before the timeout), then returns with its lease released.
      expect(Date.now() - started).toBeLessThan(14_000);
      const item = (await checkpoint()).Item as { leaseOwner?: string; leaseUntil?: number } | undefined;
      expect(item).toBeDefined();
      expect(item!.leaseOwner === undefined || (item!.leaseUntil ?? 0) <= Date.now()).toBe(true);
      const workflowId = String(((await created.json()) as { id: string }).id);
      expect(requested().some(([, e]) => e?.workflowId === workflowId)).toBe(true);
    } finally {
      await watcher.close();
    }
  }, 90_000);
});

describe("every other function under the harness", () => {
  it("core, secrets, wallets and executions answer API Gateway events; the sweeper and the schedule target answer their invocations; every log line names its invocation", async () => {
    // EventBridge Scheduler's API, for the schedule target's clean-up of a schedule whose workflow is gone.
    const schedulerCalls: string[] = [];
    const scheduler = createServer((req, res) => {
      schedulerCalls.push(`${req.method} ${req.url}`);
      req.resume().on("end", () => res.writeHead(200, { "content-type": "application/json" }).end("{}"));
    });
    await new Promise<void>((resolve) => scheduler.listen(0, "127.0.0.1", resolve));
    const env = {
      ...(await hostEnv(mainTable)),
      LOG_LEVEL: "info",
      AWS_ENDPOINT_URL_SCHEDULER: `http://127.0.0.1:${(scheduler.address() as AddressInfo).port}`,
      SCHEDULE_GROUP: "harness",
      SCHEDULE_TARGET_ARN: "arn:aws:lambda:us-east-1:123456789012:function:schedule",
      SCHEDULER_ROLE_ARN: "arn:aws:iam::123456789012:role/scheduler",
      SCHEDULE_DEAD_LETTER_ARN: "arn:aws:sqs:us-east-1:123456789012:dead-letters",
    };
    const names = ["core", "secrets", "wallets", "executions", "sweeper", "schedule"] as const;
    const hosts = Object.fromEntries(await Promise.all(names.map(async (n) => [n, await LambdaHost.start(n, env)] as const))) as Record<
      (typeof names)[number],
      LambdaHost
    >;
    try {
      expect((await call(hosts.core, "GET", "/health")).status).toBe(200);
      expect((await call(hosts.secrets, "PUT", "/secrets/HARNESS", { value: "s3cret" })).status).toBe(201);
      expect((await call(hosts.secrets, "GET", "/secrets")).json.data).toEqual([expect.objectContaining({ name: "HARNESS" })]);
      expect((await call(hosts.wallets, "GET", "/wallets")).json.data).toEqual([expect.objectContaining({ address: alice.wallet })]);
      // GET /tokens/{address} is served by the wallets function (infra/api.ts).
      expect((await call(hosts.wallets, "GET", "/tokens/0xEeeeeEeeeEeEeeEeEeEeeEEEeeeeEeeeeeeeEEeE")).json).toMatchObject({
        found: true,
        source: "native",
      });
      expect((await call(hosts.executions, "GET", "/executions")).status).toBe(200);
      const swept = await hosts.sweeper.invoke<Record<string, unknown>>({ source: "aws.scheduler" }, { timeoutMs: 30_000 });
      expect(swept.result).toMatchObject({ executions: { timedOut: 0 } });
      const fire = await hosts.schedule.invoke<{ outcome: string }>({
        workflowId: "01JWORKFLOW0000000000000000",
        triggerId: "t",
        instant: Date.now(),
      });
      expect(fire.result.outcome).not.toBe("fired");
      // A fire of a workflow that is gone looks for its schedules to remove them (none here).
      expect(schedulerCalls).toEqual(["GET /schedules?NamePrefix=01JWORKFLOW0000000000000000-&ScheduleGroup=harness"]);
      for (const host of Object.values(hosts)) expect(host.frozen).toBe(true);
      // Logs carry the invocation's awsRequestId (shared/log.ts), HTTP functions and workers alike.
      const lines = Object.values(hosts).flatMap((h) =>
        h.output
          .filter((l) => l.startsWith("{"))
          .map((l) => ({ host: h.name, ...(JSON.parse(l) as { message: string; awsRequestId?: string }) })),
      );
      expect(lines).toContainEqual(expect.objectContaining({ host: "schedule", message: "time fire not run", awsRequestId: "schedule-1" }));
      for (const line of lines) expect(line.awsRequestId, JSON.stringify(line)).toMatch(new RegExp(`^${line.host}-\\d+$`));
    } finally {
      await Promise.all(Object.values(hosts).map((h) => h.close()));
      scheduler.close();
    }
  }, 90_000);
});

describe("answers within Lambda's 6 MB response limit (the harness fails any envelope above it)", () => {
  // JSON text full of quotes doubles in the envelope, where the body is a JSON string: `"` → `\"` → `\\\"`.
  const QUOTES = 55_000;
  // An earlier test points this process at another table: back to the one the hosts serve.
  beforeAll(() => useTestRuntime({ TABLE_NAME: mainTable, MIN_BLOCK_INTERVAL_S: "0" }));

  it("a page of workflows full of quotes ends early, its envelope within the limit, and the next page goes on", async () => {
    const bob = await withWallet(await signIn(app));
    const ids: string[] = [];
    for (let i = 0; i < 40; i += 1) {
      const res = await call(
        workflows,
        "POST",
        "/workflows",
        {
          smartWalletAddress: bob.wallet,
          trigger: { id: "t", name: "go", type: "manual", config: {} },
          nodes: [{ id: "n", name: "n", type: "customCode", config: { source: "return 1" } }],
          inputVariables: { quotes: '"'.repeat(QUOTES) },
        },
        bob.headers,
      );
      expect(res.status).toBe(201);
      ids.push(String(res.json.id));
    }
    // 40 × ~110 KB is ~4.4 MB of body (within the 5 MiB page) but ~8.8 MB escaped in the envelope.
    const page = (after?: string) =>
      workflows.invoke<Answer>(
        httpEvent("GET", "/workflows", { headers: bob.headers, rawQueryString: `limit=200${after ? `&after=${after}` : ""}` }),
      );
    const first = await page();
    expect(first.result.statusCode).toBe(200);
    expect(first.bytes).toBeLessThanOrEqual(6_291_456);
    const body = JSON.parse(first.result.body!) as { data: { id: string }[]; pageInfo: { hasNextPage: boolean; endCursor: string } };
    expect(body.pageInfo.hasNextPage).toBe(true);
    expect(body.data.length).toBeLessThan(40);
    const second = await page(body.pageInfo.endCursor);
    expect(second.bytes).toBeLessThanOrEqual(6_291_456);
    const rest = (JSON.parse(second.result.body!) as { data: { id: string }[] }).data;
    expect([...body.data, ...rest].map((w) => w.id)).toEqual([...ids].reverse());
  }, 120_000);

  it("an execution of quote-heavy outputs (4 MiB of body, ~8 MiB escaped) replaces more outputs to fit", async () => {
    const executions = await LambdaHost.start("executions", await hostEnv(mainTable));
    try {
      const nodes = Array.from({ length: 17 }, (_, i) => ({
        id: `q${i}`,
        name: `q${i}`,
        type: "customCode",
        config: { source: `return '"'.repeat(120000)` },
      }));
      const created = await call(workflows, "POST", "/workflows", {
        smartWalletAddress: alice.wallet,
        trigger: { id: "t", name: "go", type: "manual", config: {} },
        nodes,
      });
      expect(created.status, JSON.stringify(created.json)).toBe(201);
      const id = String(created.json.id);
      const started = await call(workflows, "POST", `/workflows/${id}:trigger`, { triggerType: "manual" });
      const executionId = String(started.json.executionId);
      const read = () =>
        executions.invoke<Answer>(
          httpEvent("GET", `/executions/${executionId}`, { headers: alice.headers, rawQueryString: `workflowId=${id}` }),
        );
      const answer = await until(read, (a) => a.result.statusCode !== 200 || !a.result.body!.includes('"status":"pending"'), 60_000);
      expect(answer.result.statusCode).toBe(200);
      expect(answer.bytes).toBeLessThanOrEqual(6_291_456);
      const steps = (JSON.parse(answer.result.body!) as { steps: { id: string; output: { truncated?: boolean } }[] }).steps;
      expect(JSON.parse(answer.result.body!)).toMatchObject({ status: "success" });
      expect(steps).toHaveLength(18);
      expect(steps.filter((s) => s.output.truncated).length).toBeGreaterThan(1);
      const listed = await executions.invoke<Answer>(
        httpEvent("GET", "/executions", { headers: alice.headers, rawQueryString: `workflowId=${id}` }),
      );
      expect(listed.bytes).toBeLessThanOrEqual(6_291_456);
    } finally {
      await executions.close();
    }
  }, 120_000);
});
