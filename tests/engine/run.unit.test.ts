/**
 * The engine's graph and record (API.md §8.5, §8.6, §10.1-§10.3): concurrency of independent nodes, failure
 * stopping only dependents, untaken branch paths skipped and absent, joins, step order, variables and
 * templates, secrets referenced-only and redacted everywhere, output and log limits, stop and deadline.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useConfigRuntime } from "../support/runtime";
import { LOG_TRUNCATED_MARKER } from "../../shared/sandbox/log-marker";
import { barrier, code, edge, ids, json, manualTrigger, run, startServer, stepOf, WALLET, type Body } from "./engine-support";
import type { Step } from "../../shared/engine/schemas";

let server: Awaited<ReturnType<typeof startServer>>;

beforeAll(async () => {
  useConfigRuntime({ MAX_STEP_OUTPUT_BYTES: "2048", MAX_STEP_LOG_BYTES: "256" });
  server = await startServer({
    "/meet": barrier(2),
    "/echo": (req, res, body) => json(res, 200, { url: req.url, body, auth: req.headers.authorization ?? null }),
  });
});
afterAll(() => server.close());

describe("graph", () => {
  it("runs independent nodes concurrently: two requests that each wait for the other both succeed", async () => {
    const rest = (id: string) => ({ id, name: id, type: "restApi", config: { url: `${server.origin}/meet`, method: "GET" } });
    const result = await run({ nodes: [rest("a"), rest("b")], edges: [edge("trig", "a"), edge("trig", "b")] });
    expect(result.status).toBe("success");
    expect(result.steps.slice(1).map((s) => [s.id, (s.output.data as { status: number }).status])).toEqual([
      ["a", 200],
      ["b", 200],
    ]);
  });

  it("a failed node stops only what depends on it; the error counts and names the failed steps", async () => {
    const body: Body = {
      nodes: [code("A", "throw new Error('boom')"), code("B", "return 1"), code("C", "return 2"), code("D", "return C.data + 1")],
      edges: [edge("trig", "A"), edge("A", "B"), edge("trig", "C"), edge("C", "D")],
    };
    const result = await run(body);
    expect(result.status).toBe("failed");
    expect(result.error).toBe("1 of 3 steps failed: A");
    expect(ids(result.steps)).toEqual(["trig", "A", "C", "D"]);
    expect(stepOf(result.steps, "A")).toMatchObject({ success: false, errorCode: "SANDBOX_ERROR", error: "boom", output: { data: null } });
    expect(stepOf(result.steps, "D")!.output).toEqual({ data: 3 });
  });

  it("a node with two sources where one failed is skipped, and so is what depends on it", async () => {
    const result = await run({
      nodes: [code("bad", "throw new Error('no')"), code("good", "return 1"), code("join", "return 'ran'"), code("after", "return 'ran'")],
      edges: [edge("trig", "bad"), edge("trig", "good"), edge("bad", "join"), edge("good", "join"), edge("join", "after")],
    });
    expect(ids(result.steps)).toEqual(["trig", "bad", "good"]);
    expect(result.error).toBe("1 of 2 steps failed: bad");
  });

  const branchBody = (expression: string, withElse: boolean): Body => ({
    nodes: [
      {
        id: "br",
        name: "br",
        type: "branch",
        config: { conditions: [{ id: "yes", expression }, ...(withElse ? [{ id: "no", expression: "" }] : [])] },
      },
      code("onYes", "return 'yes'"),
      ...(withElse ? [code("onNo", "return 'no'")] : []),
      code("join", withElse ? "return [typeof onYes, typeof onNo]" : "return 1"),
    ],
    edges: [
      edge("trig", "br"),
      edge("br.yes", "onYes"),
      ...(withElse ? [edge("br.no", "onNo")] : []),
      edge("onYes", "join"),
      ...(withElse ? [edge("onNo", "join")] : []),
    ],
  });

  it("runs the chosen branch path; the untaken path is skipped and absent; a join after both still runs", async () => {
    const taken = await run(branchBody("trigger1.data.greeting === 'hi'", true));
    expect(taken.status).toBe("success");
    expect(ids(taken.steps)).toEqual(["trig", "br", "onYes", "join"]);
    expect(stepOf(taken.steps, "br")!.output).toEqual({ data: { conditionId: "br.yes" } });
    expect(stepOf(taken.steps, "join")!.output).toEqual({ data: ["object", "undefined"] });

    const other = await run(branchBody("'{{trigger1.data.greeting}}' === 'bye'", true));
    expect(ids(other.steps)).toEqual(["trig", "br", "onNo", "join"]);
    expect(stepOf(other.steps, "br")!.output).toEqual({ data: { conditionId: "br.no" } });
  });

  it("a branch where nothing matches and there is no else succeeds with conditionId null and runs nothing after it", async () => {
    const result = await run(branchBody("1 === 2", false));
    expect(result.status).toBe("success");
    expect(ids(result.steps)).toEqual(["trig", "br"]);
    expect(stepOf(result.steps, "br")!.output).toEqual({ data: { conditionId: null } });
  });

  it("records the trigger step first as given, then node steps in start order with config as stored", async () => {
    const trigger = { ...manualTrigger, config: { data: { x: 1 }, headers: { h: "v" } } };
    const result = await run({ trigger, nodes: [code("one", "return '{{trigger1.data.greeting}}'"), code("two", "return one.data")] });
    const [first, one, two] = result.steps as [Step, Step, Step];
    expect(first).toEqual({
      id: "trig",
      type: "manual",
      name: "trigger1",
      success: true,
      config: { data: { x: 1 }, headers: { h: "v" }, lang: "json" },
      output: { data: { items: [1, 2, 3], greeting: "hi" }, headers: {}, pathParams: {} },
      startAt: first.startAt,
      endAt: first.startAt,
    });
    expect(one.config).toEqual({ lang: "javascript", source: "return '{{trigger1.data.greeting}}'" });
    expect(one.output).toEqual({ data: "hi" });
    expect(one.inputs).toEqual(["trigger1.data.greeting"]);
    expect(two.output).toEqual({ data: "hi" });
    expect(one.startAt).toBeLessThanOrEqual(two.startAt);
    expect(two.startAt).toBeGreaterThanOrEqual(one.endAt);
    expect(result.endAt).toBeGreaterThanOrEqual(two.endAt);
    expect(result.cogs).toEqual([]);
  });

  it("calls onStep as each step finishes, the trigger first, with the same records as the result", async () => {
    const seen: Step[] = [];
    const result = await run({ nodes: [code("a", "return 1"), code("b", "return 2")] }, { onStep: (s) => void seen.push(s) });
    expect(seen.map((s) => s.id)).toEqual(["trig", "a", "b"]);
    expect(seen).toEqual(result.steps);
  });

  it("marks onStep's last step final: none is in flight or still to be decided after it", async () => {
    const finals: [string, boolean][] = [];
    const onStep = (step: Step, { final }: { final: boolean }) => void finals.push([step.id, final]);
    await run({ nodes: [code("a", "return 1"), code("b", "return 2")] }, { onStep });
    expect(finals).toEqual([
      ["trig", false],
      ["a", false],
      ["b", true],
    ]);
    finals.length = 0;
    const rest = (id: string) => ({ id, name: id, type: "restApi", config: { url: `${server.origin}/meet`, method: "GET" } });
    await run({ nodes: [rest("x"), rest("y")], edges: [edge("trig", "x"), edge("trig", "y")] }, { onStep });
    expect(finals.map(([, final]) => final)).toEqual([false, false, true]);
  });
});

describe("variables and templates", () => {
  it("gives every root of §8.6: trigger with input, ancestors, inputVariables with triggerInput merged and settings, context, date", async () => {
    const before = Date.now();
    const result = await run(
      {
        inputVariables: { limit: 5, mode: "old", settings: { runner: WALLET, chainId: 31337, note: "kept" } },
        nodes: [
          code("first", "return 41"),
          code(
            "probe",
            "return { t: trigger1.data.greeting, input: trigger1.input.data, prev: first.data + 1, limit, mode, settings, ctx: context, date: [typeof date.now, date.nowIso === date.now_iso, new Date(date.now).toISOString() === date.nowIso, date.now] }",
          ),
        ],
      },
      { triggerInput: { mode: "new", extra: true } },
    );
    const data = stepOf(result.steps, "probe")!.output.data as Record<string, unknown> & { date: [string, boolean, boolean, number] };
    expect(data).toMatchObject({
      t: "hi",
      input: { greeting: "hi" },
      prev: 42,
      limit: 5,
      mode: "new",
      settings: { runner: WALLET, chainId: 31337, note: "kept" },
      ctx: {
        workflowId: "01JWORKFLOW0000000000000000",
        executionId: "01JEXECUTION000000000000000",
        executionIndex: 0,
        smartWalletAddress: WALLET,
        chainId: 31337,
      },
    });
    expect(data.date.slice(0, 3)).toEqual(["number", true, true]);
    expect(data.date[3]).toBeGreaterThanOrEqual(before);
  });

  it("renders templates into configs, records the resolved paths (never values) in inputs", async () => {
    const result = await run(
      {
        nodes: [
          code("first", "return { id: 7, tags: ['a', 'b'] }"),
          {
            id: "call",
            name: "call",
            type: "restApi",
            config: {
              url: `${server.origin}/echo?id={{first.data.id}}`,
              method: "POST",
              body: '{"tags":{{first.data.tags}},"n":{{ limit }}}',
              headers: { authorization: "Bearer {{secrets.TOKEN}}" },
            },
          },
        ],
        inputVariables: { limit: 1.5e21 },
      },
      { secrets: async () => ({ TOKEN: "tok-123456" }) },
    );
    const call = stepOf(result.steps, "call")!;
    expect(call.success).toBe(true);
    expect(call.inputs).toEqual(["first.data.id", "secrets.TOKEN", "first.data.tags", "limit"]);
    expect((call.output.data as { data: unknown }).data).toEqual({
      url: "/echo?id=7",
      body: '{"tags":["a","b"],"n":1500000000000000000000}',
      auth: "Bearer ***",
    });
    expect(call.config).toMatchObject({ url: `${server.origin}/echo?id={{first.data.id}}` });
  });

  it("fails a step TEMPLATE_UNRESOLVED naming the path, and the run failed", async () => {
    const result = await run({
      nodes: [
        {
          id: "call",
          name: "call",
          type: "restApi",
          config: { url: `${server.origin}/echo?x={{trigger1.data.missing.deep}}`, method: "GET" },
        },
      ],
    });
    expect(result.status).toBe("failed");
    expect(stepOf(result.steps, "call")).toMatchObject({
      success: false,
      errorCode: "TEMPLATE_UNRESOLVED",
      error: "unresolved template variable: trigger1.data.missing.deep",
      output: { data: null },
    });
    expect(server.seen.some((s) => s.url.startsWith("/echo?x="))).toBe(false);
  });
});

describe("secrets", () => {
  const SECRET = "sk-live-0123456789abcdef";

  it("resolves only the referenced names, once, and redacts them from output, log and error", async () => {
    const calls: string[][] = [];
    const result = await run(
      {
        nodes: [
          code(
            "leak",
            "console.log('key is', secrets.API_KEY); return { key: apContext.configVars.API_KEY, nested: ['x' + secrets.API_KEY + 'y'], short: secrets.PIN, inWord: 'a' + secrets.PIN + 'b' }",
          ),
          code("fail", "throw new Error('bad key {{secrets.API_KEY}}')"),
        ],
        edges: [edge("trig", "leak"), edge("trig", "fail")],
      },
      {
        secrets: async (names) => {
          calls.push(names);
          return { API_KEY: SECRET, PIN: "12" };
        },
      },
    );
    expect(calls).toHaveLength(1);
    expect([...calls[0]!].sort()).toEqual(["API_KEY", "PIN"]);
    const leak = stepOf(result.steps, "leak")!;
    expect(leak.output).toEqual({ data: { key: "***", nested: ["x***y"], short: "***", inWord: "a12b" } });
    expect(leak.log).toBe("key is ***");
    const fail = stepOf(result.steps, "fail")!;
    expect(fail.error).toBe("bad key ***");
    expect(fail.inputs).toEqual(["secrets.API_KEY"]);
    expect(JSON.stringify(result)).not.toContain(SECRET);
  });

  it("asks for no secret the definition does not name", async () => {
    const calls: string[][] = [];
    await run({ nodes: [code("a", "return 1")] }, { secrets: async (names) => (calls.push(names), {}) });
    expect(calls).toEqual([[]]);
  });

  it("fails TEMPLATE_UNRESOLVED for a missing secret", async () => {
    const result = await run({ nodes: [code("a", "return '{{secrets.NOPE}}'")] });
    expect(stepOf(result.steps, "a")).toMatchObject({
      errorCode: "TEMPLATE_UNRESOLVED",
      error: "unresolved template variable: secrets.NOPE",
    });
  });

  it("redacts the beginning of a secret left at the end of a truncated log", async () => {
    // The log limit is 256 bytes: 236 bytes of padding and a 40-byte secret leave part of it before the marker.
    const secret = "S".repeat(4) + "0123456789abcdefghijklmnopqrstuvwxyzAB".slice(0, 36);
    const result = await run(
      { nodes: [code("a", "console.log('p'.repeat(236) + secrets.LONG); return 1")] },
      { secrets: async () => ({ LONG: secret }) },
    );
    const log = stepOf(result.steps, "a")!.log!;
    expect(log.endsWith(`***${LOG_TRUNCATED_MARKER}`)).toBe(true);
    expect(log).not.toContain("SSSS");
    expect(Buffer.byteLength(log)).toBeLessThanOrEqual(256);
  });
});

describe("limits", () => {
  it("records an output over max_step_output_bytes as truncated while later nodes see the full value", async () => {
    const result = await run({ nodes: [code("big", "return 'x'.repeat(5000)"), code("len", "return big.data.length")] });
    expect(stepOf(result.steps, "big")!.output).toEqual({ data: null, truncated: true, originalSize: 5011 });
    expect(stepOf(result.steps, "len")!.output).toEqual({ data: 5000 });
  });

  it("keeps at most max_step_log_bytes of log, ending with the marker", async () => {
    const result = await run({ nodes: [code("noisy", "for (let i = 0; i < 100; i++) console.log('line ' + i); return 1")] });
    const log = stepOf(result.steps, "noisy")!.log!;
    expect(Buffer.byteLength(log)).toBeLessThanOrEqual(256);
    expect(log.startsWith("line 0\nline 1")).toBe(true);
    expect(log.endsWith(LOG_TRUNCATED_MARKER)).toBe(true);
  });
});

describe("stopping", () => {
  it("shouldStop ends the run error with stopReason; nodes already finished keep their steps", async () => {
    let checks = 0;
    const result = await run(
      { nodes: [code("a", "return 1"), code("b", "return 2"), code("c", "return 3")] },
      { shouldStop: async () => ++checks > 1, stopReason: "workflow was deleted" },
    );
    expect(result).toMatchObject({ status: "error", error: "workflow was deleted" });
    expect(ids(result.steps)).toEqual(["trig", "a"]);
  });

  it("a passed deadline starts no node and ends the run error with deadlineReason", async () => {
    const result = await run({ nodes: [code("a", "return 1")] }, { deadline: Date.now() - 1, deadlineReason: "execution timed out" });
    expect(result).toMatchObject({ status: "error", error: "execution timed out" });
    expect(ids(result.steps)).toEqual(["trig"]);
  });

  it("an internal failure ends the run error with a generic message and no stack", async () => {
    const result = await run(
      { nodes: [code("a", "return 1")] },
      {
        onStep: (step) => {
          if (step.id === "a") throw new Error("store exploded at /srv/secret/path.ts:12");
        },
      },
    );
    expect(result.status).toBe("error");
    expect(result.error).toBe("internal error: the engine could not run the workflow");
    expect(JSON.stringify(result)).not.toContain("exploded");
  });
});
