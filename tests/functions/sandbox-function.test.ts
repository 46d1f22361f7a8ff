/**
 * The sandbox function (functions/sandbox.ts) as Lambda runs it (tests/support/lambda-host.ts): it evaluates,
 * enforces the time limit itself, keeps nothing of one evaluation for the next, and holds no credential; and the
 * functions that run scripts reach it through the sandbox port (shared/sandbox/remote.ts) with signed Invoke
 * calls. Prints the added latency per evaluation (docs/isolation.md, "Sandbox function on AWS").
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LambdaHost } from "../support/lambda-host";
import { startLambdaInvokeStub, type LambdaInvokeStub } from "../support/lambda-invoke-stub";
import { bundleLambda } from "../../bench/lambda-bundle";
import { RemoteSandbox } from "../../shared/sandbox/remote";
import { invokeLambda } from "../../shared/sandbox/lambda-invoke";
import { SandboxSession } from "../../shared/sandbox/session";
import type { Answer, Evaluation } from "../../shared/sandbox/quickjs";

/** What Lambda puts in every function's environment: the role's credentials among it. */
const LAMBDA_ENV = {
  AWS_REGION: "us-east-1",
  AWS_ACCESS_KEY_ID: "ASIAHARNESSKEY",
  AWS_SECRET_ACCESS_KEY: "harness-secret-access-key",
  AWS_SESSION_TOKEN: "harness-session-token",
};

const expression = (source: string, timeLimitMs = 5_000): { evaluation: Evaluation } => ({
  evaluation: {
    op: "run",
    kind: "expression",
    source,
    globalsJson: "{}",
    limits: { timeLimitMs, memoryLimitMib: 64, logLimitBytes: 65_536 },
  },
});
type Reply = { answer: Answer; elapsedMs: number };

let sandbox: LambdaHost;
let coldMs = 0;
beforeAll(async () => {
  sandbox = await LambdaHost.start("sandbox", LAMBDA_ENV);
  const started = performance.now();
  await sandbox.invoke(expression("1 + 1"));
  coldMs = performance.now() - started;
}, 60_000);
afterAll(() => sandbox?.close());

const invoke = async (event: unknown) => (await sandbox.invoke<Reply>(event)).result;

describe("the sandbox function", () => {
  it("evaluates a one-liner, warm, in a few ms (the added latency per evaluation, printed)", async () => {
    const p50 = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;
    const p90 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length * 0.9)]!;
    const round: number[] = [];
    const inside: number[] = [];
    const harness: number[] = [];
    for (let i = 0; i < 200; i++) {
      const started = performance.now();
      const reply = await invoke(expression(`${i} + 1`));
      round.push(performance.now() - started);
      inside.push(reply.elapsedMs);
      expect(reply.answer).toEqual({ ok: true, raw: String(i + 1), log: "" });
    }
    // The harness's own round trip (thaw, IPC, freeze): an event the function refuses before any evaluation.
    for (let i = 0; i < 200; i++) {
      const started = performance.now();
      await invoke({});
      harness.push(performance.now() - started);
    }
    console.log(
      `sandbox function: cold first invocation ${coldMs.toFixed(0)} ms; warm one-liner p50 ${p50(round).toFixed(2)} ms ` +
        `(p90 ${p90(round).toFixed(2)}), of which evaluating ${p50(inside).toFixed(2)} ms and the harness's round trip ${p50(harness).toFixed(2)} ms`,
    );
    expect(p50(round)).toBeLessThan(10);
  }, 60_000);

  it("enforces the time limit itself, and the next evaluation runs in a fresh instance", async () => {
    const started = performance.now();
    const reply = await invoke(expression("(() => { while (true) {} })()", 300));
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(reply.answer).toMatchObject({ ok: false, errorCode: "SANDBOX_TIMEOUT", error: "script exceeded time limit of 300 ms" });
    expect((await invoke(expression("2 * 21"))).answer).toMatchObject({ ok: true, raw: "42" });
  });

  it("keeps nothing of one evaluation for the next (API.md §18.1)", async () => {
    await invoke(expression("(globalThis.leak = 'owner A secret', Object.prototype.polluted = 1)"));
    const next = await invoke(expression("[typeof leak, typeof ({}).polluted]"));
    expect(next.answer).toMatchObject({ ok: true, raw: '["undefined","undefined"]' });
  });

  it("answers SANDBOX_ERROR to an event that is not an evaluation", async () => {
    expect((await invoke({ evaluation: { op: "eval", source: "1" } })).answer).toMatchObject({ ok: false, errorCode: "SANDBOX_ERROR" });
  });

  it("holds no credential: scripts see no host, and the bundle drops the role's credentials from its environment at load", async () => {
    // `require` is the loader of the three modules of API.md §21.2, nothing of the host's.
    const probe = await invoke(
      expression(
        "[typeof process, typeof fetch, Object.keys(globalThis).join(), (() => { try { require('fs') } catch (e) { return e.message } })()]",
      ),
    );
    expect(probe.answer).toMatchObject({
      ok: true,
      raw: JSON.stringify(["undefined", "undefined", "", "module 'fs' is not available (available: dayjs, lodash, uuid)"]),
    });
    const dir = mkdtempSync(join(tmpdir(), "wa-sandbox-fn-"));
    try {
      const outfile = join(dir, "sandbox.mjs");
      await bundleLambda("functions/sandbox.ts", outfile);
      const script = `await import(${JSON.stringify(outfile)}); console.log(JSON.stringify(Object.keys(process.env).filter((k) => k.startsWith("AWS_"))))`;
      const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
        env: { PATH: process.env.PATH, ...LAMBDA_ENV },
        encoding: "utf8",
      });
      expect(JSON.parse(out.trim())).toEqual(["AWS_REGION"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe("the sandbox port on AWS", () => {
  let stub: LambdaInvokeStub;
  const saved = { ...process.env };
  beforeAll(async () => {
    stub = await startLambdaInvokeStub("sandbox", LAMBDA_ENV);
    Object.assign(process.env, LAMBDA_ENV, { AWS_ENDPOINT_URL_LAMBDA: stub.url });
  }, 60_000);
  afterAll(async () => {
    for (const name of [...Object.keys(LAMBDA_ENV), "AWS_ENDPOINT_URL_LAMBDA"]) delete process.env[name];
    Object.assign(process.env, saved);
    await stub?.close();
  });

  it("a session evaluates through signed Invoke calls, and the budget is charged the function's running time", async () => {
    const remote = new RemoteSandbox((payload, signal) => invokeLambda({ functionName: "sandbox", region: "us-east-1" }, payload, signal));
    const session = new SandboxSession("0xowner", { pool: remote, budgetMs: 30_000 });
    const result = await session.run({
      kind: "function-body",
      source: "return { sum: start.data.n + 1 }",
      globals: { start: { data: { n: 41 } } },
    });
    expect(result).toEqual({ ok: true, value: { sum: 42 }, log: "" });
    expect(session.usedMs).toBeLessThan(50);
    expect(stub.authorizations.at(-1)).toMatch(/^AWS4-HMAC-SHA256 Credential=ASIAHARNESSKEY\/\d{8}\/us-east-1\/lambda\/aws4_request, /);
    const timedOut = await session.run({ kind: "function-body", source: "while (true) {}", timeLimitMs: 200 });
    expect(timedOut).toMatchObject({ ok: false, errorCode: "SANDBOX_TIMEOUT" });
  }, 60_000);
});
