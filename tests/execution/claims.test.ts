/**
 * Claims without 5xx (API.md §18.4, first bullet) over real HTTP servers: concurrent `:trigger` calls of one
 * workflow get their §8.8.7 answers only (202, or 412 at maxExecution), exactly maxExecution executions exist with
 * indexes 0 to maxExecution − 1, also through two service apps on one table; a warm manual claim is two DynamoDB
 * requests and a refused one is one, answered exactly from a cached record that has gone stale; an automatic fire
 * delivered several times claims once; claims interrupted by a crash at each step are finished (or dropped) by the
 * sweeper's recovery without losing an index, a fire or a run input; index attributes of finished claims do not
 * pile up on the workflow item.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ulid } from "ulid";
import { GetCommand, QueryCommand } from "@aws-sdk/lib-dynamodb";
import { useTestRuntime } from "../support/runtime";
import { startTestServer, type TestServer } from "../support/server";
import { jsonClient, type Json, type Owner } from "../support/client";
import { createServiceApp } from "../../shared/service/app";
import { setBus } from "../../shared/execution/bus/install";
import { createInProcessBus, type InProcessBus } from "../../shared/execution/bus/in-process";
import { withRunner } from "../../shared/execution/runner";
import { claimExecution, recoverInterruptedClaims } from "../../shared/execution/claim";
import { writeRunInputParts } from "../../shared/execution/run-input";
import { executionFee, valueFeeFor } from "../../shared/engine/fee-rules";
import { DuePartition, Keys } from "../../shared/store/item-keys";
import { pendingItem } from "../../shared/execution/execution-write";
import { claimStats, DuplicateFire, claim, CLAIM_RECOVERY_AFTER_MS, SimulatedCrash } from "../../shared/workflow/claim";
import { closeJournals } from "../../shared/workflow/claim-journal";
import { getForRun } from "../../shared/workflow/stored";
import { errorMark, outcomeHint, recordOutcome } from "../../shared/workflow/outcome";
import type { Runtime } from "../../shared/current-runtime";

let runtime: Runtime;
let first: TestServer;
let second: TestServer;
let bus: InProcessBus;
const viaFirst = jsonClient(() => first.url);
const viaSecond = jsonClient(() => second.url);
const { call, createWorkflow } = viaFirst;

beforeAll(async () => {
  runtime = await useTestRuntime({ RATE_LIMIT_BURST: "100000", RATE_LIMIT_RPS: "10000" });
  bus = setBus(withRunner(createInProcessBus()));
  // Two service apps on one table, as two Lambda instances or two `npm start` processes would be.
  first = await startTestServer(createServiceApp());
  second = await startTestServer(createServiceApp());
});

afterAll(async () => {
  await bus?.idle();
  await first?.close();
  await second?.close();
});

/** Every execution of the workflow, through the API (all pages). */
async function executionsOf(who: Owner, workflowId: string): Promise<Json[]> {
  const out: Json[] = [];
  let after: string | undefined;
  for (;;) {
    const res = await call(who, "GET", `/workflows/${workflowId}/executions?limit=200${after ? `&after=${after}` : ""}`);
    expect(res.status).toBe(200);
    out.push(...res.body.data);
    if (!res.body.pageInfo?.hasNextPage) return out;
    after = res.body.pageInfo.endCursor;
  }
}

const rawWorkflow = async (id: string) =>
  (await runtime.db.send(new GetCommand({ TableName: runtime.config.tableName, Key: Keys.workflow(id), ConsistentRead: true }))).Item!;
const indexAttributes = (item: Record<string, unknown>) => Object.keys(item).filter((k) => k.startsWith("claim#"));
const claimAttributes = (item: Record<string, unknown>) => Object.keys(item).filter((k) => k.startsWith("claim"));

/** The DynamoDB requests this process sends while `work` runs, as `<Command> <pk>` (the rate limiter's left out). */
async function requestsOf(work: () => Promise<void>): Promise<string[]> {
  const db = runtime.db as unknown as { send: (command: unknown) => Promise<unknown> };
  const send = db.send;
  const seen: string[] = [];
  db.send = (command: unknown) => {
    const input = (command as { input?: { Key?: { pk?: string }; Item?: { pk?: string } } }).input;
    const pk = input?.Key?.pk ?? input?.Item?.pk ?? "";
    if (!pk.startsWith("RATE#")) seen.push(`${(command as object).constructor.name.replace(/Command$/, "")} ${pk}`);
    return send.call(db, command);
  };
  try {
    await work();
  } finally {
    db.send = send;
  }
  return seen;
}

async function concurrentTriggers(count: number, max: number, servers: ReturnType<typeof jsonClient>[]) {
  const alice = await viaFirst.ownerWithWallet();
  const wf = await createWorkflow(alice, { maxExecution: max });
  const before = { ...claimStats };
  const answers = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      servers[i % servers.length]!.call(alice, "POST", `/workflows/${wf.id}:trigger`, { triggerType: "manual" }),
    ),
  );
  const statuses = answers.map((a) => a.status);
  expect(statuses.filter((s) => s >= 500)).toEqual([]);
  expect(statuses.filter((s) => s === 202)).toHaveLength(max);
  expect(statuses.filter((s) => s === 412)).toHaveLength(count - max);
  for (const refused of answers.filter((a) => a.status === 412)) {
    expect(refused.body).toMatchObject({ code: "WORKFLOW_NOT_RUNNABLE", reason: "MAX_EXECUTIONS_REACHED" });
  }
  // One count update per call at most: no claim ever retried for contention.
  expect(claimStats.claimed - before.claimed).toBe(max);
  expect(claimStats.attempts - before.attempts).toBeLessThanOrEqual(count);

  await bus.idle();
  const executions = await executionsOf(alice, wf.id);
  expect(executions).toHaveLength(max);
  expect(executions.map((e) => e.index).sort((a, b) => a - b)).toEqual(Array.from({ length: max }, (_, i) => i));
  expect(new Set(executions.map((e) => e.id))).toEqual(new Set(answers.filter((a) => a.status === 202).map((a) => a.body.executionId)));
  expect(executions.every((e) => e.status === "success")).toBe(true);
  // Claim order: the index that completed the workflow is the last one; completedAt is that claim's startAt.
  const last = executions.find((e) => e.index === max - 1)!;
  expect((await call(alice, "GET", `/workflows/${wf.id}`)).body).toMatchObject({
    executionCount: max,
    remainingExecutions: 0,
    status: "completed",
    completionReason: "MAX_EXECUTIONS_REACHED",
    completedAt: last.startAt,
  });
}

describe("concurrent claims of one workflow", () => {
  it("50 :trigger calls at once on maxExecution 30: 30 executions with indexes 0-29, the other 20 answer 412, none 5xx", async () => {
    await concurrentTriggers(50, 30, [viaFirst]);
  });

  it("the same through two service apps on one table", async () => {
    await concurrentTriggers(50, 30, [viaFirst, viaSecond]);
  });

  it("index attributes of finished claims do not pile up on the workflow item", async () => {
    const bob = await viaFirst.ownerWithWallet();
    const wf = await createWorkflow(bob, { maxExecution: 1000 });
    const trigger = async () =>
      expect((await call(bob, "POST", `/workflows/${wf.id}:trigger`, { triggerType: "manual" })).status).toBe(202);
    for (let i = 0; i < 30; i++) await trigger();
    // Cleaned up from 8 on (claims whose intent is still being closed are kept a little longer).
    expect(indexAttributes(await rawWorkflow(wf.id)).length).toBeLessThanOrEqual(10);
    for (let burst = 0; burst < 2; burst++) await Promise.all(Array.from({ length: 10 }, trigger));
    for (let i = 0; i < 3; i++) await trigger();
    expect(indexAttributes(await rawWorkflow(wf.id)).length).toBeLessThanOrEqual(10);
    await bus.idle();
    expect((await executionsOf(bob, wf.id)).map((e) => e.index).sort((a, b) => a - b)).toEqual(Array.from({ length: 53 }, (_, i) => i));
    // The journal's pass (as the sweeper makes it once due) writes nothing and takes the rest away.
    expect(await sweepClaimsLater()).toBe(0);
    expect(claimAttributes(await rawWorkflow(wf.id))).toEqual([]);
    expect(await executionsOf(bob, wf.id)).toHaveLength(53);
  });
});

describe("what a claim costs, and its answers", () => {
  it("the process closes its own journal once its claims are done: their markers go, nothing is left for the sweeper", async () => {
    const kim = await viaFirst.ownerWithWallet();
    const wf = await createWorkflow(kim, { maxExecution: 100 });
    const answers = await Promise.all(
      Array.from({ length: 5 }, () => call(kim, "POST", `/workflows/${wf.id}:trigger`, { triggerType: "manual" })),
    );
    expect(answers.map((a) => a.status)).toEqual([202, 202, 202, 202, 202]);
    expect(claimAttributes(await rawWorkflow(wf.id)).length).toBeGreaterThan(0);
    await closeJournals();
    expect(claimAttributes(await rawWorkflow(wf.id))).toEqual([]);
    const journals = await Promise.all(
      Keys.dueShards(DuePartition.claimJournal).map((partition) =>
        runtime.db.send(
          new QueryCommand({
            TableName: runtime.config.tableName,
            IndexName: "gsi3",
            KeyConditionExpression: "gsi3pk = :journals",
            ExpressionAttributeValues: { ":journals": partition },
            ConsistentRead: false,
          }),
        ),
      ),
    );
    // The journals' keys (gsi3 holds keys only), each read to see whether it still lists the workflow.
    const listed = journals.flatMap((j) => j.Items ?? []);
    const read = await Promise.all(
      listed.map(
        async (key) =>
          (await runtime.db.send(new GetCommand({ TableName: runtime.config.tableName, Key: { pk: key.pk, sk: key.sk } }))).Item,
      ),
    );
    expect(read.filter((j) => (j?.workflows as Set<string> | undefined)?.has(wf.id))).toEqual([]);
    await bus.idle();
  });

  it("a warm manual trigger is one count update and one put; a refused one is the failed update alone, answered exactly", async () => {
    const gus = await viaFirst.ownerWithWallet();
    const wf = await createWorkflow(gus, { maxExecution: 1000 });
    setBus(createInProcessBus()); // runs stay pending: only the claims are counted
    try {
      const trigger = async () =>
        expect((await call(gus, "POST", `/workflows/${wf.id}:trigger`, { triggerType: "manual" })).status).toBe(202);
      await trigger(); // reads and caches the record, journals the workflow for this minute
      let warm: string[] = [];
      for (let attempt = 0; attempt < 3; attempt++) {
        warm = await requestsOf(trigger);
        if (!warm.some((r) => r.includes("CLAIMJOURNAL#"))) break; // a new minute: the journal is written once more
      }
      expect(warm).toEqual([`Update WF#${wf.id}`, `Put WF#${wf.id}#EXEC`]);

      expect((await call(gus, "POST", `/workflows/${wf.id}:pause`)).status).toBe(200);
      let answer: Json = {};
      const refused = await requestsOf(
        async () => void (answer = await call(gus, "POST", `/workflows/${wf.id}:trigger`, { triggerType: "manual" })),
      );
      expect(answer).toMatchObject({ status: 412, body: { code: "WORKFLOW_NOT_RUNNABLE", reason: "DISABLED" } });
      expect(refused).toEqual([`Update WF#${wf.id}`]);

      // The cached record is stale once the workflow is gone: still 404, before a TRIGGER_TYPE_MISMATCH.
      expect((await call(gus, "DELETE", `/workflows/${wf.id}`)).status).toBe(204);
      for (const triggerType of ["manual", "cron"]) {
        expect((await call(gus, "POST", `/workflows/${wf.id}:trigger`, { triggerType })).body).toMatchObject({
          code: "WORKFLOW_NOT_FOUND",
        });
      }
      const stranger = await viaFirst.ownerWithWallet();
      const other = await createWorkflow(stranger, { maxExecution: 10 });
      await call(stranger, "POST", `/workflows/${other.id}:trigger`, { triggerType: "manual" });
      expect((await call(gus, "POST", `/workflows/${other.id}:trigger`, { triggerType: "manual" })).status).toBe(404);
    } finally {
      setBus(bus);
    }
  });

  it("an automatic fire delivered five times at once, and again later, claims one execution", async () => {
    const hal = await viaFirst.ownerWithWallet();
    const wf = await createWorkflow(hal, { maxExecution: 10 });
    const now = runtime.now();
    const fire = { fireId: `${wf.id}:t:${now}`, expiresAt: Math.floor(now / 1000) + 3600 };
    const deliver = () =>
      claimExecution(wf.id, { now, fire, runInput: { triggerOutput: { data: { at: now } } } }).then(
        (id) => id,
        (err: unknown) => (err instanceof DuplicateFire ? "duplicate" : Promise.reject(err)),
      );
    const outcomes = await Promise.all(Array.from({ length: 5 }, deliver));
    expect(outcomes.filter((o) => o === "duplicate")).toHaveLength(4);
    expect(await deliver()).toBe("duplicate");
    const executions = await executionsOf(hal, wf.id);
    expect(executions.map((e) => [e.index, e.id])).toEqual([[0, outcomes.find((o) => o !== "duplicate")]]);
    expect((await call(hal, "GET", `/workflows/${wf.id}`)).body.executionCount).toBe(1);
  });
});

// ---------------------------------------------------------------------------------------------------------

/** A claim as claim.ts makes it, stopped where a crash would stop it. */
function claimStoppedAt(wf: Json, crashAt: "afterIntent" | "afterCount", fire?: string) {
  const now = runtime.now();
  return claim(wf.id, {
    now,
    crashAt,
    ...(fire ? { fire: { fireId: fire, expiresAt: Math.floor(now / 1000) + 3600 } } : {}),
    execution: (index, claimed) => ({
      ...pendingItem({
        workflowId: claimed.id,
        owner: claimed.owner,
        chainId: claimed.chainId,
        id: ulid(now),
        index,
        startAt: now,
        executionFee: executionFee(),
        valueFee: valueFeeFor(claimed.nodes),
        triggerStep: { id: "t", type: "manual", name: "start", success: true, config: {}, output: { data: {} }, startAt: now, endAt: now },
      }),
      runInput: JSON.stringify({ triggerOutput: { data: {}, headers: {}, pathParams: {} } }),
    }),
  });
}

/** The sweeper's pass as it runs a minute later. */
const sweepClaimsLater = () => recoverInterruptedClaims(runtime.now() + CLAIM_RECOVERY_AFTER_MS + 1_000);

describe("a crash in the middle of a claim", () => {
  it("after the count update: the sweeper writes the execution with the index it took, runs it, and no index is missing", async () => {
    const carol = await viaFirst.ownerWithWallet();
    const wf = await createWorkflow(carol, { maxExecution: 3 });
    expect((await call(carol, "POST", `/workflows/${wf.id}:trigger`, { triggerType: "manual" })).status).toBe(202);
    await expect(claimStoppedAt(wf, "afterCount")).rejects.toBeInstanceOf(SimulatedCrash);
    // The third call takes index 2 and completes the workflow; index 1 has no execution yet.
    expect((await call(carol, "POST", `/workflows/${wf.id}:trigger`, { triggerType: "manual" })).status).toBe(202);
    expect((await call(carol, "POST", `/workflows/${wf.id}:trigger`, { triggerType: "manual" })).body).toMatchObject({
      reason: "MAX_EXECUTIONS_REACHED",
    });
    await bus.idle();
    expect((await executionsOf(carol, wf.id)).map((e) => e.index).sort()).toEqual([0, 2]);

    expect(await recoverInterruptedClaims()).toBe(0); // not stale yet: a live claim is never taken over
    expect(await sweepClaimsLater()).toBe(1);
    await bus.idle();
    const executions = await executionsOf(carol, wf.id);
    expect(executions.map((e) => e.index).sort()).toEqual([0, 1, 2]);
    expect(executions.every((e) => e.status === "success")).toBe(true);
    expect((await call(carol, "GET", `/workflows/${wf.id}`)).body).toMatchObject({ executionCount: 3, status: "completed" });
    expect(await sweepClaimsLater()).toBe(0); // done once
  });

  it("on the last index: the sweeper also completes the workflow", async () => {
    const dan = await viaFirst.ownerWithWallet();
    const wf = await createWorkflow(dan, { maxExecution: 1 });
    await expect(claimStoppedAt(wf, "afterCount")).rejects.toBeInstanceOf(SimulatedCrash);
    // Not runnable any more (the count is at the cap) even before the completion is stored.
    expect((await call(dan, "POST", `/workflows/${wf.id}:trigger`, { triggerType: "manual" })).body).toMatchObject({
      reason: "MAX_EXECUTIONS_REACHED",
    });
    expect(await sweepClaimsLater()).toBe(1);
    await bus.idle();
    expect((await executionsOf(dan, wf.id)).map((e) => [e.index, e.status])).toEqual([[0, "success"]]);
    expect((await call(dan, "GET", `/workflows/${wf.id}`)).body).toMatchObject({
      status: "completed",
      completionReason: "MAX_EXECUTIONS_REACHED",
    });
  });

  it("before the count update: a fire is claimed by the sweeper (a redelivery stays a duplicate); a manual trigger is dropped", async () => {
    const erin = await viaFirst.ownerWithWallet();
    const wf = await createWorkflow(erin, { maxExecution: 10 });
    const fireId = `${wf.id}:t:${runtime.now()}`;
    await expect(claimStoppedAt(wf, "afterIntent", fireId)).rejects.toBeInstanceOf(SimulatedCrash);
    await expect(claimStoppedAt(wf, "afterIntent", fireId)).rejects.toBeInstanceOf(DuplicateFire);
    await expect(claimStoppedAt(wf, "afterIntent")).rejects.toBeInstanceOf(SimulatedCrash);
    expect((await call(erin, "GET", `/workflows/${wf.id}`)).body.executionCount).toBe(0);

    expect(await sweepClaimsLater()).toBe(1);
    await bus.idle();
    expect((await executionsOf(erin, wf.id)).map((e) => [e.index, e.status])).toEqual([[0, "success"]]);
    expect((await call(erin, "GET", `/workflows/${wf.id}`)).body.executionCount).toBe(1);
    // The fire stays claimed once; nothing is left in flight.
    await expect(claimStoppedAt(wf, "afterIntent", fireId)).rejects.toBeInstanceOf(DuplicateFire);
    expect(await sweepClaimsLater()).toBe(0);
    expect((await call(erin, "POST", `/workflows/${wf.id}:trigger`, { triggerType: "manual" })).status).toBe(202);
    await bus.idle();
    expect((await executionsOf(erin, wf.id)).map((e) => e.index).sort()).toEqual([0, 1]);
  });

  it("after the count update with a run input over 1 KB (kept in parts): the sweeper's execution runs with that input", async () => {
    const ivy = await viaFirst.ownerWithWallet();
    const created = await call(ivy, "POST", "/workflows", {
      smartWalletAddress: ivy.wallet,
      trigger: { id: "t", name: "start", type: "manual", config: { data: {} } },
      nodes: [{ id: "size", name: "size", type: "customCode", config: { source: "return start.data.big.length" } }],
    });
    const wf = created.body;
    const now = runtime.now();
    const id = ulid(now);
    const request = { triggerOutput: { data: { big: "x".repeat(3_000) }, headers: {}, pathParams: {} } };
    const { parts } = await writeRunInputParts(id, JSON.stringify(request));
    const claimed = claim(wf.id, {
      now,
      crashAt: "afterCount",
      runInput: parts,
      execution: (index, workflow) => ({
        ...pendingItem({
          workflowId: workflow.id,
          owner: workflow.owner,
          chainId: workflow.chainId,
          id,
          index,
          startAt: now,
          executionFee: executionFee(),
          valueFee: valueFeeFor(workflow.nodes),
          triggerStep: {
            id: "t",
            type: "manual",
            name: "start",
            success: true,
            config: {},
            output: request.triggerOutput,
            startAt: now,
            endAt: now,
          },
        }),
        runInput: JSON.stringify(request),
      }),
    });
    await expect(claimed).rejects.toBeInstanceOf(SimulatedCrash);
    expect(await executionsOf(ivy, wf.id)).toEqual([]);
    expect(await sweepClaimsLater()).toBe(1);
    await bus.idle();
    const [execution] = await executionsOf(ivy, wf.id);
    expect(execution).toMatchObject({ id, index: 0, status: "success", startAt: now });
    expect(execution!.steps.map((step: Json) => step.output.data)).toEqual([request.triggerOutput.data, 3_000]);
    expect(claimAttributes(await rawWorkflow(wf.id))).toEqual([]);
  });

  it("a fire whose workflow stopped being runnable meanwhile is dropped by the sweeper, its fire still consumed", async () => {
    const fay = await viaFirst.ownerWithWallet();
    const wf = await createWorkflow(fay, { maxExecution: 10 });
    const fireId = `${wf.id}:t:${runtime.now()}`;
    await expect(claimStoppedAt(wf, "afterIntent", fireId)).rejects.toBeInstanceOf(SimulatedCrash);
    expect((await call(fay, "POST", `/workflows/${wf.id}:pause`)).status).toBe(200);
    expect(await sweepClaimsLater()).toBe(0);
    expect(await executionsOf(fay, wf.id)).toEqual([]);
    expect((await call(fay, "POST", `/workflows/${wf.id}:resume`)).status).toBe(200);
    await expect(claimStoppedAt(wf, "afterIntent", fireId)).rejects.toBeInstanceOf(DuplicateFire);
    expect(await sweepClaimsLater()).toBe(0);
  });
});

describe("the run's outcome", () => {
  it("a success whose run saw no consecutive errors makes no request; one counted by this process since is reset", async () => {
    const joy = await viaFirst.ownerWithWallet();
    const wf = await createWorkflow(joy, { maxExecution: 10 });
    const read = async () => (await getForRun(wf.id))!;
    const mark = errorMark(wf.id);
    const seen = outcomeHint(await read(), mark);
    expect(await requestsOf(() => recordOutcome(wf.id, "success", runtime.now(), seen))).toEqual([]);

    // An error ends while another run (hint taken before it) is still going: that run's success resets it.
    const before = outcomeHint(await read(), errorMark(wf.id));
    await recordOutcome(wf.id, "error", runtime.now());
    expect((await read()).consecutiveErrors).toBe(1);
    const reset = await requestsOf(() => recordOutcome(wf.id, "success", runtime.now(), before));
    expect(reset).toEqual([`Get WF#${wf.id}`, `Update WF#${wf.id}`]);
    expect((await read()).consecutiveErrors).toBe(0);

    // A run that began with errors counted reads and resets at its end; without a hint, as before: one read.
    await recordOutcome(wf.id, "error", runtime.now());
    const counted = outcomeHint(await read(), errorMark(wf.id));
    expect(counted.consecutiveErrors).toBe(1);
    await recordOutcome(wf.id, "failed", runtime.now(), counted);
    expect((await read()).consecutiveErrors).toBe(0);
    expect(await requestsOf(() => recordOutcome(wf.id, "success", runtime.now()))).toEqual([`Get WF#${wf.id}`]);
  });
});
