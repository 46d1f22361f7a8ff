/**
 * The workflow API (API.md §8.1, §8.2, §8.7 items 8-10, §8.8.1-§8.8.6) over a real HTTP server of the whole
 * service on DynamoDB Local, plus the domain functions the execution engine calls (claim, recordOutcome) and the
 * wallet counts of GET /wallets (§11.1). Time-based behaviour (expiry) uses a shifted runtime clock.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GetCommand, PutCommand } from "@aws-sdk/lib-dynamodb";
import { ulid } from "ulid";
import { Client } from "@avaprotocol/sdk-js";
import { generatePrivateKey } from "viem/accounts";
import { useTestRuntime } from "../support/runtime";
import { startTestServer, type TestServer } from "../support/server";
import { jsonClient, type Json, type Owner } from "../support/client";
import { codeNode as code } from "../support/workflows";
import { createServiceApp } from "../../shared/service/app";
import { Keys } from "../../shared/store/item-keys";
import { ApiError } from "../../shared/errors";
import { type WorkflowRecord } from "../../shared/workflow/record";
import { claim, DuplicateFire } from "../../shared/workflow/claim";
import { recordOutcome } from "../../shared/workflow/outcome";
import type { Runtime } from "../../shared/current-runtime";

const CAP = 3;
const MAX_DOC = 12_000;
let runtime: Runtime;
let server: TestServer;
const { call, ownerWithWallet, createWorkflow } = jsonClient(() => server.url);
const newOwner = (salt = "1") => ownerWithWallet(salt);
let offset = 0;
const now = () => Date.now() + offset;
/** Moves the service's clock forward (tokens live 24 h, so minutes are harmless). */
const advance = (ms: number) => {
  offset += ms;
};

beforeAll(async () => {
  runtime = await useTestRuntime({
    MAX_ACTIVE_WORKFLOWS_PER_OWNER: String(CAP),
    MAX_WORKFLOW_BYTES: String(MAX_DOC),
    RATE_LIMIT_BURST: "100000",
    RATE_LIMIT_RPS: "10000",
  });
  runtime.now = now;
  server = await startTestServer(createServiceApp());
});

afterAll(async () => {
  await server?.close();
});

const definition = (wallet: string, extra: Json = {}) => ({
  name: "my workflow",
  smartWalletAddress: wallet.toLowerCase(),
  trigger: { name: "start", type: "manual", config: { data: { hello: "world" } } },
  nodes: [code("first"), code("second")],
  ...extra,
});

function problem(res: { status: number; headers: Headers; body: Json }, status: number, code: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.headers.get("content-type")).toBe("application/problem+json");
  expect(res.body.code).toBe(code);
  return res.body;
}

const activeCounter = async (owner: string) =>
  (await runtime.db.send(new GetCommand({ TableName: runtime.config.tableName, Key: Keys.counter(owner, "activeWorkflows") }))).Item?.count;

const rawWorkflow = async (id: string) =>
  (await runtime.db.send(new GetCommand({ TableName: runtime.config.tableName, Key: Keys.workflow(id), ConsistentRead: true }))).Item;

// ---------------------------------------------------------------------------------------------------------

describe("POST /workflows", () => {
  it("creates an enabled workflow: 201, Location, defaults materialised, generated edges, settings written", async () => {
    const alice = await newOwner();
    const before = now();
    const res = await call(alice, "POST", "/workflows", definition(alice.wallet));
    expect(res.status).toBe(201);
    const wf = res.body;
    expect(res.headers.get("location")).toBe(`/workflows/${wf.id}`);
    expect(wf.id).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(wf).toMatchObject({
      name: "my workflow",
      owner: alice.owner,
      smartWalletAddress: alice.wallet,
      chainId: runtime.config.defaultChainId,
      status: "enabled",
      maxExecution: runtime.config.limits.defaultMaxExecution,
      executionCount: 0,
      remainingExecutions: runtime.config.limits.defaultMaxExecution,
      inputVariables: { settings: { runner: alice.wallet, chainId: runtime.config.defaultChainId } },
    });
    expect(wf.trigger).toEqual({
      id: expect.any(String),
      name: "start",
      type: "manual",
      config: { data: { hello: "world" }, lang: "json" },
    });
    expect(wf.nodes[0]).toEqual({ id: "first", name: "first", type: "customCode", config: { lang: "javascript", source: "return 1" } });
    expect(wf.edges).toEqual([
      { id: "_e0", source: wf.trigger.id, target: "first" },
      { id: "_e1", source: "first", target: "second" },
    ]);
    expect(wf.createdAt).toBeGreaterThanOrEqual(before);
    for (const absent of ["completionReason", "completedAt", "lastRanAt", "startAt", "expiredAt"]) expect(wf).not.toHaveProperty(absent);

    // The stored item: keys of patterns 10-12, entity type and version.
    const item = await rawWorkflow(wf.id);
    expect(item).toMatchObject({
      ...Keys.workflow(wf.id),
      ...Keys.workflowByOwner(alice.owner, wf.id),
      ...Keys.workflowByWallet(alice.owner, alice.wallet, wf.id),
      type: "workflow",
      v: 3,
      owner: alice.owner,
      status: "enabled",
      executionCount: 0,
      holdsSlot: true,
    });
    expect(await activeCounter(alice.owner)).toBe(1);
    expect((await call(alice, "GET", `/workflows/${wf.id}`)).body).toEqual(wf);
  });

  it("answers each validation family with its code and field paths, and writes nothing", async () => {
    const bob = await newOwner();
    const missing = problem(
      await call(bob, "POST", "/workflows", {
        smartWalletAddress: bob.wallet,
        nodes: [{ id: "x", name: "if", type: "customCode", config: {} }],
      }),
      400,
      "VALIDATION_FAILED",
    );
    expect(missing.errors.map((e: Json) => e.path)).toEqual(
      expect.arrayContaining(["body.trigger", "body.nodes[0].name", "body.nodes[0].config.source"]),
    );
    expect(problem(await call(bob, "POST", "/workflows", definition(bob.wallet, { extra: 1 })), 400, "VALIDATION_FAILED").errors).toEqual([
      { path: "body.extra", message: expect.any(String) },
    ]);

    const graph = problem(
      await call(bob, "POST", "/workflows", definition(bob.wallet, { edges: [{ id: "e1", source: "start", target: "nowhere" }] })),
      400,
      "WORKFLOW_GRAPH_INVALID",
    );
    expect(graph.errors[0].path).toMatch(/^body\.edges\[0\]/);
    const cron = problem(
      await call(
        bob,
        "POST",
        "/workflows",
        definition(bob.wallet, { trigger: { name: "start", type: "cron", config: { schedules: ["* * * * *"] } } }),
      ),
      400,
      "TRIGGER_TOO_FREQUENT",
    );
    expect(cron.errors[0].path).toMatch(/^body\.trigger\.config\.schedules/);
    problem(await call(bob, "POST", "/workflows", definition(bob.wallet, { chainId: 999_999 })), 400, "UNSUPPORTED_CHAIN");

    const carol = await newOwner();
    const foreign = problem(await call(bob, "POST", "/workflows", definition(carol.wallet)), 400, "WALLET_NOT_OWNED");
    expect(foreign.errors).toEqual([{ path: "body.smartWalletAddress", message: expect.any(String) }]);
    problem(await call(bob, "POST", "/workflows", definition("0x" + "12".repeat(20))), 400, "WALLET_NOT_OWNED");

    // Item 8: the stored document over max_workflow_bytes (the body itself is far below 1 MiB).
    const big = problem(
      await call(bob, "POST", "/workflows", definition(bob.wallet, { inputVariables: { blob: "x".repeat(MAX_DOC) } })),
      413,
      "PAYLOAD_TOO_LARGE",
    );
    expect(big.detail).toMatch(/stored workflow document/);
    // Item 8 comes before item 9: a too-large document for a foreign wallet is 413.
    problem(
      await call(bob, "POST", "/workflows", definition(carol.wallet, { inputVariables: { blob: "x".repeat(MAX_DOC) } })),
      413,
      "PAYLOAD_TOO_LARGE",
    );

    expect((await call(bob, "GET", "/workflows:count")).body).toEqual({ total: 0 });
    expect(await activeCounter(bob.owner)).toBeUndefined();
  });

  it("keeps the active-workflow cap: 429 with limit, paused and deleted workflows free their slot", async () => {
    const dan = await newOwner();
    const made: Json[] = [];
    for (let i = 0; i < CAP; i++) made.push(await createWorkflow(dan, definition(dan.wallet)));
    const refused = problem(await call(dan, "POST", "/workflows", definition(dan.wallet)), 429, "WORKFLOWS_LIMIT_REACHED");
    expect(refused.limit).toBe(CAP);
    expect(refused).not.toHaveProperty("errors");
    expect((await call(dan, "GET", "/workflows:count")).body.total).toBe(CAP);

    // A paused workflow is not active: its slot is free, and resuming it at the cap is refused.
    expect((await call(dan, "POST", `/workflows/${made[0]!.id}:pause`)).body.status).toBe("disabled");
    const fourth = await createWorkflow(dan, definition(dan.wallet));
    expect(problem(await call(dan, "POST", `/workflows/${made[0]!.id}:resume`), 429, "WORKFLOWS_LIMIT_REACHED").limit).toBe(CAP);
    expect((await call(dan, "GET", `/workflows/${made[0]!.id}`)).body.status).toBe("disabled");

    // Deleting an active one frees a slot: the resume now succeeds.
    expect((await call(dan, "DELETE", `/workflows/${fourth.id}`)).status).toBe(204);
    expect((await call(dan, "POST", `/workflows/${made[0]!.id}:resume`)).body.status).toBe("enabled");
    expect(await activeCounter(dan.owner)).toBe(CAP);
  });

  it("releases the slot of a workflow that expired while enabled when the cap is reached", async () => {
    const erin = await newOwner();
    await createWorkflow(erin, definition(erin.wallet, { expiredAt: now() + 60_000 }));
    await createWorkflow(erin, definition(erin.wallet));
    await createWorkflow(erin, definition(erin.wallet));
    problem(await call(erin, "POST", "/workflows", definition(erin.wallet)), 429, "WORKFLOWS_LIMIT_REACHED");
    advance(61_000);
    await createWorkflow(erin, definition(erin.wallet));
    expect(await activeCounter(erin.owner)).toBe(CAP);
    problem(await call(erin, "POST", "/workflows", definition(erin.wallet)), 429, "WORKFLOWS_LIMIT_REACHED");
  });

  it("creates concurrently without passing the cap", async () => {
    const fay = await newOwner();
    const results = await Promise.all(Array.from({ length: 8 }, () => call(fay, "POST", "/workflows", definition(fay.wallet))));
    expect(results.filter((r) => r.status === 201)).toHaveLength(CAP);
    expect(results.filter((r) => r.status === 429 && r.body.code === "WORKFLOWS_LIMIT_REACHED")).toHaveLength(8 - CAP);
    expect(await activeCounter(fay.owner)).toBe(CAP);
  });
});

describe("GET /workflows and /workflows:count", () => {
  let gus: Owner;
  let second: string;
  let ids: string[]; // newest first
  let expired: Json;
  let paused: Json;

  beforeAll(async () => {
    gus = await newOwner();
    const other = await call(gus, "POST", "/wallets", { salt: "2" });
    second = other.body.address;
    const a = await createWorkflow(gus, definition(gus.wallet));
    expired = await createWorkflow(gus, definition(gus.wallet, { expiredAt: now() + 30_000 }));
    paused = await createWorkflow(gus, definition(gus.wallet, { smartWalletAddress: second }));
    await call(gus, "POST", `/workflows/${paused.id}:pause`);
    ids = [paused.id, expired.id, a.id];
    advance(31_000);
  });

  const list = async (query = "") => {
    const res = await call(gus, "GET", `/workflows${query}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  };
  const total = async (query = "") => (await call(gus, "GET", `/workflows:count${query}`)).body.total;

  it("lists newest first with the page envelope", async () => {
    const page = await list();
    expect(page.data.map((w: Json) => w.id)).toEqual(ids);
    expect(page.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: false });
    expect(await total()).toBe(3);
  });

  it("reports an expired workflow as completed/EXPIRED everywhere", async () => {
    const wf = (await call(gus, "GET", `/workflows/${expired.id}`)).body;
    expect(wf).toMatchObject({ status: "completed", completionReason: "EXPIRED", completedAt: expired.expiredAt });
    expect((await rawWorkflow(expired.id))!.status).toBe("enabled"); // nothing had to store it
    problem(await call(gus, "POST", `/workflows/${expired.id}:pause`), 409, "WORKFLOW_TERMINAL");
    problem(await call(gus, "POST", `/workflows/${expired.id}:resume`), 409, "WORKFLOW_TERMINAL");
  });

  it("filters by effective status (lists and repeated/comma forms), running matching nothing", async () => {
    expect((await list("?status=completed")).data.map((w: Json) => w.id)).toEqual([expired.id]);
    expect((await list("?status=enabled")).data.map((w: Json) => w.id)).toEqual([ids[2]]);
    expect((await list("?status=disabled&status=completed")).data.map((w: Json) => w.id)).toEqual([paused.id, expired.id]);
    expect((await list("?status=enabled,disabled,,enabled")).data.map((w: Json) => w.id)).toEqual([paused.id, ids[2]]);
    expect((await list("?status=failed")).data).toEqual([]);
    expect(await list("?status=running")).toEqual({ data: [], pageInfo: { hasNextPage: false, hasPreviousPage: false } });
    expect(await total("?status=completed")).toBe(1);
    expect(await total("?status=enabled&status=disabled")).toBe(2);
    expect(await total("?status=running")).toBe(0);
    const bad = problem(await call(gus, "GET", "/workflows?status=enabled,paused"), 400, "VALIDATION_FAILED");
    expect(bad.errors[0].path).toMatch(/^query\.status/);
    problem(await call(gus, "GET", "/workflows:count?status=cancelled"), 400, "VALIDATION_FAILED");
  });

  it("filters by smartWalletAddress (one, several, or another owner's matching nothing)", async () => {
    expect((await list(`?smartWalletAddress=${second.toLowerCase()}`)).data.map((w: Json) => w.id)).toEqual([paused.id]);
    expect((await list(`?smartWalletAddress=${gus.wallet}`)).data.map((w: Json) => w.id)).toEqual([expired.id, ids[2]]);
    expect((await list(`?smartWalletAddress=${gus.wallet},${second}`)).data.map((w: Json) => w.id)).toEqual(ids);
    expect((await list(`?smartWalletAddress=${gus.wallet}&status=completed`)).data.map((w: Json) => w.id)).toEqual([expired.id]);
    expect(await total(`?smartWalletAddress=${second}`)).toBe(1);
    expect((await list(`?smartWalletAddress=${"0x" + "ab".repeat(20)}`)).data).toEqual([]);
    problem(await call(gus, "GET", "/workflows?smartWalletAddress=0x123"), 400, "VALIDATION_FAILED");
  });

  it("pages both ways with cursors bound to the caller", async () => {
    const first = await list("?limit=1");
    expect(first.data.map((w: Json) => w.id)).toEqual([ids[0]]);
    expect(first.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    const next = await list(`?limit=2&after=${first.pageInfo.endCursor}`);
    expect(next.data.map((w: Json) => w.id)).toEqual([ids[1], ids[2]]);
    expect(next.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });
    const back = await list(`?limit=1&before=${next.pageInfo.startCursor}`);
    expect(back.data.map((w: Json) => w.id)).toEqual([ids[0]]);
    expect(back.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    // A filter may change between pages; it applies from the cursor's position.
    expect((await list(`?status=enabled&after=${first.pageInfo.endCursor}`)).data.map((w: Json) => w.id)).toEqual([ids[2]]);

    problem(await call(gus, "GET", "/workflows?after=garbage"), 400, "INVALID_CURSOR");
    const stranger = await newOwner();
    problem(await call(stranger, "GET", `/workflows?after=${first.pageInfo.endCursor}`), 400, "INVALID_CURSOR");
    problem(
      await call(gus, "GET", `/workflows?after=${first.pageInfo.endCursor}&before=${first.pageInfo.endCursor}`),
      400,
      "VALIDATION_FAILED",
    );
    problem(await call(gus, "GET", "/workflows?limit=0"), 400, "VALIDATION_FAILED");
  });

  it("never shows one owner another's workflows", async () => {
    const stranger = await newOwner();
    expect((await call(stranger, "GET", "/workflows")).body.data).toEqual([]);
    expect((await call(stranger, "GET", `/workflows:count?smartWalletAddress=${gus.wallet}`)).body.total).toBe(0);
  });

  it("makes the wallet counts of GET /wallets real, by effective status", async () => {
    const wallets = (await call(gus, "GET", "/wallets")).body.data as Json[];
    const first = wallets.find((w) => w.address === gus.wallet)!;
    const other = wallets.find((w) => w.address === second)!;
    expect(first).toMatchObject({
      totalWorkflowCount: 2,
      enabledWorkflowCount: 1,
      disabledWorkflowCount: 0,
      completedWorkflowCount: 1,
      failedWorkflowCount: 0,
    });
    expect(other).toMatchObject({
      totalWorkflowCount: 1,
      enabledWorkflowCount: 0,
      disabledWorkflowCount: 1,
      completedWorkflowCount: 0,
      failedWorkflowCount: 0,
    });
  });
});

describe("GET /workflows/{id}, pause, resume", () => {
  it("answers 404 WORKFLOW_NOT_FOUND alike for unknown, malformed and another owner's ids", async () => {
    const hal = await newOwner();
    const ivy = await newOwner();
    const wf = await createWorkflow(hal, definition(hal.wallet));
    const answers = [
      problem(await call(ivy, "GET", `/workflows/${wf.id}`), 404, "WORKFLOW_NOT_FOUND"),
      problem(await call(hal, "GET", `/workflows/${ulid()}`), 404, "WORKFLOW_NOT_FOUND"),
      problem(await call(hal, "GET", "/workflows/not-a-ulid"), 404, "WORKFLOW_NOT_FOUND"),
      problem(await call(ivy, "POST", `/workflows/${wf.id}:pause`), 404, "WORKFLOW_NOT_FOUND"),
      problem(await call(ivy, "POST", `/workflows/${wf.id}:resume`), 404, "WORKFLOW_NOT_FOUND"),
    ];
    expect(new Set(answers.map((a) => a.detail)).size).toBe(1);
    // Lower-case ids are the same workflow.
    expect((await call(hal, "GET", `/workflows/${wf.id.toLowerCase()}`)).body.id).toBe(wf.id);
    expect((await call(hal, "GET", `/workflows/${wf.id}`)).body.status).toBe("enabled");
  });

  it("pauses and resumes idempotently, ignoring any body", async () => {
    const jay = await newOwner();
    const wf = await createWorkflow(jay, definition(jay.wallet));
    const paused = await call(jay, "POST", `/workflows/${wf.id}:pause`, { anything: true });
    expect(paused.status).toBe(200);
    expect(paused.body).toEqual({ ...wf, status: "disabled" });
    expect((await call(jay, "POST", `/workflows/${wf.id}:pause`)).body.status).toBe("disabled");
    expect(await activeCounter(jay.owner)).toBe(0);
    expect((await call(jay, "POST", `/workflows/${wf.id}:resume`)).body).toEqual(wf);
    expect((await call(jay, "POST", `/workflows/${wf.id}:resume`)).body.status).toBe("enabled");
    expect(await activeCounter(jay.owner)).toBe(1);
  });
});

describe("DELETE /workflows/{id}", () => {
  it("always answers 204 and removes the caller's workflow, its workflow-scoped secrets and its slot; executions stay", async () => {
    const kim = await newOwner();
    const lee = await newOwner();
    const made: Json[] = [
      await createWorkflow(kim, definition(kim.wallet)),
      await createWorkflow(kim, definition(kim.wallet)),
      await createWorkflow(kim, definition(kim.wallet)),
    ];
    const wf = made[0]!;
    expect((await call(kim, "PUT", "/secrets/API_KEY", { value: "user-scope" })).status).toBe(201);
    expect((await call(kim, "PUT", "/secrets/API_KEY", { value: "wf-scope", workflowId: wf.id })).status).toBe(201);
    expect((await call(kim, "PUT", "/secrets/OTHER", { value: "wf-scope", workflowId: wf.id })).status).toBe(201);
    expect((await call(kim, "PUT", "/secrets/OTHER", { value: "kept", workflowId: made[1]!.id })).status).toBe(201);
    const executionKey = Keys.execution(wf.id, ulid());
    await runtime.db.send(
      new PutCommand({ TableName: runtime.config.tableName, Item: { ...executionKey, type: "execution", v: 1, status: "success" } }),
    );
    problem(await call(kim, "POST", "/workflows", definition(kim.wallet)), 429, "WORKFLOWS_LIMIT_REACHED");

    // Another owner's delete leaves it untouched.
    const foreign = await call(lee, "DELETE", `/workflows/${wf.id}`);
    expect(foreign.status).toBe(204);
    expect(foreign.headers.get("content-type")).toBeNull();
    expect((await call(kim, "GET", `/workflows/${wf.id}`)).status).toBe(200);

    const res = await call(kim, "DELETE", `/workflows/${wf.id}`);
    expect(res.status).toBe(204);
    expect(res.body).toBeUndefined();
    problem(await call(kim, "GET", `/workflows/${wf.id}`), 404, "WORKFLOW_NOT_FOUND");
    expect((await call(kim, "GET", "/workflows")).body.data.map((w: Json) => w.id)).not.toContain(wf.id);
    expect((await call(kim, "GET", "/workflows:count")).body.total).toBe(2);
    const secrets = (await call(kim, "GET", "/secrets")).body.data as Json[];
    expect(secrets.map((s) => [s.name, s.scope, s.workflowId])).toEqual([
      ["API_KEY", "user", undefined],
      ["OTHER", "workflow", made[1]!.id],
    ]);
    expect((await runtime.db.send(new GetCommand({ TableName: runtime.config.tableName, Key: executionKey }))).Item).toBeDefined();

    // The slot is free again: a create at the cap succeeds.
    await createWorkflow(kim, definition(kim.wallet));
    expect(await activeCounter(kim.owner)).toBe(CAP);

    for (const id of [wf.id, ulid(), "not-a-ulid", "a%20b"]) expect((await call(kim, "DELETE", `/workflows/${id}`)).status).toBe(204);
  });
});

// ---------------------------------------------------------------------------------------------------------

describe("claim and recordOutcome (the engine's entry points)", () => {
  const execution = (index: number, wf: WorkflowRecord) => {
    const id = ulid();
    return { ...Keys.execution(wf.id, id), type: "execution", v: 1, id, workflowId: wf.id, index, status: "pending" };
  };
  const reasonOf = async (p: Promise<unknown>) => {
    try {
      await p;
      return "claimed";
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      return `${err.status} ${err.code} ${err.extra.reason ?? ""}`.trim();
    }
  };

  it("20 concurrent claims on maxExecution 5: exactly 5 succeed with indexes 0-4, the workflow completes and frees its slot", async () => {
    const max = await newOwner();
    const wf = await createWorkflow(max, definition(max.wallet, { maxExecution: 5 }));
    const at = now();
    const outcomes = await Promise.allSettled(Array.from({ length: 20 }, () => claim(wf.id, { now: at, owner: max.owner, execution })));
    const won = outcomes.filter((o): o is PromiseFulfilledResult<{ workflow: WorkflowRecord; index: number }> => o.status === "fulfilled");
    expect(won).toHaveLength(5);
    expect(won.map((o) => o.value.index).sort()).toEqual([0, 1, 2, 3, 4]);
    for (const o of outcomes.filter((o) => o.status === "rejected")) {
      const err = (o as PromiseRejectedResult).reason as ApiError;
      expect([err.status, err.code, err.extra.reason]).toEqual([412, "WORKFLOW_NOT_RUNNABLE", "MAX_EXECUTIONS_REACHED"]);
    }
    const after = (await call(max, "GET", `/workflows/${wf.id}`)).body;
    expect(after).toMatchObject({
      status: "completed",
      completionReason: "MAX_EXECUTIONS_REACHED",
      executionCount: 5,
      remainingExecutions: 0,
      lastRanAt: at,
      completedAt: at,
    });
    expect(await activeCounter(max.owner)).toBe(0);
    problem(await call(max, "POST", `/workflows/${wf.id}:resume`), 409, "WORKFLOW_TERMINAL");
  });

  it("refuses claims with the §8.8.7 reasons, 404 for another owner, and a duplicate fire", async () => {
    const ned = await newOwner();
    const wf = await createWorkflow(ned, definition(ned.wallet, { startAt: now() + 60_000, expiredAt: now() + 600_000 }));
    expect(await reasonOf(claim(wf.id, { now: now(), execution }))).toBe("412 WORKFLOW_NOT_RUNNABLE NOT_STARTED");
    expect(await reasonOf(claim(wf.id, { now: now(), owner: (await newOwner()).owner, execution }))).toBe("404 WORKFLOW_NOT_FOUND");
    expect(await reasonOf(claim(ulid(), { now: now(), execution }))).toBe("404 WORKFLOW_NOT_FOUND");
    await call(ned, "POST", `/workflows/${wf.id}:pause`);
    expect(await reasonOf(claim(wf.id, { now: now(), execution }))).toBe("412 WORKFLOW_NOT_RUNNABLE DISABLED");
    await call(ned, "POST", `/workflows/${wf.id}:resume`);
    const started = now() + 61_000;
    const fire = { fireId: `${wf.id}#${started}`, expiresAt: Math.floor(started / 1000) + 3600 };
    const first = await claim(wf.id, { now: started, execution, fire });
    expect(first.index).toBe(0);
    await expect(claim(wf.id, { now: started, execution, fire })).rejects.toBeInstanceOf(DuplicateFire);
    expect((await rawWorkflow(wf.id))!.executionCount).toBe(1);
    expect(await reasonOf(claim(wf.id, { now: now() + 601_000, execution }))).toBe("412 WORKFLOW_NOT_RUNNABLE EXPIRED");
  });

  it("turns a workflow failed after 10 consecutive errors (a success resets the count) and frees its slot", async () => {
    const oli = await newOwner();
    const wf = await createWorkflow(oli, definition(oli.wallet));
    for (let i = 0; i < 9; i++) await recordOutcome(wf.id, "error", now());
    await recordOutcome(wf.id, "success", now());
    for (let i = 0; i < 9; i++) await recordOutcome(wf.id, "error", now());
    expect((await call(oli, "GET", `/workflows/${wf.id}`)).body.status).toBe("enabled");
    const endAt = now();
    await recordOutcome(wf.id, "error", endAt);
    const failed = (await call(oli, "GET", `/workflows/${wf.id}`)).body;
    expect(failed).toMatchObject({ status: "failed", completionReason: "CONSECUTIVE_ERRORS", completedAt: endAt });
    expect(await activeCounter(oli.owner)).toBe(0);
    expect(await reasonOf(claim(wf.id, { now: now(), execution }))).toBe("412 WORKFLOW_NOT_RUNNABLE FAILED");
    problem(await call(oli, "POST", `/workflows/${wf.id}:pause`), 409, "WORKFLOW_TERMINAL");
    expect((await call(oli, "GET", "/workflows?status=failed")).body.data.map((w: Json) => w.id)).toEqual([wf.id]);
    await recordOutcome(ulid(), "error", now()); // a deleted workflow: nothing happens
  });
});

describe("@avaprotocol/sdk-js", () => {
  it("creates, lists, pauses and cancels a workflow through the SDK's own calls", async () => {
    const client = new Client({ baseUrl: server.url });
    await client.auth.exchangeWithKey(generatePrivateKey(), {
      uri: "https://app.example.com",
      chainId: runtime.config.defaultChainId,
      version: "0.1.0",
    });
    const wallet = (await client.wallets.create({ salt: "3" } as never)) as unknown as { address: string };
    const created = (await client.workflows.create(definition(wallet.address) as never)) as unknown as Json;
    expect(created).toMatchObject({ smartWalletAddress: wallet.address, status: "enabled" });
    const list = (await client.workflows.list({ smartWalletAddress: [wallet.address], status: ["enabled"] })) as unknown as Json;
    expect(list.data.map((w: Json) => w.id)).toEqual([created.id]);
    expect(((await client.workflows.count()) as unknown as Json).total).toBe(1);
    expect(((await client.workflows.pause(created.id)) as unknown as Json).status).toBe("disabled");
    await client.workflows.cancel(created.id);
    expect(((await client.workflows.list()) as unknown as Json).data).toEqual([]);
  });
});
