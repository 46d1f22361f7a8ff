/**
 * The manual trigger (API.md §8.8.7) over a real HTTP server of the whole service: asynchronous runs handed to the
 * runner through the in-process bus, blocking runs with steps (a customCode node, a restApi call to a local server,
 * a secret redacted everywhere it is recorded), failures, the 412 reasons, the check order, idempotency and
 * concurrent claims.
 */
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SignedIn } from "../support/auth";
import { startService, type TestService } from "../support/service";
import { startUpstream, type Upstream } from "../support/upstream";
import { jsonClient, type Json } from "../support/client";
import { codeNode as code, manualTrigger } from "../support/workflows";
import { setBus } from "../../shared/execution/bus/install";
import { GetCommand } from "@aws-sdk/lib-dynamodb";
import * as Idempotency from "../../shared/store/idempotency";

const SECRET = "sk-live-7f3c9a1e5b";
let service: TestService;
const { call, ownerWithWallet, createWorkflow, waitTerminal } = jsonClient(() => service.url);
const newOwner = (salt = "1") => ownerWithWallet(salt);
/** The restApi target: echoes what it received. */
let target: Upstream;
let offset = 0;
/** Answers of `/hold` requests, sent when a test calls them. */
const held: (() => void)[] = [];

beforeAll(async () => {
  service = await startService();
  service.runtime.now = () => Date.now() + offset;
  target = await startUpstream((req, res) => {
    const delay = req.url?.startsWith("/slow") ? 1_500 : 0;
    const answer = () => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ path: req.url, auth: req.headers.authorization ?? null, items: [1, 2, 3] }));
    };
    if (req.url?.startsWith("/hold")) held.push(answer);
    else setTimeout(answer, delay);
  });
});

afterAll(async () => {
  await service?.close();
  await target?.close();
});

/** The definition the workflows here start from: its node answers the trigger's greeting. */
const hello = { trigger: manualTrigger({ hello: "world" }), nodes: [code("first", "return start.data.hello + '!'")] };

const trigger = (who: SignedIn, id: string, body: Json, headers: Record<string, string> = {}) =>
  call(who, "POST", `/workflows/${id}:trigger`, body, headers);

const terminal = (who: SignedIn, location: string) => waitTerminal(who, location, { timeoutMs: 20_000 });

describe("asynchronous trigger", () => {
  it("answers 202 with Location at once, and the runner takes the run to success", async () => {
    const alice = await newOwner();
    const wf = await createWorkflow(alice, hello);
    const res = await trigger(alice, wf.id, { triggerType: "manual" });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      executionId: expect.stringMatching(/^[0-9A-HJKMNP-TV-Z]{26}$/),
      status: "pending",
      startAt: expect.any(Number),
    });
    expect(res.headers.get("location")).toBe(`/executions/${res.body.executionId}?workflowId=${wf.id}`);
    expect(res.headers.get("idempotency-replayed")).toBeNull();

    const execution = await terminal(alice, res.headers.get("location")!);
    expect(execution).toMatchObject({
      id: res.body.executionId,
      workflowId: wf.id,
      index: 0,
      status: "success",
      startAt: res.body.startAt,
    });
    expect(execution.steps.map((s: Json) => [s.id, s.success])).toEqual([
      ["t", true],
      ["first", true],
    ]);
    expect(execution.steps[0].output).toEqual({ data: { hello: "world" }, headers: {}, pathParams: {} });
    expect(execution.steps[1].output).toEqual({ data: "world!" });

    const after = await call(alice, "GET", `/workflows/${wf.id}`);
    expect(after.body).toMatchObject({ executionCount: 1, lastRanAt: res.body.startAt });
  });

  it("uses triggerOutput over the config and merges triggerInput over inputVariables for this run only", async () => {
    const alice = await newOwner();
    const wf = await createWorkflow(alice, {
      ...hello,
      inputVariables: { greeting: "hi", other: 1 },
      nodes: [code("first", "return { g: greeting, o: other, d: start.data, h: start.headers }")],
    });
    const res = await trigger(alice, wf.id, {
      triggerType: "manual",
      isBlocking: true,
      triggerOutput: { data: [1, 2], headers: { "x-a": "b" } },
      triggerInput: { greeting: "hello" },
    });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe("success");
    const execution = await terminal(alice, `/executions/${res.body.executionId}?workflowId=${wf.id}`);
    expect(execution.steps[0].output).toEqual({ data: [1, 2], headers: { "x-a": "b" }, pathParams: {} });
    expect(execution.steps[1].output.data).toEqual({ g: "hello", o: 1, d: [1, 2], h: { "x-a": "b" } });
  });
});

describe("run inputs and hand-over", () => {
  it("a manual payload too large for the execution item reaches the run whole; the record keeps a truncated step", async () => {
    const alice = await newOwner();
    const wf = await createWorkflow(alice, { ...hello, nodes: [code("size", "return start.data.length")] });
    const big = "x".repeat(600_000);
    const res = await trigger(alice, wf.id, { triggerType: "manual", triggerOutput: { data: big } });
    expect(res.status).toBe(202);
    const execution = await terminal(alice, res.headers.get("location")!);
    expect(execution.status).toBe("success");
    expect(execution.steps[1].output).toEqual({ data: 600_000 });
    expect(execution.steps[0].output).toEqual({ data: null, truncated: true, originalSize: expect.any(Number) });
  });

  it("when the bus refuses the event, the execution ends error at once instead of waiting for the sweeper", async () => {
    const alice = await newOwner();
    const wf = await createWorkflow(alice, hello);
    const limits = service.runtime.config.limits as { consecutiveErrorLimit: number };
    const before = limits.consecutiveErrorLimit;
    setBus({
      publish: async () => {
        throw new Error("PutEvents failed");
      },
      subscribe: () => () => undefined,
    });
    try {
      const res = await trigger(alice, wf.id, { triggerType: "manual" });
      expect(res.status).toBe(202);
      expect(res.body).toMatchObject({ status: "error", error: "the run could not be handed to a runner", endAt: expect.any(Number) });
      expect((await call(alice, "GET", res.headers.get("location")!)).body).toMatchObject({
        status: "error",
        error: "the run could not be handed to a runner",
      });

      // An `error` counts toward consecutive_error_limit: at the limit the workflow fails, and triggers answer FAILED.
      limits.consecutiveErrorLimit = 2;
      expect((await trigger(alice, wf.id, { triggerType: "manual" })).body.status).toBe("error");
      expect((await call(alice, "GET", `/workflows/${wf.id}`)).body).toMatchObject({
        status: "failed",
        completionReason: "CONSECUTIVE_ERRORS",
      });
      const refused = await trigger(alice, wf.id, { triggerType: "manual" });
      expect(refused.status).toBe(412);
      expect(refused.body).toMatchObject({ code: "WORKFLOW_NOT_RUNNABLE", reason: "FAILED" });
    } finally {
      setBus(service.bus);
      limits.consecutiveErrorLimit = before;
    }
  });
});

describe("blocking trigger", () => {
  it("runs in the request: customCode and restApi steps, the secret redacted from every recorded value", async () => {
    const alice = await newOwner();
    expect((await call(alice, "PUT", "/secrets/API_KEY", { value: SECRET })).status).toBe(201);
    const wf = await createWorkflow(alice, {
      ...hello,
      nodes: [
        code("prepare", "console.log('key is', secrets.API_KEY); return { path: '/items', key: secrets.API_KEY }"),
        {
          id: "fetch",
          name: "fetch",
          type: "restApi",
          config: { url: `${target.url}{{prepare.data.path}}`, method: "GET", headers: { Authorization: "Bearer {{secrets.API_KEY}}" } },
        },
      ],
    });
    const res = await trigger(alice, wf.id, { triggerType: "manual", isBlocking: true });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      executionId: expect.any(String),
      status: "success",
      startAt: expect.any(Number),
      endAt: expect.any(Number),
    });
    expect(res.headers.get("location")).toBeNull();

    // The target really received the secret; the record never holds it.
    expect(target.requests.at(-1)).toMatchObject({ path: "/items", headers: { authorization: `Bearer ${SECRET}` } });
    const execution = await call(alice, "GET", `/executions/${res.body.executionId}?workflowId=${wf.id}`);
    expect(execution.body.status).toBe("success");
    const [, prepare, fetchStep] = execution.body.steps;
    expect(prepare.output).toEqual({ data: { path: "/items", key: "***" } });
    expect(prepare.log).toContain("key is ***");
    expect(fetchStep.output.data).toMatchObject({ status: 200, data: { path: "/items", auth: "Bearer ***", items: [1, 2, 3] } });
    expect(fetchStep.inputs).toEqual(expect.arrayContaining(["prepare.data.path", "secrets.API_KEY"]));
    expect(JSON.stringify(execution.body)).not.toContain(SECRET);
  });

  it("a failing node ends the execution failed with the contract's error format; dependents do not run", async () => {
    const alice = await newOwner();
    const wf = await createWorkflow(alice, {
      ...hello,
      nodes: [code("ok"), code("boom", "throw new Error('nope')"), code("after")],
      edges: [
        { id: "e1", source: "t", target: "ok" },
        { id: "e2", source: "ok", target: "boom" },
        { id: "e3", source: "boom", target: "after" },
      ],
    });
    const res = await trigger(alice, wf.id, { triggerType: "manual", isBlocking: true });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "failed", error: "1 of 2 steps failed: boom", endAt: expect.any(Number) });
    const execution = await call(alice, "GET", `/executions/${res.body.executionId}?workflowId=${wf.id}`);
    expect(execution.body.steps.map((s: Json) => s.id)).toEqual(["t", "ok", "boom"]);
    expect(execution.body.steps[2]).toMatchObject({ success: false, errorCode: "SANDBOX_ERROR", error: expect.stringContaining("nope") });
  });

  it("answers the current pending state when the wait runs out, and the run continues", async () => {
    const slow = await useSlowWait(300);
    try {
      const alice = await newOwner();
      const wf = await createWorkflow(alice, {
        ...hello,
        nodes: [{ id: "wait", name: "wait", type: "restApi", config: { url: `${target.url}/slow`, method: "GET" } }],
      });
      const res = await trigger(alice, wf.id, { triggerType: "manual", isBlocking: true });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ executionId: expect.any(String), status: "pending", startAt: expect.any(Number) });
      const execution = await terminal(alice, `/executions/${res.body.executionId}?workflowId=${wf.id}`);
      expect(execution.status).toBe("success");
    } finally {
      slow.restore();
    }
  });
});

/** Lowers blocking_trigger_wait_ms for one test. */
async function useSlowWait(ms: number) {
  const limits = service.runtime.config.limits as { blockingTriggerWaitMs: number };
  const before = limits.blockingTriggerWaitMs;
  limits.blockingTriggerWaitMs = ms;
  return { restore: () => (limits.blockingTriggerWaitMs = before) };
}

describe("checks and their order", () => {
  it("body fields come first (400, even for an unknown workflow), then 404, then TRIGGER_TYPE_MISMATCH", async () => {
    const alice = await newOwner();
    const bob = await newOwner();
    const wf = await createWorkflow(alice, hello);
    const unknown = "01JD7Q0S7W3C2Y8K5N6M4P1R9T";

    const missing = await trigger(alice, unknown, {});
    expect(missing.status).toBe(400);
    expect(missing.body).toMatchObject({ code: "VALIDATION_FAILED", errors: [{ path: "body.triggerType" }] });

    const bad = await trigger(alice, wf.id, {
      triggerType: "manual",
      triggerOutput: { data: 1, extra: true },
      triggerInput: { settings: {}, "not-an-id": 1, secrets: 2 },
      isBlocking: "yes",
      other: 1,
    });
    expect(bad.status).toBe(400);
    expect(bad.body.errors.map((e: Json) => e.path).sort()).toEqual(
      [
        "body.isBlocking",
        "body.other",
        "body.triggerInput.not-an-id",
        "body.triggerInput.secrets",
        "body.triggerInput.settings",
        "body.triggerOutput.extra",
      ].sort(),
    );

    for (const id of [unknown, "not-a-ulid", wf.id.toLowerCase() + "x"]) {
      const res = await trigger(alice, id, { triggerType: "manual" });
      expect(res.status).toBe(404);
      expect(res.body.code).toBe("WORKFLOW_NOT_FOUND");
    }
    const foreign = await trigger(bob, wf.id, { triggerType: "manual" });
    expect(foreign.status).toBe(404);
    expect(foreign.body).toMatchObject({
      code: "WORKFLOW_NOT_FOUND",
      detail: (await trigger(bob, unknown, { triggerType: "manual" })).body.detail,
    });

    const mismatch = await trigger(alice, wf.id, { triggerType: "cron" });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body).toMatchObject({ code: "TRIGGER_TYPE_MISMATCH", errors: [{ path: "body.triggerType" }] });

    const clash = await trigger(alice, wf.id, { triggerType: "manual", triggerInput: { first: 1 } });
    expect(clash.status).toBe(400);
    expect(clash.body).toMatchObject({ code: "VALIDATION_FAILED", errors: [{ path: "body.triggerInput.first" }] });

    // A lower-case id is the same workflow; nothing above claimed an execution.
    const ok = await trigger(alice, wf.id.toLowerCase(), { triggerType: "manual", isBlocking: true });
    expect(ok.status).toBe(200);
    expect((await call(alice, "GET", `/workflows/${wf.id}`)).body.executionCount).toBe(1);
  });

  it("412 WORKFLOW_NOT_RUNNABLE with each reason", async () => {
    const alice = await newOwner();
    const reason = async (id: string) => {
      const res = await trigger(alice, id, { triggerType: "manual" });
      expect(res.status).toBe(412);
      expect(res.body.code).toBe("WORKFLOW_NOT_RUNNABLE");
      return res.body.reason;
    };

    const paused = await createWorkflow(alice, hello);
    expect((await call(alice, "POST", `/workflows/${paused.id}:pause`)).status).toBe(200);
    expect(await reason(paused.id)).toBe("DISABLED");

    const later = await createWorkflow(alice, { ...hello, startAt: Date.now() + 3600_000 });
    expect(await reason(later.id)).toBe("NOT_STARTED");

    const once = await createWorkflow(alice, { ...hello, maxExecution: 1 });
    expect((await trigger(alice, once.id, { triggerType: "manual", isBlocking: true })).status).toBe(200);
    expect(await reason(once.id)).toBe("MAX_EXECUTIONS_REACHED");

    const expiring = await createWorkflow(alice, { ...hello, expiredAt: Date.now() + 60_000 });
    offset += 120_000;
    try {
      expect(await reason(expiring.id)).toBe("EXPIRED");
    } finally {
      offset -= 120_000;
    }
    for (const id of [paused.id, later.id, expiring.id]) expect((await call(alice, "GET", `/workflows/${id}`)).body.executionCount).toBe(0);
  });
});

describe("Idempotency-Key", () => {
  it("a repeat answers the same execution in its current state with Idempotency-Replayed, even once unrunnable", async () => {
    const alice = await newOwner();
    const wf = await createWorkflow(alice, { ...hello, maxExecution: 1 });
    const key = { "Idempotency-Key": "run-1" };
    const first = await trigger(alice, wf.id, { triggerType: "manual" }, key);
    expect(first.status).toBe(202);
    await terminal(alice, first.headers.get("location")!);

    const again = await trigger(alice, wf.id, { triggerType: "manual" }, key);
    expect(again.status).toBe(202);
    expect(again.headers.get("idempotency-replayed")).toBe("true");
    expect(again.headers.get("location")).toBe(first.headers.get("location"));
    expect(again.body).toEqual({
      executionId: first.body.executionId,
      status: "success",
      startAt: first.body.startAt,
      endAt: expect.any(Number),
    });

    // The workflow is completed now; the key still answers, and without it the trigger is refused.
    expect((await trigger(alice, wf.id, { triggerType: "manual" })).status).toBe(412);
    const mismatch = await trigger(alice, wf.id, { triggerType: "manual", isBlocking: true }, key);
    expect(mismatch.status).toBe(422);
    expect(mismatch.body.code).toBe("IDEMPOTENCY_KEY_MISMATCH");
    expect((await call(alice, "GET", `/workflows/${wf.id}`)).body.executionCount).toBe(1);
  });

  it("a blocking original is replayed as 200 and waits again; the key is per workflow and per caller", async () => {
    const alice = await newOwner();
    const wf = await createWorkflow(alice, hello);
    const other = await createWorkflow(alice, hello);
    const key = { "Idempotency-Key": "same-key" };
    const first = await trigger(alice, wf.id, { triggerType: "manual", isBlocking: true }, key);
    expect(first.status).toBe(200);
    const again = await trigger(alice, wf.id, { isBlocking: true, triggerType: "manual" }, key);
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotency-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);

    const elsewhere = await trigger(alice, other.id, { triggerType: "manual", isBlocking: true }, key);
    expect(elsewhere.status).toBe(200);
    expect(elsewhere.body.executionId).not.toBe(first.body.executionId);
    expect(elsewhere.headers.get("idempotency-replayed")).toBeNull();
  });

  it("a blocking replay waiting on a run of this process reads the execution only when the run changes it", async () => {
    const alice = await newOwner();
    const wf = await createWorkflow(alice, {
      ...hello,
      nodes: [{ id: "wait", name: "wait", type: "restApi", config: { url: `${target.url}/hold`, method: "GET" } }],
    });
    const key = { "Idempotency-Key": "held-run" };
    const body = { triggerType: "manual", isBlocking: true };
    const holding = target.requests.length;
    const first = trigger(alice, wf.id, body, key);
    await until(() => target.requests.length > holding); // the run is inside its only node
    const reads = recordReads(wf.id);
    try {
      const replay = trigger(alice, wf.id, body, key);
      await until(() => reads.times.length > 0); // the replay's first read of the execution
      await sleep(500);
      // Polling would have read the record 3 times by now (after 100, 250 and 475 ms); notified, it waits.
      expect(reads.times.filter((t) => t > reads.times[0]!)).toEqual([]);
      const released = Date.now();
      held.splice(0).forEach((answer) => answer());
      const [original, again] = await Promise.all([first, replay]);
      expect(original.body.status).toBe("success");
      expect(again.headers.get("idempotency-replayed")).toBe("true");
      expect(again.body).toEqual(original.body);
      // Woken by the run's end, not by a poll: read again only after the release.
      expect(reads.times.filter((t) => t > reads.times[0]! && t < released)).toEqual([]);
    } finally {
      reads.stop();
    }
  });

  it("409 while the first request has not claimed yet; a refused request (412) forgets its key", async () => {
    const alice = await newOwner();
    const wf = await createWorkflow(alice, hello);
    const body = { triggerType: "manual" };
    await Idempotency.claim(
      { owner: alice.owner, scope: `trigger#${wf.id}`, key: "in-flight" },
      { fingerprint: Idempotency.bodyFingerprint(body), operationId: ulid(), recover: async () => undefined },
    );
    const busy = await trigger(alice, wf.id, body, { "Idempotency-Key": "in-flight" });
    expect(busy.status).toBe(409);
    expect(busy.body.code).toBe("IDEMPOTENCY_IN_PROGRESS");

    expect((await call(alice, "POST", `/workflows/${wf.id}:pause`)).status).toBe(200);
    expect((await trigger(alice, wf.id, body, { "Idempotency-Key": "k2" })).status).toBe(412);
    expect((await call(alice, "POST", `/workflows/${wf.id}:resume`)).status).toBe(200);
    const retried = await trigger(alice, wf.id, body, { "Idempotency-Key": "k2" });
    expect(retried.status).toBe(202);
    expect(retried.headers.get("idempotency-replayed")).toBeNull();

    const badKey = await trigger(alice, wf.id, body, { "Idempotency-Key": "has space" });
    expect(badKey.status).toBe(400);
    expect(badKey.body.errors[0].path).toBe("header.Idempotency-Key");
  });
});

describe("concurrent triggers", () => {
  it.each([
    [10, 3],
    [30, 10],
  ])("%i at once on maxExecution %i: exactly that many executions, the rest 412 MAX_EXECUTIONS_REACHED", async (count, max) => {
    const alice = await newOwner();
    const wf = await createWorkflow(alice, { ...hello, maxExecution: max });
    const answers = await Promise.all(Array.from({ length: count }, () => trigger(alice, wf.id, { triggerType: "manual" })));
    const accepted = answers.filter((a) => a.status === 202);
    const refused = answers.filter((a) => a.status === 412);
    expect(accepted).toHaveLength(max);
    expect(refused).toHaveLength(count - max);
    for (const r of refused) expect(r.body).toMatchObject({ code: "WORKFLOW_NOT_RUNNABLE", reason: "MAX_EXECUTIONS_REACHED" });

    const executions = await Promise.all(accepted.map((a) => terminal(alice, a.headers.get("location")!)));
    expect(executions.map((e) => e.index).sort((a, b) => a - b)).toEqual(Array.from({ length: max }, (_, i) => i));
    expect(new Set(executions.map((e) => e.id)).size).toBe(max);
    const listed = await call(alice, "GET", `/workflows/${wf.id}/executions`);
    expect(listed.body.data).toHaveLength(max);
    expect((await call(alice, "GET", `/workflows/${wf.id}`)).body).toMatchObject({
      executionCount: max,
      status: "completed",
      completionReason: "MAX_EXECUTIONS_REACHED",
    });
  });
});

/** Times of this process's strongly consistent GetItems of executions of `workflowId` (status reads), until `stop`. */
function recordReads(workflowId: string) {
  const db = service.runtime.db as unknown as { send: (command: unknown) => Promise<unknown> };
  const send = db.send;
  const times: number[] = [];
  db.send = (command: unknown) => {
    const input = (command as { input?: { Key?: { pk?: string } } }).input;
    if (command instanceof GetCommand && input?.Key?.pk === `WF#${workflowId}#EXEC`) times.push(Date.now());
    return send.call(db, command);
  };
  return { times, stop: () => (db.send = send) };
}

async function until(condition: () => boolean, timeoutMs = 10_000) {
  const end = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > end) throw new Error("condition not reached in time");
    await sleep(10);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
