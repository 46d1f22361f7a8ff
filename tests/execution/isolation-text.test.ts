/**
 * Text one owner makes the service build or scan (API.md §10.2, §18.2, §18.3, §18.6), over a real HTTP server of
 * the whole service, with another owner's requests timed meanwhile: redaction of a secret that an inserted `***`
 * completes again (`***x`, `x***`), template expansion counted against the execution state, the rendered prompt
 * of an `await` node, and a restApi header named `__proto__`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, type TestService } from "../support/service";
import { startUpstream, type Upstream } from "../support/upstream";
import { executionPath, jsonClient, type Owner } from "../support/client";

let service: TestService;
let target: Upstream;
const { call, ownerWithWallet, createWorkflow, waitTerminal } = jsonClient(() => service.url);

beforeAll(async () => {
  service = await startService();
  target = await startUpstream((req, res) => {
    if (req.url === "/redirect") {
      res.writeHead(302, { Location: "/headers" });
      return res.end();
    }
    res.setHeader("Content-Type", "application/json");
    res.end(JSON.stringify({ ok: true }));
  });
});

afterAll(async () => {
  await service?.close();
  await target?.close();
});

/**
 * Runs `attack` while `other` asks GET /health every 50 ms, then runs a one-line script as `other`; answers the
 * attack's result and the slowest of `other`'s answers (ms).
 */
async function whileNeighbourWaits<T>(other: Owner, attack: () => Promise<T>): Promise<{ result: T; slowest: number }> {
  let slowest = 0;
  let done = false;
  const timed = async (request: () => Promise<{ status: number }>) => {
    const started = performance.now();
    expect((await request()).status).toBe(200);
    slowest = Math.max(slowest, performance.now() - started);
  };
  const neighbour = (async () => {
    while (!done) {
      await timed(() => call(other, "GET", "/health"));
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  await new Promise((r) => setTimeout(r, 100));
  const result = await attack();
  done = true;
  await neighbour;
  await timed(() => call(other, "POST", "/nodes:run", { node: script("one", "return 1") }));
  return { result, slowest };
}

const script = (id: string, source: string) => ({ id, name: id, type: "customCode", config: { lang: "javascript", source } });

async function withSecret(value: string): Promise<[Owner, Owner]> {
  const [a, b] = await Promise.all([ownerWithWallet(), ownerWithWallet()]);
  expect((await call(a, "PUT", "/secrets/STAR", { value })).status).toBe(201);
  return [a, b];
}

describe("redaction of a secret that *** completes again (§10.2, §18)", () => {
  for (const [secret, source] of [
    ["***x", 'const s = secrets.STAR; return "***" + "x".repeat(250000)'],
    ["x***", 'const s = secrets.STAR; return "x".repeat(250000) + "***"'],
  ]) {
    it(`a /nodes:run answer of 250 KB around ${secret} is redacted at once, and another owner is answered meanwhile`, async () => {
      const [a, b] = await withSecret(secret!);
      const { result, slowest } = await whileNeighbourWaits(b, () => call(a, "POST", "/nodes:run", { node: script("s", source!) }));
      expect(result.status).toBe(200);
      expect(result.body.success).toBe(true);
      expect(result.body.output.data).toBe("***");
      expect(slowest).toBeLessThan(2_000);
    }, 60_000);
  }

  it("an async :trigger whose trigger output carries 300 KB of ***x is redacted at once, another owner answered meanwhile", async () => {
    const [a, b] = await withSecret("***x");
    const created = await createWorkflow(a, {
      trigger: { id: "t", name: "start", type: "manual", config: { data: {} } },
      nodes: [script("s", "return secrets.STAR.length")],
    });
    const { result, slowest } = await whileNeighbourWaits(b, async () => {
      const started = await call(a, "POST", `/workflows/${created.id}:trigger`, {
        triggerType: "manual",
        isBlocking: false,
        triggerOutput: { data: { text: "***" + "x".repeat(300_000) } },
      });
      expect(started.status).toBe(202);
      return waitTerminal(a, executionPath(created.id, started.body.executionId), { timeoutMs: 60_000, intervalMs: 100 });
    });
    expect(result.status).toBe("success");
    expect(result.steps[0].output.data).toEqual({ text: "***" });
    expect(slowest).toBeLessThan(2_000);
  }, 90_000);
});

describe("template expansion counted against the execution state (§8.6, §18.2)", () => {
  const A = { data: "x".repeat(16_000) };
  const many = (n: number) => "{{A.data}}".repeat(n);

  it("six /nodes:run of {{A.data}} × 30,000 (480 MB each) at once stop at 32 MiB with OUTPUT_TOO_LARGE; another owner is answered meanwhile", async () => {
    const [a, b] = await Promise.all([ownerWithWallet(), ownerWithWallet()]);
    const node = { id: "s", name: "s", type: "restApi", config: { url: `${target.url}/post`, method: "POST", body: many(30_000) } };
    const { result, slowest } = await whileNeighbourWaits(b, () =>
      Promise.all(Array.from({ length: 6 }, () => call(a, "POST", "/nodes:run", { node, inputVariables: { A } }))),
    );
    for (const answer of result) {
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      expect(answer.body).toMatchObject({ success: false, errorCode: "OUTPUT_TOO_LARGE", error: "execution state would exceed 32 MiB" });
    }
    expect(slowest).toBeLessThan(2_000);
  }, 60_000);

  it("in a parallel loop, the iterations' expansions share the budget: the loop fails ITERATION_FAILED with the budget's message", async () => {
    const [a] = await Promise.all([ownerWithWallet()]);
    const loop = {
      id: "l",
      name: "l",
      type: "loop",
      config: {
        inputVariable: "{{A.items}}",
        iterVar: "item",
        executionMode: "parallel",
        // 8 MB of body each: four iterations' bodies pass the 32 MiB, whichever order they run in.
        runner: { type: "restApi", config: { url: `${target.url}/post`, method: "POST", body: many(500) } },
      },
    };
    const answer = await call(a, "POST", "/nodes:run", {
      node: loop,
      inputVariables: { A: { ...A, items: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] } },
    });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ success: false, errorCode: "ITERATION_FAILED" });
    expect(answer.body.error).toMatch(/^iteration \d+: execution state would exceed 32 MiB$/);
    expect(target.requests.filter((r) => r.path === "/post").length).toBeLessThan(10);
  }, 60_000);

  it("an await prompt that expands past 4096 bytes fails its step INVALID_INPUT (was: the run ended 'internal error' on the item limit)", async () => {
    const a = await ownerWithWallet();
    const created = await createWorkflow(a, {
      trigger: { id: "t", name: "start", type: "manual", config: { data: {} } },
      nodes: [{ id: "w", name: "w", type: "await", config: { channel: "api", prompt: many(100) } }],
      inputVariables: { A },
    });
    const started = await call(a, "POST", `/workflows/${created.id}:trigger`, { triggerType: "manual", isBlocking: false });
    expect(started.status).toBe(202);
    const execution = await waitTerminal(a, executionPath(created.id, started.body.executionId), { timeoutMs: 60_000, intervalMs: 100 });
    expect(execution.status).toBe("failed");
    expect(execution.steps[1]).toMatchObject({
      success: false,
      errorCode: "INVALID_INPUT",
      error: "prompt after template expansion exceeds 4096 bytes",
    });
  }, 60_000);
});

describe("free-form keys on the outbound path (§18.6)", () => {
  it("a restApi header named __proto__ is sent, in a run and in /nodes:run", async () => {
    const [a] = await withSecret("proto-value");
    const node = {
      id: "h",
      name: "h",
      type: "restApi",
      config: { url: `${target.url}/headers`, method: "GET", headers: JSON.parse('{"__proto__": "proto-value", "x-other": "{{A.v}}"}') },
    };
    /** The headers of the last request, from its raw lines (node's parsed `req.headers` drops `__proto__`). */
    const sent = () => {
      const raw = target.requests.at(-1)!.rawHeaders;
      const pairs = Object.fromEntries(raw.flatMap((name, i) => (i % 2 === 0 ? [[name.toLowerCase(), raw[i + 1]]] : [])));
      return { proto: Object.hasOwn(pairs, "__proto__") ? pairs.__proto__ : undefined, other: pairs["x-other"] };
    };

    const ran = await call(a, "POST", "/nodes:run", { node, inputVariables: { A: { v: "other" } } });
    expect(ran.body.success, JSON.stringify(ran.body)).toBe(true);
    expect(sent()).toEqual({ proto: "proto-value", other: "other" });

    for (const variant of [
      { ...node, config: { ...node.config, method: "POST", body: "{}" } },
      { ...node, config: { ...node.config, url: `${target.url}/redirect` } },
      { id: "l", name: "l", type: "loop", config: { inputVariable: "{{A.list}}", runner: { type: "restApi", config: node.config } } },
      { ...node, config: { ...node.config, headers: JSON.parse('{"__proto__": "{{secrets.STAR}}", "x-other": "{{A.v}}"}') } },
    ]) {
      const answer = await call(a, "POST", "/nodes:run", { node: variant, inputVariables: { A: { v: "other", list: [1] } } });
      expect(answer.body.success, JSON.stringify(answer.body)).toBe(true);
      expect(sent(), JSON.stringify(variant)).toEqual({ proto: "proto-value", other: "other" });
    }

    const created = await createWorkflow(a, {
      trigger: { id: "t", name: "start", type: "manual", config: { data: {} } },
      nodes: [node],
      inputVariables: { A: { v: "other" } },
    });
    const started = await call(a, "POST", `/workflows/${created.id}:trigger`, { triggerType: "manual", isBlocking: true });
    expect(started.body.status).toBe("success");
    expect(sent()).toEqual({ proto: "proto-value", other: "other" });
  }, 60_000);
});
