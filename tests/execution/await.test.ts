/**
 * The `await` node (API.md §17.1) over a real HTTP server of the whole service: a run waits (status `waiting`,
 * `waitingFor`), a signal approves or rejects it and the run goes on from its stored state; approvers, the check
 * order, races (two signals, two waits ending at once, a signal at the deadline), timeouts, large outputs across a
 * wait, deletion, reads (filters, stats, getStatus), simulate and estimateFees.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signIn } from "../support/auth";
import { httpTarget } from "../support/server";
import { startService, type TestService } from "../support/service";
import { executionPath, jsonClient, type Json, type Owner } from "../support/client";
import { codeNode as code } from "../support/workflows";
import { endDueWaits } from "../../shared/execution/waits";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { getAddress } from "viem";
import { TRANSFER, deployTestToken } from "../support/chain";
import { sweep } from "../../shared/execution/execution-sweep";
import { release } from "../../shared/watch/checkpoint";
import { watchChain } from "../../shared/watch/pass";

let service: TestService;
const { call, ownerWithWallet, createWorkflow } = jsonClient(() => service.url);
let offset = 0;

beforeAll(async () => {
  // A small JavaScript budget per execution: one test spends it on both sides of a wait.
  service = await startService({ SANDBOX_TIME_PER_EXECUTION_MS: "1500" });
  service.runtime.now = () => Date.now() + offset;
});

afterAll(async () => {
  await service?.close();
});

const approval = (id: string, config: Json = {}) => ({ id, name: id, type: "await", config: { channel: "api", ...config } });

async function waitFor(who: Owner, wf: string, exec: string, until: (e: Json) => boolean, timeoutMs = 15_000): Promise<Json> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const res = await call(who, "GET", executionPath(wf, exec));
    expect(res.status).toBe(200);
    if (until(res.body)) return res.body;
    if (Date.now() > end) throw new Error(`execution still ${res.body.status}: ${JSON.stringify(res.body.waitingFor)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const blocking = async (who: Owner, wf: string) => {
  const res = await call(who, "POST", `/workflows/${wf}:trigger`, { triggerType: "manual", isBlocking: true });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
};

const signal = (who: { token: string }, wf: string, exec: string, body: Json, headers: Record<string, string> = {}) =>
  call(who as Owner, "POST", `/executions/${exec}:signal?workflowId=${wf}`, body, headers);

describe("approve and reject", () => {
  it("waits, shows waitingFor, and goes on after an approval with the payload downstream", async () => {
    const alice = await ownerWithWallet();
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: { data: { n: 2 } } },
      nodes: [
        code("before", "return start.data.n * 10"),
        approval("gate", { prompt: "Pay {{before.data}}?", timeoutSeconds: 3600 }),
        code("after", "return gate.data.payload.extra + before.data"),
      ],
    });
    const started = await blocking(alice, wf.id);
    expect(started.status).toBe("waiting");
    const waiting = (await call(alice, "GET", executionPath(wf.id, started.executionId))).body;
    expect(waiting.status).toBe("waiting");
    expect(waiting.endAt).toBeUndefined();
    expect(waiting.waitingFor).toEqual([
      {
        nodeId: "gate",
        name: "gate",
        kind: "signal",
        since: expect.any(Number),
        deadline: waiting.waitingFor[0].since + 3_600_000,
        prompt: "Pay 20?",
        approvers: [],
      },
    ]);
    expect(waiting.steps.map((s: Json) => s.id)).toEqual(["t", "before"]);
    const status = (await call(alice, "GET", `/executions/${started.executionId}:getStatus?workflowId=${wf.id}`)).body;
    expect(status).toMatchObject({ status: "waiting", waitingFor: waiting.waitingFor });

    const res = await signal(alice, wf.id, started.executionId, { decision: "approve", payload: { extra: 5 } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.status).toBe("success");
    expect(res.body.waitingFor).toBeUndefined();
    const gate = res.body.steps.find((s: Json) => s.id === "gate");
    expect(gate).toMatchObject({ type: "await", success: true, startAt: waiting.waitingFor[0].since });
    expect(gate.output.data).toEqual({ decision: "approve", payload: { extra: 5 }, signer: expect.any(String), at: expect.any(Number) });
    expect(gate.output.data.signer).toBe(getAddress(alice.owner));
    expect(res.body.steps.find((s: Json) => s.id === "after").output.data).toBe(25);
    expect(res.body.steps.map((s: Json) => s.id)).toEqual(["t", "before", "gate", "after"]);
  });

  it("a reject fails the await step REJECTED, skips its descendants and ends failed", async () => {
    const alice = await ownerWithWallet();
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [approval("gate"), code("after")],
    });
    const started = await blocking(alice, wf.id);
    const res = await signal(alice, wf.id, started.executionId, { decision: "reject", payload: "no" });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe("failed");
    const gate = res.body.steps.find((s: Json) => s.id === "gate");
    expect(gate).toMatchObject({ success: false, errorCode: "REJECTED" });
    expect(gate.output.data).toMatchObject({ decision: "reject", payload: "no" });
    expect(res.body.steps.map((s: Json) => s.id)).toEqual(["t", "gate"]);
    // Again: the same decision and payload from the same caller is a repeat (200, no change); anything else 409.
    const again = await signal(alice, wf.id, started.executionId, { decision: "reject", payload: "no" });
    expect(again.status).toBe(200);
    expect(again.body.status).toBe("failed");
    const other = await signal(alice, wf.id, started.executionId, { decision: "approve" });
    expect(other.status).toBe(409);
    expect(other.body.code).toBe("EXECUTION_NOT_WAITING");
  });
});

describe("who may signal", () => {
  it("an approver signals and reads only the status summary; anyone else gets 404", async () => {
    const alice = await ownerWithWallet();
    const bob = await signIn(httpTarget(service.url), { expiresInMs: 3_600_000 });
    const eve = await signIn(httpTarget(service.url), { expiresInMs: 3_600_000 });
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [approval("gate", { approvers: [bob.owner.toLowerCase()] }), code("after")],
    });
    const started = await blocking(alice, wf.id);
    // Approvers are answered EIP-55 whatever case they were given in.
    const waiting = (await call(alice, "GET", executionPath(wf.id, started.executionId))).body;
    expect(waiting.waitingFor[0].approvers).toEqual([getAddress(bob.owner)]);
    expect((await signal(eve, wf.id, started.executionId, { decision: "approve" })).status).toBe(404);
    expect((await call(bob as Owner, "GET", executionPath(wf.id, started.executionId))).status).toBe(404);
    const res = await signal(bob, wf.id, started.executionId, { decision: "approve" });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(["endAt", "id", "startAt", "status", "workflowId"]);
    expect(res.body.status).toBe("success");
    const done = (await call(alice, "GET", executionPath(wf.id, started.executionId))).body;
    expect(done.steps.find((s: Json) => s.id === "gate").output.data.signer).toBe(getAddress(bob.owner));
  });
});

describe("races", () => {
  it("two concurrent signals record one outcome", async () => {
    const alice = await ownerWithWallet();
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [approval("gate"), code("after")],
    });
    const started = await blocking(alice, wf.id);
    const answers = await Promise.all([
      signal(alice, wf.id, started.executionId, { decision: "approve" }),
      signal(alice, wf.id, started.executionId, { decision: "reject" }),
    ]);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
    const done = await waitFor(alice, wf.id, started.executionId, (e) => e.status !== "pending" && e.status !== "waiting");
    const won = answers.find((a) => a.status === 200)!.body.status;
    expect(done.status).toBe(won);
    expect(done.steps.filter((s: Json) => s.id === "gate")).toHaveLength(1);
  });

  it("two waits ending at once start one driver: the join below them runs once", async () => {
    const alice = await ownerWithWallet();
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [approval("a"), approval("b"), code("join", "return a.data.decision + b.data.decision")],
      edges: [
        { id: "e1", source: "t", target: "a" },
        { id: "e2", source: "t", target: "b" },
        { id: "e3", source: "a", target: "join" },
        { id: "e4", source: "b", target: "join" },
      ],
    });
    const started = await blocking(alice, wf.id);
    expect(started.status).toBe("waiting");
    const missing = await signal(alice, wf.id, started.executionId, { decision: "approve" });
    expect(missing.status).toBe(400);
    expect(missing.body.errors[0].path).toBe("body.nodeId");
    const answers = await Promise.all([
      signal(alice, wf.id, started.executionId, { decision: "approve", nodeId: "a" }),
      signal(alice, wf.id, started.executionId, { decision: "approve", nodeId: "b" }),
    ]);
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    const done = await waitFor(alice, wf.id, started.executionId, (e) => e.status === "success");
    expect(done.steps.filter((s: Json) => s.id === "join")).toHaveLength(1);
    expect(done.steps.find((s: Json) => s.id === "join").output.data).toBe("approveapprove");
  });
});

describe("deadlines", () => {
  it("a wait past its deadline ends AWAIT_TIMEOUT; a signal at the deadline is refused", async () => {
    const alice = await ownerWithWallet();
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [approval("gate", { timeoutSeconds: 60 }), code("after")],
    });
    const started = await blocking(alice, wf.id);
    offset += 60_000;
    try {
      const late = await signal(alice, wf.id, started.executionId, { decision: "approve" });
      expect(late.status).toBe(409);
      await endDueWaits(service.runtime.now());
      const done = await waitFor(alice, wf.id, started.executionId, (e) => e.status === "failed");
      expect(done.steps.find((s: Json) => s.id === "gate")).toMatchObject({ success: false, errorCode: "AWAIT_TIMEOUT" });
      expect(done.steps.map((s: Json) => s.id)).toEqual(["t", "gate"]);
    } finally {
      offset -= 60_000;
    }
  });
});

describe("state across a wait", () => {
  it("a template after the wait resolves an output above 256 KiB exactly as without the wait", async () => {
    const alice = await ownerWithWallet();
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [code("big", "return 'x'.repeat(400000)"), approval("gate"), code("after", "return big.data.length")],
    });
    const started = await blocking(alice, wf.id);
    const before = (await call(alice, "GET", executionPath(wf.id, started.executionId))).body;
    expect(before.steps.find((s: Json) => s.id === "big").output.truncated).toBe(true);
    const res = await signal(alice, wf.id, started.executionId, { decision: "approve" });
    expect(res.body.status).toBe("success");
    expect(res.body.steps.find((s: Json) => s.id === "after").output.data).toBe(400_000);
  });
});

describe("reads", () => {
  it("status filters and stats count waiting executions; deleting the workflow ends them error", async () => {
    const alice = await ownerWithWallet();
    const wf = await createWorkflow(alice, { trigger: { id: "t", name: "start", type: "manual", config: {} }, nodes: [approval("gate")] });
    const started = await blocking(alice, wf.id);
    const listed = await call(alice, "GET", `/executions?workflowId=${wf.id}&status=waiting`);
    expect(listed.status, JSON.stringify(listed.body)).toBe(200);
    expect(listed.body.data.map((e: Json) => e.id)).toEqual([started.executionId]);
    const stats = await call(alice, "GET", `/executions:stats?workflowId=${wf.id}`);
    expect(stats.body).toMatchObject({ total: 1, waiting: 1, pending: 0, succeeded: 0, failed: 0 });
    expect((await call(alice, "DELETE", `/workflows/${wf.id}`)).status).toBe(204);
    const done = (await call(alice, "GET", executionPath(wf.id, started.executionId))).body;
    expect(done).toMatchObject({ status: "error", error: "workflow was deleted" });
    expect(done.waitingFor).toBeUndefined();
  });
});

describe("validation, simulate and fees", () => {
  it("refuses both or neither of channel and chainEvent, other channels, and an eleventh await node", async () => {
    const alice = await ownerWithWallet();
    const bad = async (nodes: Json[]) => {
      const res = await call(alice, "POST", "/workflows", {
        smartWalletAddress: alice.wallet,
        trigger: { id: "t", name: "start", type: "manual", config: {} },
        nodes,
      });
      expect(res.status).toBe(400);
      return res.body.errors.map((e: Json) => `${e.path}: ${e.message}`);
    };
    expect(await bad([{ id: "g", name: "g", type: "await", config: {} }])).toContain(
      "body.nodes[0].config: must set exactly one of channel and chainEvent",
    );
    expect(await bad([approval("g", { channel: "telegram" })])).toContain("body.nodes[0].config.channel: channel not supported");
    const eleven = Array.from({ length: 11 }, (_, i) => approval(`g${i}`));
    expect(await bad(eleven)).toContain("body.nodes[10]: must not be more than 10 await nodes in one workflow");
  });

  it("simulate approves at once as the caller; estimateFees prices the node at nothing", async () => {
    const alice = await ownerWithWallet();
    const definition = {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [approval("gate"), code("after", "return gate.data.decision")],
      inputVariables: {},
    };
    const sim = await call(alice, "POST", "/workflows:simulate", definition);
    expect(sim.status, JSON.stringify(sim.body)).toBe(200);
    expect(sim.body.status).toBe("success");
    const gate = sim.body.steps.find((s: Json) => s.id === "gate");
    expect(gate.output.data).toMatchObject({ decision: "approve", payload: null });
    expect(gate.output.data.signer).toBe(getAddress(alice.owner));
    expect(gate.log).toMatch(/approved at once/);
    const fees = await call(alice, "POST", "/workflows:estimateFees", {
      ...definition,
      createdAt: Date.now(),
      expireAt: Date.now() + 86_400_000,
      maxExecution: 10,
    });
    expect(fees.status, JSON.stringify(fees.body)).toBe(200);
    expect(fees.body.cogs).toEqual([]);
  });
});

describe("across a wait", () => {
  it("the stream stays open through the wait: waiting, then pending again, then success, one frame each", async () => {
    const alice = await ownerWithWallet();
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [approval("gate"), code("slow", "const t = Date.now(); while (Date.now() - t < 400) {} return 1")],
    });
    const started = await blocking(alice, wf.id);
    const res = await fetch(`${service.url}/executions/${started.executionId}:stream?workflowId=${wf.id}`, {
      headers: { Authorization: `Bearer ${alice.token}` },
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let text = "";
    const first = await reader.read();
    text += new TextDecoder().decode(first.value);
    expect((await signal(alice, wf.id, started.executionId, { decision: "approve" })).status).toBe(200);
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) break;
      text += new TextDecoder().decode(chunk.value);
    }
    const statuses = [...text.matchAll(/^data: (.*)$/gm)].map((m) => (JSON.parse(m[1]!) as Json).status);
    // One frame per status change (§10.9): the signal ending the wait while still `waiting` is no frame of its own.
    expect(statuses).toEqual(["waiting", "pending", "success"]);
    const frames = [...text.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]!) as Json);
    expect(frames[0]!.waitingFor).toHaveLength(1);
  });

  it("execution_timeout_ms counts pending time only, and a signal's Idempotency-Key replays its answer", async () => {
    const alice = await ownerWithWallet();
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [approval("gate", { timeoutSeconds: 7200 }), code("after")],
    });
    const started = await blocking(alice, wf.id);
    offset += 30 * 60_000; // twice the 15-minute execution timeout, all of it waiting
    try {
      await sweep(service.runtime.now());
      expect((await call(alice, "GET", executionPath(wf.id, started.executionId))).body.status).toBe("waiting");
      const headers = { "Idempotency-Key": "sig-1" };
      const first = await signal(alice, wf.id, started.executionId, { decision: "approve" }, headers);
      expect(first.status).toBe(200);
      expect(first.body.status).toBe("success");
      const again = await signal(alice, wf.id, started.executionId, { decision: "approve" }, headers);
      expect(again.status).toBe(200);
      expect(again.headers.get("idempotency-replayed")).toBe("true");
      expect(again.body.id).toBe(started.executionId);
      const mismatch = await signal(alice, wf.id, started.executionId, { decision: "reject" }, headers);
      expect(mismatch.status).toBe(422);
    } finally {
      offset -= 30 * 60_000;
    }
  });

  it("the JavaScript and HTTP budgets of the execution carry across the wait", async () => {
    const alice = await ownerWithWallet();
    const spin = (ms: number) => `const t = Date.now(); while (Date.now() - t < ${ms}) {} return 1`;
    const { sandboxTimePerExecutionMs } = service.runtime.config.limits;
    expect(sandboxTimePerExecutionMs).toBe(1500);
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [
        code("before", spin(Math.round(sandboxTimePerExecutionMs * 0.7))),
        approval("gate"),
        code("after", spin(sandboxTimePerExecutionMs)),
      ],
    });
    const started = await blocking(alice, wf.id);
    const res = await signal(alice, wf.id, started.executionId, { decision: "approve" });
    expect(res.body.status).toBe("failed");
    const after = res.body.steps.find((s: Json) => s.id === "after");
    expect(after.errorCode).toBe("SANDBOX_TIMEOUT");
    expect(after.error).toMatch(/budget/);
  });
});

describe("chain-event waits", () => {
  it("the first matching log after the wait began ends it through the watcher, and the run goes on with the log", async () => {
    const alice = await ownerWithWallet();
    const token = await deployTestToken();
    const to = privateKeyToAccount(generatePrivateKey()).address;
    await token.mint(to, 1n); // before the wait: never ends it
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [
        {
          id: "gate",
          name: "gate",
          type: "await",
          config: { chainEvent: { queries: [{ addresses: [token.address], topics: [TRANSFER] }] } },
        },
        code("after", "return gate.data.transactionHash"),
      ],
    });
    const holder = `await-${wf.id}`;
    expect((await watchChain(31337, { holder })).status).toMatch(/started|processed/);
    const started = await blocking(alice, wf.id);
    expect(started.status).toBe("waiting");
    const waiting = (await call(alice, "GET", executionPath(wf.id, started.executionId))).body;
    expect(waiting.waitingFor).toEqual([expect.objectContaining({ nodeId: "gate", kind: "chainEvent" })]);
    expect(waiting.waitingFor[0].approvers).toBeUndefined();
    // A chain-event wait takes no signal.
    expect((await signal(alice, wf.id, started.executionId, { decision: "approve" })).status).toBe(409);

    await token.mint(to, 2n);
    let done: Json | undefined;
    for (let i = 0; i < 40 && done === undefined; i++) {
      await watchChain(31337, { holder });
      const read = (await call(alice, "GET", executionPath(wf.id, started.executionId))).body;
      if (read.status !== "waiting" && read.status !== "pending") done = read;
      else await new Promise((r) => setTimeout(r, 250));
    }
    await release(31337, holder);
    expect(done?.status).toBe("success");
    const gate = done!.steps.find((s: Json) => s.id === "gate");
    expect(gate.output.data).toMatchObject({ address: getAddress(token.address), transactionHash: expect.stringMatching(/^0x/) });
    // The log of the second mint (amount 2), not the first one, mined before the wait began.
    expect(BigInt(gate.output.data.data)).toBe(2n);
    expect(done!.steps.find((s: Json) => s.id === "after").output.data).toBe(gate.output.data.transactionHash);
  });
});

describe("chain-event waits begin at the head", () => {
  it("a log mined just before the wait began never ends it, even right after another wait read the head; one mined after does", async () => {
    const alice = await ownerWithWallet();
    const token = await deployTestToken();
    const to = privateKeyToAccount(generatePrivateKey()).address;
    const wf = await createWorkflow(alice, {
      trigger: { id: "t", name: "start", type: "manual", config: {} },
      nodes: [
        {
          id: "gate",
          name: "gate",
          type: "await",
          config: { chainEvent: { queries: [{ addresses: [token.address], topics: [TRANSFER] }] } },
        },
      ],
    });
    const holder = `await-head-${wf.id}`;
    // A first run reads the head as its wait begins; a transfer is mined; a second run reaches its wait at once.
    const first = await blocking(alice, wf.id);
    expect(first.status).toBe("waiting");
    await watchChain(31337, { holder });
    await token.mint(to, 1n);
    const second = await blocking(alice, wf.id);
    expect(second.status).toBe("waiting");

    const settle = async (exec: string): Promise<Json | undefined> => {
      for (let i = 0; i < 40; i++) {
        await watchChain(31337, { holder });
        const read = (await call(alice, "GET", executionPath(wf.id, exec))).body;
        if (read.status !== "waiting" && read.status !== "pending") return read;
        await new Promise((r) => setTimeout(r, 100));
      }
      return undefined;
    };
    // The first run's wait began before the transfer: it ends on it. The second's began after: it does not.
    expect((await settle(first.executionId))?.status).toBe("success");
    for (let i = 0; i < 5; i++) await watchChain(31337, { holder });
    expect((await call(alice, "GET", executionPath(wf.id, second.executionId))).body.status).toBe("waiting");

    await token.mint(to, 2n);
    const done = await settle(second.executionId);
    await release(31337, holder);
    expect(done?.status).toBe("success");
    expect(BigInt(done!.steps.find((s: Json) => s.id === "gate").output.data.data)).toBe(2n);
  });
});
