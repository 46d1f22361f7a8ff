/**
 * Modules in customCode (API.md §21.2) over the real server: lodash, dayjs and uuid by `require` and by leading
 * `import` statements, in `POST /nodes:run` and in a workflow run; an unavailable module's exact error; a script
 * that changes a module changes it for nobody else (the next step, the next run: §18.1); the load counts against
 * the script's own time limit.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, type TestService } from "../support/service";
import { executionPath, jsonClient, type Json, type Owner } from "../support/client";
import { manualTrigger } from "../support/workflows";
import { runSandboxed } from "../../shared/sandbox/session";

let service: TestService;
const { call, ownerWithWallet, createWorkflow } = jsonClient(() => service.url);
let alice: Owner;

beforeAll(async () => {
  service = await startService();
  alice = await ownerWithWallet("201");
});

afterAll(async () => {
  await service?.close();
});

const code = (id: string, source: string) => ({ id, name: id, type: "customCode", config: { source } });

/** POST /nodes:run of one customCode node: the answer's body. */
async function runCode(source: string): Promise<Json> {
  const res = await call(alice, "POST", "/nodes:run", { node: code("c", source), inputVariables: {} });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe("customCode modules over POST /nodes:run", () => {
  it("loads lodash by require and by import", async () => {
    expect(await runCode("const _ = require('lodash'); return _.chunk([1, 2, 3, 4, 5], 2)")).toMatchObject({
      success: true,
      output: { data: [[1, 2], [3, 4], [5]] },
    });
    const imported = await runCode(
      "// totals\nimport _ from 'lodash';\nimport { sumBy, groupBy as byKey } from \"lodash\"\nimport * as L from 'lodash'\n" +
        "return [_.uniq([1, 1, 2]), sumBy([{ n: 2 }, { n: 3 }], 'n'), Object.keys(byKey(['a', 'bb'], 'length')), L.VERSION]",
    );
    expect(imported).toMatchObject({ success: true, output: { data: [[1, 2], 5, ["1", "2"], "4.18.1"] } });
  });

  it("loads uuid by require and by import, its v4 from the host's random bytes", async () => {
    const required = await runCode("const { v4, validate } = require('uuid'); const id = v4(); return [id, validate(id)]");
    expect(required).toMatchObject({ success: true, output: { data: [expect.stringMatching(UUID_V4), true] } });
    const imported = await runCode("import { v4 } from 'uuid'\nimport uuid, { NIL } from 'uuid'\nreturn [v4(), v4(), NIL, typeof uuid.v5]");
    const [a, b, nil, v5] = imported.output.data as string[];
    expect([a, b]).toEqual([expect.stringMatching(UUID_V4), expect.stringMatching(UUID_V4)]);
    expect(a).not.toBe(b);
    expect([nil, v5]).toEqual(["00000000-0000-0000-0000-000000000000", "function"]);
    // The random source is the module's, not the script's.
    expect(await runCode("require('uuid'); return typeof crypto")).toMatchObject({ output: { data: "undefined" } });
  });

  it("loads dayjs by require and by import", async () => {
    expect(await runCode("const dayjs = require('dayjs'); return dayjs('2024-02-28').add(1, 'day').format('YYYY-MM-DD')")).toMatchObject({
      success: true,
      output: { data: "2024-02-29" },
    });
    expect(await runCode("import dayjs from 'dayjs'\nreturn dayjs(0).toISOString()")).toMatchObject({
      success: true,
      output: { data: "1970-01-01T00:00:00.000Z" },
    });
  });

  it("fails a script that loads any other module with SANDBOX_ERROR and the exact message", async () => {
    const message = (name: string) => `module '${name}' is not available (available: dayjs, lodash, uuid)`;
    expect(await runCode("const fs = require('fs'); return 1")).toMatchObject({
      success: false,
      errorCode: "SANDBOX_ERROR",
      error: message("fs"),
    });
    expect(await runCode("import axios from 'axios'\nreturn 1")).toMatchObject({ errorCode: "SANDBOX_ERROR", error: message("axios") });
    expect(await runCode("import { join } from 'node:path'; return 1")).toMatchObject({ error: message("node:path") });
    expect(await runCode("return require('lodash/fp')")).toMatchObject({ error: message("lodash/fp") });
  });
});

describe("customCode modules in a workflow run", () => {
  it("gives each step its own module: a step that changes lodash changes nothing for the next step or run", async () => {
    const workflow = await createWorkflow(alice, {
      trigger: manualTrigger({ items: [1, 2, 3] }),
      nodes: [
        code("mutate", "import _ from 'lodash'\n_.map = () => 'changed'; Array.prototype.flat = null; return _.map([1], (x) => x)"),
        code("use", "const _ = require('lodash'); return [_.map(start.data.items, (x) => x * 2), typeof [].flat]"),
      ],
      edges: [
        { id: "e1", source: "t", target: "mutate" },
        { id: "e2", source: "mutate", target: "use" },
      ],
    });
    for (let run = 0; run < 2; run++) {
      const res = await call(alice, "POST", `/workflows/${workflow.id}:trigger`, { triggerType: "manual", isBlocking: true });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.status).toBe("success");
      const execution = await call(alice, "GET", executionPath(workflow.id, res.body.executionId));
      const steps = Object.fromEntries((execution.body.steps as Json[]).map((s) => [s.id, s]));
      expect(steps.mutate!.output).toEqual({ data: "changed" });
      expect(steps.use!.output).toEqual({ data: [[2, 4, 6], "function"] });
    }
  });
});

describe("the cost of a module", () => {
  it("is paid within the script's own time limit", async () => {
    const r = await runSandboxed({ kind: "function-body", source: "require('lodash'); return 1", timeLimitMs: 1 });
    expect(r).toMatchObject({ ok: false, errorCode: "SANDBOX_TIMEOUT", error: "script exceeded time limit of 1 ms" });
    expect(await runSandboxed({ kind: "function-body", source: "require('lodash'); return 1" })).toMatchObject({ ok: true, value: 1 });
  });
});
