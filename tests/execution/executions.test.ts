/**
 * Executions API (API.md §10.1-§10.8) and the execution record over the real HTTP server and DynamoDB Local:
 * the record as a run writes it (pending item, steps of any size, costs, finish), list and per-workflow list with
 * paging both ways and filters, count, stats, retrieve, getStatus, one owner never reaching another's executions,
 * executions readable after their workflow is deleted, and the sweeper.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ulid } from "ulid";
import { DeleteCommand, PutCommand, QueryCommand } from "@aws-sdk/lib-dynamodb";
import { useTestRuntime } from "../support/runtime";
import { startTestServer, type TestServer } from "../support/server";
import { bearer, CHAIN_ID, FEE, insertPending, randomOwner as newOwner, triggerStep, VALUE_FEE } from "../support/fixtures";
import { createApp } from "../../shared/http/app";
import { Keys } from "../../shared/store/item-keys";
import { executionRoutes, workflowExecutionRoutes } from "../../shared/execution/routes";
import * as v from "valibot";
import { Execution as ExecutionSchema, ExecutionPage, Stats, StatusSummary } from "../../shared/execution/schemas";
import { finish, recordStep, pendingItem } from "../../shared/execution/execution-write";
import { sweep } from "../../shared/execution/execution-sweep";
import { type Cost, type Step } from "../../shared/engine/schemas";
import type { Runtime } from "../../shared/current-runtime";

type Owner = `0x${string}`;
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let runtime: Runtime;
let server: TestServer;

beforeAll(async () => {
  runtime = await useTestRuntime();
  server = await startTestServer(createApp([...executionRoutes, ...workflowExecutionRoutes]));
});
afterAll(async () => server?.close());

async function get(owner: Owner, path: string) {
  const res = await fetch(server.url + path, { headers: await bearer(owner) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : undefined) as Json };
}

const nodeStep = (id: string, startAt: number, extra: Partial<Step> = {}): Step => ({
  id,
  type: "customCode",
  name: id,
  success: true,
  output: { data: { from: id } },
  startAt,
  endAt: startAt + 5,
  ...extra,
});

/** A pending execution written as the claim writes it (its item in one write), then optionally finished. */
async function insert(
  owner: Owner,
  workflowId: string,
  startAt: number,
  end?: { status: "success" | "failed" | "error"; after: number; error?: string },
  index = 0,
) {
  const id = await insertPending(owner, workflowId, startAt, index);
  if (end) {
    expect(await finish(workflowId, id, { status: end.status, error: end.error, endAt: startAt + end.after })).toBe(true);
  }
  return id;
}

describe("the record", () => {
  it("holds the trigger step from the claim, then steps and costs as they are recorded, then the outcome", async () => {
    const owner = newOwner();
    const wf = ulid();
    const t0 = Date.now() - 10_000;
    const id = await insert(owner, wf, t0);

    let res = await get(owner, `/executions/${id}?workflowId=${wf}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(res.body).toEqual({
      id,
      workflowId: wf,
      chainId: CHAIN_ID,
      index: 0,
      startAt: t0,
      status: "pending",
      steps: [triggerStep(t0)],
      executionFee: FEE,
      cogs: [],
      valueFee: VALUE_FEE,
    });

    const cost: Cost = {
      nodeId: "send",
      costType: "gas",
      fee: { amount: "2100000000000", unit: "WEI" },
      gasUnits: "21000",
      chainId: CHAIN_ID,
    };
    // Recorded out of order; the two at t0+20 tie on startAt and are ordered by their position in `nodes`.
    expect(await recordStep(wf, id, nodeStep("later", t0 + 50), undefined, 0)).toBe(true);
    expect(await recordStep(wf, id, nodeStep("send", t0 + 20, { type: "ethTransfer", gasUsed: "21000" }), cost, 3)).toBe(true);
    expect(await recordStep(wf, id, nodeStep("first", t0 + 20), undefined, 1)).toBe(true);
    // The runner records the trigger step too: it stays one step.
    expect(await recordStep(wf, id, triggerStep(t0), undefined, -1)).toBe(true);

    res = await get(owner, `/executions/${id}?workflowId=${wf}`);
    expect(res.body.steps.map((s: Step) => s.id)).toEqual(["trigger1", "first", "send", "later"]);
    expect(res.body.cogs).toEqual([cost]);
    expect(res.body.status).toBe("pending");
    expect(res.body.endAt).toBeUndefined();

    expect(await finish(wf, id, { status: "failed", error: "1 of 3 steps failed: later", endAt: t0 + 900 })).toBe(true);
    res = await get(owner, `/executions/${id}?workflowId=${wf}`);
    expect(res.body).toMatchObject({ status: "failed", error: "1 of 3 steps failed: later", endAt: t0 + 900 });
    expect(v.safeParse(ExecutionSchema, res.body).issues).toBeUndefined();

    // Terminal is final: a second finish loses, a late step is refused and changes nothing.
    expect(await finish(wf, id, { status: "success", endAt: t0 + 1000 })).toBe(false);
    expect(await recordStep(wf, id, nodeStep("tooLate", t0 + 950))).toBe(false);
    const after = await get(owner, `/executions/${id}?workflowId=${wf}`);
    expect(after.body).toEqual(res.body);
  });

  it("stores steps far larger than one DynamoDB item in parts, and truncates outputs and logs to the §10.2 limits", async () => {
    const owner = newOwner();
    const wf = ulid();
    const t0 = Date.now() - 5_000;
    const id = await insert(owner, wf, t0);
    // A config near the workflow document limit plus a 250 KiB output and a 64 KiB log: ~660 KB of step.
    const config = { source: "x".repeat(340_000) };
    const output = { data: "é".repeat(125_000) }; // 250,000 bytes of UTF-8
    const big = nodeStep("big", t0 + 1, { config, output, log: "l".repeat(65_536) });
    expect(await recordStep(wf, id, big)).toBe(true);
    const huge = nodeStep("huge", t0 + 2, {
      output: { data: "y".repeat(300_000) },
      log: "z".repeat(70_000),
      success: false,
      error: "e".repeat(70_000),
      errorCode: "SANDBOX_ERROR",
    });
    expect(await recordStep(wf, id, huge)).toBe(true);

    const res = await get(owner, `/executions/${id}?workflowId=${wf}`);
    expect(res.status).toBe(200);
    const [, gotBig, gotHuge] = res.body.steps as Step[];
    expect(gotBig).toEqual(big);
    expect(gotHuge!.output).toEqual({ data: null, truncated: true, originalSize: Buffer.byteLength(JSON.stringify(huge.output)) });
    expect(Buffer.byteLength(gotHuge!.log!)).toBeLessThanOrEqual(65_536);
    expect(gotHuge!.log!.endsWith("…[truncated]")).toBe(true);
    expect(gotHuge!.error!.endsWith("…[truncated]")).toBe(true);

    // The parts really are separate items, each below the 400 KB item limit; the execution item stays small.
    const parts = await runtime.db.send(
      new QueryCommand({
        TableName: runtime.config.tableName,
        KeyConditionExpression: "pk = :pk",
        ExpressionAttributeValues: { ":pk": `EXEC#${id}` },
      }),
    );
    expect(parts.Items!.filter((i) => i.stepId === "big").length).toBeGreaterThan(1);
    for (const item of parts.Items!) expect((item.body as Uint8Array).length).toBeLessThan(400_000);
  });

  it("records a trigger step too large for the execution item through recordStep", async () => {
    const owner = newOwner();
    const wf = ulid();
    const t0 = Date.now() - 5_000;
    const id = ulid(t0);
    const large = triggerStep(t0, { blob: "b".repeat(20_000) });
    const item = pendingItem({
      workflowId: wf,
      owner,
      chainId: CHAIN_ID,
      id,
      index: 0,
      startAt: t0,
      executionFee: FEE,
      valueFee: VALUE_FEE,
      triggerStep: large,
    });
    expect(JSON.stringify(item).length).toBeLessThan(4_000);
    await runtime.db.send(new PutCommand({ TableName: runtime.config.tableName, Item: item }));
    expect(await recordStep(wf, id, large)).toBe(true);
    expect(await recordStep(wf, id, nodeStep("n1", t0))).toBe(true);
    const res = await get(owner, `/executions/${id}?workflowId=${wf}`);
    expect(res.body.steps).toEqual([large, nodeStep("n1", t0)]);
  });
});

describe("retrieve and getStatus", () => {
  it("answers the status summary, and 404 alike for unknown, malformed, other-workflow and other-owner ids", async () => {
    const owner = newOwner();
    const stranger = newOwner();
    const wf = ulid();
    const t0 = Date.now() - 60_000;
    const id = await insert(owner, wf, t0, { status: "error", after: 1234, error: "workflow was deleted" });

    const status = await get(owner, `/executions/${id.toLowerCase()}:getStatus?workflowId=${wf.toLowerCase()}`);
    expect(status.status).toBe(200);
    expect(status.body).toEqual({ id, workflowId: wf, status: "error", startAt: t0, endAt: t0 + 1234, error: "workflow was deleted" });
    expect(status.headers.get("cache-control")).toBe("no-store");
    expect(v.safeParse(StatusSummary, status.body).issues).toBeUndefined();

    const answers = [
      await get(stranger, `/executions/${id}?workflowId=${wf}`),
      await get(stranger, `/executions/${id}:getStatus?workflowId=${wf}`),
      await get(owner, `/executions/${ulid()}?workflowId=${wf}`),
      await get(owner, `/executions/${id}?workflowId=${ulid()}`),
      await get(owner, `/executions/not-a-ulid?workflowId=${wf}`),
      await get(owner, `/executions/${ulid()}:getStatus?workflowId=${wf}`),
    ];
    for (const a of answers) {
      expect(a.status).toBe(404);
      expect(a.headers.get("content-type")).toBe("application/problem+json");
      expect({ ...a.body, instance: undefined }).toEqual({ ...answers[0]!.body, instance: undefined });
      expect(a.body.code).toBe("EXECUTION_NOT_FOUND");
    }
  });

  it("requires workflowId as a ULID (400 before any lookup)", async () => {
    const owner = newOwner();
    for (const path of [`/executions/${ulid()}`, `/executions/${ulid()}?workflowId=nope`, `/executions/${ulid()}:getStatus?workflowId=`]) {
      const res = await get(owner, path);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe("VALIDATION_FAILED");
      expect(res.body.errors[0].path).toBe("query.workflowId");
    }
  });

  it("stays readable and listed after the workflow record is deleted", async () => {
    const owner = newOwner();
    const wf = ulid();
    await runtime.db.send(new PutCommand({ TableName: runtime.config.tableName, Item: { ...Keys.workflow(wf), type: "workflow", owner } }));
    const id = await insert(owner, wf, Date.now() - 1_000, { status: "success", after: 10 });
    await runtime.db.send(new DeleteCommand({ TableName: runtime.config.tableName, Key: Keys.workflow(wf) }));
    expect((await get(owner, `/executions/${id}?workflowId=${wf}`)).body.status).toBe("success");
    expect((await get(owner, `/workflows/${wf}/executions`)).body.data.map((e: Json) => e.id)).toEqual([id]);
    expect((await get(owner, `/executions?workflowId=${wf}`)).body.data.map((e: Json) => e.id)).toEqual([id]);
  });
});

describe("lists, count and stats", () => {
  const owner = newOwner();
  const stranger = newOwner();
  const wfA = ulid();
  const wfB = ulid();
  const base = Date.now() - 3_600_000;
  /** Newest first, as the list answers. */
  let all: { id: string; wf: string; status: string; startAt: number; duration?: number }[] = [];

  beforeAll(async () => {
    const statuses = ["success", "failed", "error", "pending"] as const;
    const rows: typeof all = [];
    for (let i = 0; i < 25; i++) {
      const wf = i % 3 === 0 ? wfB : wfA;
      const status = statuses[i % 4]!;
      const startAt = base + i * 1000;
      const duration = status === "pending" ? undefined : 100 + i;
      const id = await insert(
        owner,
        wf,
        startAt,
        status === "pending" ? undefined : { status, after: duration!, error: status === "success" ? undefined : "x" },
        i,
      );
      rows.push({ id, wf, status, startAt, duration });
    }
    // Another owner's executions, some in the same workflows' id space.
    await insert(stranger, ulid(), base + 500, { status: "success", after: 5 });
    await insert(stranger, ulid(), base + 600);
    all = rows.reverse();
  });

  it("pages newest first in both directions with exact hasNextPage / hasPreviousPage", async () => {
    const first = await get(owner, "/executions?limit=10");
    expect(first.status).toBe(200);
    expect(first.body.data.map((e: Json) => e.id)).toEqual(all.slice(0, 10).map((r) => r.id));
    expect(first.body.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });

    const second = await get(owner, `/executions?limit=10&after=${first.body.pageInfo.endCursor}`);
    expect(second.body.data.map((e: Json) => e.id)).toEqual(all.slice(10, 20).map((r) => r.id));
    expect(second.body.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: true });

    const third = await get(owner, `/executions?limit=10&after=${second.body.pageInfo.endCursor}`);
    expect(third.body.data.map((e: Json) => e.id)).toEqual(all.slice(20).map((r) => r.id));
    expect(third.body.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });

    const back = await get(owner, `/executions?limit=10&before=${third.body.pageInfo.startCursor}`);
    expect(back.body.data.map((e: Json) => e.id)).toEqual(all.slice(10, 20).map((r) => r.id));
    expect(back.body.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: true });

    const top = await get(owner, `/executions?limit=10&before=${second.body.pageInfo.startCursor}`);
    expect(top.body.data.map((e: Json) => e.id)).toEqual(all.slice(0, 10).map((r) => r.id));
    expect(top.body.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });

    // Default page size 20; every element is a whole Execution with its trigger step.
    const page = await get(owner, "/executions");
    expect(page.body.data).toHaveLength(20);
    expect(page.body.data[0].steps[0].id).toBe("trigger1");
    expect(v.safeParse(ExecutionPage, page.body).issues).toBeUndefined();
  });

  it("filters by workflow and status (lists and repeated keys), and the per-workflow list answers the same", async () => {
    const only = (pred: (r: (typeof all)[number]) => boolean) => all.filter(pred).map((r) => r.id);
    const res = await get(owner, `/executions?workflowId=${wfB}&status=success,failed&limit=200`);
    expect(res.body.data.map((e: Json) => e.id)).toEqual(only((r) => r.wf === wfB && (r.status === "success" || r.status === "failed")));

    const both = await get(owner, `/executions?workflowId=${wfA}&workflowId=${wfB.toLowerCase()},${ulid()}&status=pending&limit=200`);
    expect(both.body.data.map((e: Json) => e.id)).toEqual(only((r) => r.status === "pending"));

    const perWorkflow = await get(owner, `/workflows/${wfA}/executions?limit=5&status=error`);
    expect(perWorkflow.body.data.map((e: Json) => e.id)).toEqual(only((r) => r.wf === wfA && r.status === "error").slice(0, 5));
    const next = await get(owner, `/workflows/${wfA}/executions?limit=5&status=error&after=${perWorkflow.body.pageInfo.endCursor}`);
    expect(next.body.data.map((e: Json) => e.id)).toEqual(only((r) => r.wf === wfA && r.status === "error").slice(5, 10));

    // A cursor belongs to the list that issued it.
    const foreignCursor = await get(owner, `/workflows/${wfA}/executions?after=${perWorkflow.body.pageInfo.endCursor.replace(/.$/, "")}x`);
    expect(foreignCursor.status).toBe(400);
    const crossList = await get(owner, `/executions?after=${perWorkflow.body.pageInfo.endCursor}`);
    expect(crossList.status).toBe(400);
    expect(crossList.body.code).toBe("INVALID_CURSOR");
    const crossCaller = await get(stranger, `/workflows/${wfA}/executions?after=${perWorkflow.body.pageInfo.endCursor}`);
    expect(crossCaller.body.code).toBe("INVALID_CURSOR");
  });

  it("never shows another owner's executions: foreign, unknown and malformed workflow ids give an empty page", async () => {
    const empty = { data: [], pageInfo: { hasNextPage: false, hasPreviousPage: false } };
    expect((await get(stranger, `/workflows/${wfA}/executions`)).body).toEqual(empty);
    expect((await get(stranger, `/workflows/${ulid()}/executions`)).body).toEqual(empty);
    const malformed = await get(stranger, `/workflows/not-an-id/executions`);
    expect(malformed.status).toBe(200);
    expect(malformed.body).toEqual(empty);
    expect((await get(stranger, `/executions?workflowId=${wfA}`)).body).toEqual(empty);
    expect((await get(stranger, `/executions?workflowId=${wfA},${wfB}`)).body).toEqual(empty);
    expect((await get(stranger, "/executions")).body.data).toHaveLength(2);
    expect((await get(stranger, `/executions:count?workflowId=${wfA}`)).body).toEqual({ total: 0 });
  });

  it("refuses bad filters and paging with 400", async () => {
    for (const query of [
      "status=running",
      "workflowId=xyz",
      "limit=0",
      "limit=201",
      `workflowId=${Array.from({ length: 51 }, () => ulid()).join(",")}`,
      "after=abc&before=abc",
      "after=%%%",
    ]) {
      const res = await get(owner, `/executions?${query}`);
      expect(res.status, query).toBe(400);
    }
    expect((await get(owner, "/executions?after=bm90LWEtY3Vyc29y")).body.code).toBe("INVALID_CURSOR");
  });

  it("counts with the list's filters", async () => {
    expect((await get(owner, "/executions:count")).body).toEqual({ total: 25 });
    expect((await get(owner, `/executions:count?workflowId=${wfB}`)).body).toEqual({ total: all.filter((r) => r.wf === wfB).length });
    expect((await get(owner, `/executions:count?status=pending&status=error`)).body).toEqual({
      total: all.filter((r) => r.status === "pending" || r.status === "error").length,
    });
    expect((await get(owner, "/executions:count?status=nope")).status).toBe(400);
  });

  it("computes stats over a startAt window with an integer mean over terminal executions", async () => {
    const since = base + 5_000;
    const until = base + 15_000; // executions 5..14
    const inWindow = all.filter((r) => r.startAt >= since && r.startAt < until);
    const terminal = inWindow.filter((r) => r.duration !== undefined);
    const res = await get(owner, `/executions:stats?since=${since}&until=${until}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      total: inWindow.length,
      succeeded: inWindow.filter((r) => r.status === "success").length,
      failed: inWindow.filter((r) => r.status === "failed" || r.status === "error").length,
      pending: inWindow.filter((r) => r.status === "pending").length,
      waiting: 0,
      avgExecutionTime: Math.round(terminal.reduce((s, r) => s + r.duration!, 0) / terminal.length),
    });
    expect(v.safeParse(Stats, res.body).issues).toBeUndefined();

    const perWorkflow = await get(owner, `/executions:stats?since=${since}&until=${until}&workflowId=${wfB}`);
    expect(perWorkflow.body.total).toBe(inWindow.filter((r) => r.wf === wfB).length);

    // The default window is the last 7 days: all 25.
    expect((await get(owner, "/executions:stats")).body.total).toBe(25);
    // Only a pending execution in the window: no mean.
    const pendingOnly = all.find((r) => r.status === "pending")!;
    expect((await get(owner, `/executions:stats?since=${pendingOnly.startAt}&until=${pendingOnly.startAt + 1}`)).body).toEqual({
      total: 1,
      succeeded: 0,
      failed: 0,
      pending: 1,
      waiting: 0,
    });
    expect((await get(stranger, `/executions:stats?since=${base}&until=${base + 100_000}&workflowId=${wfA}`)).body).toEqual({
      total: 0,
      succeeded: 0,
      failed: 0,
      pending: 0,
      waiting: 0,
    });

    for (const query of [`since=${until}&until=${since}`, "since=-1", "until=1.5", "since=abc", `since=${Date.now() + 86_400_000}`]) {
      const bad = await get(owner, `/executions:stats?${query}`);
      expect(bad.status, query).toBe(400);
      expect(bad.body.code).toBe("VALIDATION_FAILED");
    }
  });
});

describe("the sweeper", () => {
  it("ends executions pending longer than execution_timeout_ms with error 'execution timed out', once", async () => {
    const owner = newOwner();
    const wf = ulid();
    const now = Date.now();
    const timeout = runtime.config.limits.executionTimeoutMs;
    const stale = await insert(owner, wf, now - timeout - 1_000);
    const fresh = await insert(owner, wf, now - timeout + 60_000);
    const done = await insert(owner, wf, now - timeout - 2_000, { status: "success", after: 10 });

    const swept = await sweep(now);
    expect(swept.timedOut).toContainEqual({ workflowId: wf, id: stale });
    expect(swept.timedOut.map((t) => t.id)).not.toContain(fresh);
    expect(swept.timedOut.map((t) => t.id)).not.toContain(done);

    expect((await get(owner, `/executions/${stale}:getStatus?workflowId=${wf}`)).body).toEqual({
      id: stale,
      workflowId: wf,
      status: "error",
      startAt: now - timeout - 1_000,
      endAt: now,
      error: "execution timed out",
    });
    expect((await get(owner, `/executions/${fresh}:getStatus?workflowId=${wf}`)).body.status).toBe("pending");
    // The run can record nothing more, and so starts nothing further (its shouldStop).
    expect(await recordStep(wf, stale, nodeStep("n", now))).toBe(false);
    expect(await recordStep(wf, fresh, nodeStep("n", now))).toBe(true);
    // The pending index no longer holds it: a second sweep finds nothing of this workflow.
    expect((await sweep(now)).timedOut.filter((t) => t.workflowId === wf)).toEqual([]);
  });
});
