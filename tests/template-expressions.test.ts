/**
 * API.md §17.6: a branch or filter expression written as one template around JavaScript, `{{ E }}` where `E` is
 * not a path, is evaluated as `E` (the §8.6 globals, and for filter `value` and `index`); a `{{ path }}`
 * expression, and text whose templates are all paths, keep §8.6's substitution; a filter function body is left
 * as written. Create, simulate and estimateFees accept such expressions (over a real server).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useTestRuntime } from "./support/runtime";
import { startTestServer, type TestServer } from "./support/server";
import { jsonClient } from "./support/client";
import { createServiceApp } from "../shared/service/app";
import { templateExpression } from "../shared/templates";
import { code, edge, run, stepOf, type Body } from "./engine/engine-support";

let server: TestServer;
const { call, ownerWithWallet } = jsonClient(() => server.url);

beforeAll(async () => {
  await useTestRuntime({ RATE_LIMIT_BURST: "100000", RATE_LIMIT_RPS: "10000" });
  server = await startTestServer(createServiceApp());
});
afterAll(() => server?.close());

/** fetch (customCode) → branch on `expression` → `yes` or `no`. */
const branchBody = (expression: string): Body => ({
  nodes: [
    code("fetch", "return { price: 2500, label: 'hi' }"),
    {
      id: "b",
      name: "b",
      type: "branch",
      config: {
        conditions: [
          { id: "c1", expression },
          { id: "c2", expression: "" },
        ],
      },
    },
    code("yes", "return 'yes'"),
    code("no", "return 'no'"),
  ],
  edges: [edge("trig", "fetch"), edge("fetch", "b"), edge("b.c1", "yes"), edge("b.c2", "no")],
});

const chosen = async (expression: string) => {
  const result = await run(branchBody(expression));
  const step = stepOf(result.steps, "b")!;
  expect(step.success, step.error).toBe(true);
  return (step.output as { data: { conditionId: string } }).data.conditionId;
};

const filtered = async (expression: string) => {
  const result = await run({
    nodes: [{ id: "f", name: "f", type: "filter", config: { inputVariable: "{{trigger1.data.items}}", expression } }],
  });
  const step = stepOf(result.steps, "f")!;
  expect(step.success, step.error).toBe(true);
  return (step.output as { data: unknown[] }).data;
};

describe("templateExpression: which texts are one template around JavaScript", () => {
  it("takes E out of {{ E }} (spaces around the whole allowed) and leaves paths and path-only texts alone", () => {
    expect(templateExpression("{{ fetch.data.price > 2000 }}")).toBe(" fetch.data.price > 2000 ");
    expect(templateExpression("  {{a&&b}}\n")).toBe("a&&b");
    expect(templateExpression("{{ ({ a: { b: 1 } }).a.b === 1 }}")).toBe(" ({ a: { b: 1 } }).a.b === 1 ");
    expect(templateExpression("{{ fetch.data.ok }}")).toBeNull();
    expect(templateExpression("{{ a }} + {{ b }}")).toBeNull();
    expect(templateExpression("fetch.data.price > {{ limit }}")).toBeNull();
    expect(templateExpression("value > 1")).toBeNull();
    expect(templateExpression("{{ a > 1 }} && b")).toBeNull();
  });
});

describe("branch expressions written as one template (§17.6)", () => {
  it("{{ E }} is evaluated as the JavaScript expression E with the node outputs as globals", async () => {
    expect(await chosen("{{ fetch.data.price > 2000 && trigger1.data.greeting === 'hi' }}")).toBe("b.c1");
    expect(await chosen("{{ fetch.data.price > 3000 }}")).toBe("b.c2");
    expect(await chosen("  {{ fetch.data.label.length === 2 }}  ")).toBe("b.c1");
  });

  it("path templates inside E are still substituted as text", async () => {
    expect(await chosen("{{ {{fetch.data.price}} === 2500 }}")).toBe("b.c1");
  });

  it("a {{ path }} expression keeps its old meaning: the value substituted as text, then evaluated", async () => {
    const result = await run({
      ...branchBody("{{ flag.ok }}"),
      inputVariables: { flag: { ok: true }, cmp: "1 < 2" },
    });
    expect(stepOf(result.steps, "b")!.output).toEqual({ data: { conditionId: "b.c1" } });
    // The value is text: `1 < 2` substituted, then evaluated as JavaScript (what §8.6 always did).
    const text = await run({ ...branchBody("{{cmp}}"), inputVariables: { cmp: "1 > 2" } });
    expect(stepOf(text.steps, "b")!.output).toEqual({ data: { conditionId: "b.c2" } });
    expect(stepOf(text.steps, "b")!.inputs).toEqual(["cmp"]);
    // Several path templates: substituted as before (`2500 > 2000`).
    expect(await chosen("{{fetch.data.price}} > {{ fetch.data.price }} - 1")).toBe("b.c1");
  });

  it("a failing E fails the step as any expression does (SANDBOX_ERROR)", async () => {
    const result = await run(branchBody("{{ fetch.data.missing.deeper }}"));
    // `fetch.data.missing.deeper` is a path: an unresolved template, as before.
    expect(stepOf(result.steps, "b")).toMatchObject({ success: false, errorCode: "TEMPLATE_UNRESOLVED" });
    const thrown = await run(branchBody("{{ fetch.data.missing.deeper > 1 }}"));
    expect(stepOf(thrown.steps, "b")).toMatchObject({ success: false, errorCode: "SANDBOX_ERROR" });
  });
});

describe("filter expressions written as one template (§17.6)", () => {
  it("{{ E }} is evaluated per element with value and index", async () => {
    expect(await filtered("{{ value > 1 && index < 2 }}")).toEqual([2]);
    expect(await filtered("{{ value % 2 === 1 && trigger1.data.greeting === 'hi' }}")).toEqual([1, 3]);
  });

  it("a {{ path }} expression and a function body keep their old meaning", async () => {
    const result = await run({
      nodes: [{ id: "f", name: "f", type: "filter", config: { inputVariable: "{{trigger1.data.items}}", expression: "{{ keep }}" } }],
      inputVariables: { keep: "value !== 2" },
    });
    expect(stepOf(result.steps, "f")!.output).toEqual({ data: [1, 3] });
    // `{{ … }}` around statements is two blocks of a function body: valid JavaScript before, unchanged now.
    expect(await filtered("{{ if (value === 1) return false; }} return true")).toEqual([2, 3]);
    expect(await filtered("{{ return value >= 2 }}")).toEqual([2, 3]);
  });
});

describe("create, simulate and estimateFees accept these expressions", () => {
  it("a workflow with {{ E }} branch and filter expressions is created, simulated and priced", async () => {
    const alice = await ownerWithWallet();
    const definition = {
      trigger: { id: "t", name: "start", type: "manual", config: { data: { items: [1, 2, 3], ok: true } } },
      nodes: [
        code("fetch", "return { price: 2500 }"),
        {
          id: "b",
          name: "b",
          type: "branch",
          config: { conditions: [{ id: "c1", expression: "{{ fetch.data.price > 2000 && start.data.ok }}" }] },
        },
        {
          id: "f",
          name: "f",
          type: "filter",
          config: { inputVariable: "{{start.data.items}}", expression: "{{ value > 1 }}" },
        },
      ],
      edges: [edge("t", "fetch"), edge("fetch", "b"), edge("b.c1", "f")],
    };
    const created = await call(alice, "POST", "/workflows", { smartWalletAddress: alice.wallet, ...definition });
    expect(created.status, JSON.stringify(created.body)).toBe(201);

    const simulated = await call(alice, "POST", "/workflows:simulate", {
      ...definition,
      inputVariables: { settings: { runner: alice.wallet } },
    });
    expect(simulated.status, JSON.stringify(simulated.body)).toBe(200);
    expect(simulated.body.status).toBe("success");
    const steps = simulated.body.steps as { id: string; output: unknown }[];
    expect(steps.find((s) => s.id === "b")?.output).toEqual({ data: { conditionId: "b.c1" } });
    expect(steps.find((s) => s.id === "f")?.output).toEqual({ data: [2, 3] });

    const fees = await call(alice, "POST", "/workflows:estimateFees", {
      ...definition,
      runner: alice.wallet,
      createdAt: Date.now(),
      expireAt: Date.now() + 86_400_000,
      maxExecution: 10,
    });
    expect(fees.status, JSON.stringify(fees.body)).toBe(200);
  });
});
