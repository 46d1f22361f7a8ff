/**
 * The JavaScript sandbox of customCode, branch and filter (API.md §8.4.6-§8.4.8, limits §4.1): values and their
 * JSON-safety, promises, the console log, the absence of any host, the deadline, the memory cap (with the
 * host's RSS measured), and that the same process keeps evaluating after every kind of failure.
 * Plain functions, no local stack needed.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { beforeAll, describe, expect, it } from "vitest";
import { LOG_TRUNCATED_MARKER } from "../../shared/sandbox/log-marker";
import { isFunctionBody } from "../../shared/sandbox/quickjs";
import { runBranch, runFilter, runSandboxed, type SandboxResult } from "../../shared/sandbox/session";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
const rssMib = () => process.memoryUsage().rss / 1_048_576;

const body = (source: string, extra: Partial<Parameters<typeof runSandboxed>[0]> = {}) =>
  runSandboxed({ kind: "function-body", source, ...extra });
const failure = (r: SandboxResult<unknown>) => (r.ok ? { ok: true, value: r.value } : { errorCode: r.errorCode, error: r.error });

/** A normal evaluation, run after each failure: the process still works. */
async function stillWorks() {
  expect(await body("return [1, 2, 3].map((x) => x * 2)")).toEqual({ ok: true, value: [2, 4, 6], log: "" });
}

/** Each of `sources` fails SANDBOX_MEMORY at the default 64 MiB while the host's RSS grows less than 3 × 64 MiB, and the process still works. */
async function expectMemoryCapped(sources: string[], extra: Partial<Parameters<typeof runSandboxed>[0]> = {}) {
  for (const source of sources) {
    gc();
    const before = rssMib();
    const r = await body(source, extra);
    const grown = rssMib() - before;
    expect({ source, ...failure(r) }).toEqual({ source, errorCode: "SANDBOX_MEMORY", error: "script exceeded memory limit of 64 MiB" });
    expect(grown).toBeLessThan(3 * 64);
    await stillWorks();
  }
  gc();
}

const globals = {
  settings: { runner: "0x0000000000000000000000000000000000000001", chainId: 31337 },
  trigger1: { data: { items: [1, 2, 3], name: "café" }, input: {} },
  fetch1: { data: { status: 200 } },
  secrets: { API_KEY: "sk-live-SECRET-VALUE" },
  context: { workflowId: "01J0000000000000000000000", executionIndex: 3 },
  date: { now: 1_700_000_000_000, nowIso: "2023-11-14T22:13:20.000Z" },
};

beforeAll(async () => {
  await stillWorks(); // compiles the module once, so that timings below are of warm evaluations
});

describe("customCode: values", () => {
  it("returns the value of a function body, with the §8.6 variables as globals", async () => {
    const r = await body(
      "return { sum: trigger1.data.items.reduce((a, b) => a + b, 0), name: trigger1.data.name, chain: settings.chainId, status: fetch1.data.status, n: context.executionIndex, t: date.now }",
      { globals },
    );
    expect(r).toEqual({ ok: true, value: { sum: 6, name: "café", chain: 31337, status: 200, n: 3, t: 1_700_000_000_000 }, log: "" });
  });

  it("makes the returned value JSON-safe as §8.4.6 says, nested", async () => {
    const r = await body(`return {
      u: undefined, nan: NaN, inf: Infinity, ninf: -Infinity, big: 2n ** 70n, f() {}, s: Symbol("x"),
      list: [undefined, NaN, () => 1, Symbol("y"), 12n, "ok"],
      deep: { a: [{ b: 1n, c: undefined, d: Infinity }] }, date: new Date(0), nul: null, t: true,
    }`);
    expect(r).toEqual({
      ok: true,
      value: {
        nan: null,
        inf: null,
        ninf: null,
        big: "1180591620717411303424",
        list: [null, null, null, null, "12", "ok"],
        deep: { a: [{ b: "1", d: null }] },
        date: "1970-01-01T00:00:00.000Z",
        nul: null,
        t: true,
      },
      log: "",
    });
    expect(await body("return undefined")).toMatchObject({ ok: true, value: null });
    expect(await body("")).toMatchObject({ ok: true, value: null });
    expect(await body("return () => 1")).toMatchObject({ ok: true, value: null });
    expect(await body("return Symbol('z')")).toMatchObject({ ok: true, value: null });
    expect(await body("return NaN")).toMatchObject({ ok: true, value: null });
    expect(await body("return 10n ** 30n")).toMatchObject({ ok: true, value: "1000000000000000000000000000000" });
    expect(await body("return 'text'")).toMatchObject({ ok: true, value: "text" });
  });

  it("awaits a returned promise, and allows top-level await", async () => {
    expect(await body("return Promise.resolve(41).then((x) => x + 1)")).toMatchObject({ ok: true, value: 42 });
    expect(
      await body("const a = await Promise.resolve(1); let n = a; for (let i = 0; i < 1000; i++) n += await i; return n"),
    ).toMatchObject({ ok: true, value: 499501 });
    expect(await body("return new Promise((resolve) => resolve({ done: true }))")).toMatchObject({ ok: true, value: { done: true } });
  });

  it("fails SANDBOX_ERROR with the message of a throw, a rejection or a syntax error", async () => {
    expect(failure(await body('throw new Error("boom")'))).toEqual({ errorCode: "SANDBOX_ERROR", error: "boom" });
    expect(failure(await body('await Promise.reject(new TypeError("nope"))'))).toEqual({ errorCode: "SANDBOX_ERROR", error: "nope" });
    expect(failure(await body('return Promise.reject(new Error("later"))'))).toEqual({ errorCode: "SANDBOX_ERROR", error: "later" });
    expect(failure(await body('throw "bare string"'))).toEqual({ errorCode: "SANDBOX_ERROR", error: "bare string" });
    expect(failure(await body("throw { code: 7 }"))).toEqual({ errorCode: "SANDBOX_ERROR", error: '{"code":7}' });
    expect(failure(await body("return missing.x"))).toEqual({ errorCode: "SANDBOX_ERROR", error: "'missing' is not defined" });
    const syntax = await body("return (");
    expect(syntax).toMatchObject({ ok: false, errorCode: "SANDBOX_ERROR" });
    expect(syntax.ok ? "" : syntax.error).toMatch(/unexpected token|expecting/);
    expect(failure(await body("const o = {}; o.o = o; return o"))).toEqual({ errorCode: "SANDBOX_ERROR", error: "circular reference" });
    await stillWorks();
  });

  it("fails SANDBOX_ERROR when the returned promise can never settle (there are no timers to settle it)", async () => {
    expect(failure(await body("await new Promise(() => {})"))).toEqual({
      errorCode: "SANDBOX_ERROR",
      error: "the returned promise never settles",
    });
    await stillWorks();
  });

  it("starts every evaluation from a fresh VM: nothing one script sets is seen by the next", async () => {
    expect(await body("globalThis.leak = 1; Object.prototype.polluted = 2; JSON.stringify = () => 'x'; return 1")).toMatchObject({
      ok: true,
      value: 1,
    });
    expect(await body("return [typeof leak, ({}).polluted === undefined, JSON.stringify([1])]")).toMatchObject({
      ok: true,
      value: ["undefined", true, "[1]"],
    });
  });

  it("keeps its own JSON: a script that replaces JSON.stringify still returns its value", async () => {
    expect(await body("JSON.stringify = () => '{bad'; JSON.parse = null; return { a: [1n] }")).toMatchObject({
      ok: true,
      value: { a: ["1"] },
    });
  });
});

describe("customCode: console", () => {
  it("captures console.log/info/warn/error into the log, one line per call", async () => {
    const r = await body(`
      console.log("hello", 1, true, null, undefined, { a: 1, b: [2n] }, [1, "x"]);
      console.info("info");
      console.warn(new TypeError("careful"));
      console.error(function named() {}, Symbol("s"), 5n);
      return "done"`);
    expect(r).toEqual({
      ok: true,
      value: "done",
      log: 'hello 1 true null undefined {"a":1,"b":["2"]} [1,"x"]\ninfo\nTypeError: careful\n[Function: named] Symbol(s) 5n',
    });
  });

  it("keeps the log of a failing script", async () => {
    expect(await body('console.log("before"); throw new Error("after")')).toEqual({
      ok: false,
      errorCode: "SANDBOX_ERROR",
      error: "after",
      log: "before",
    });
  });

  it("truncates the log at its byte limit with a final …[truncated], never splitting a character", async () => {
    const r = await body('for (let i = 0; i < 100000; i++) console.log("é€😀 line " + i); return "ran"', { logLimitBytes: 1000 });
    expect(r).toMatchObject({ ok: true, value: "ran" });
    const log = r.log;
    expect(log.endsWith(LOG_TRUNCATED_MARKER)).toBe(true);
    expect(Buffer.byteLength(log)).toBeLessThanOrEqual(1000);
    expect(Buffer.byteLength(log)).toBeGreaterThan(990);
    expect(log).not.toContain("\uFFFD");
    expect(log.startsWith("é€😀 line 0\né€😀 line 1\n")).toBe(true);
  });

  it("bounds the default log at 64 KiB even for one enormous line", async () => {
    const r = await body('console.log("x".repeat(10_000_000)); console.log("more"); return 1');
    expect(r).toMatchObject({ ok: true, value: 1 });
    expect(Buffer.byteLength(r.log)).toBeLessThanOrEqual(65_536);
    expect(r.log.endsWith(LOG_TRUNCATED_MARKER)).toBe(true);
  });
});

describe("customCode: no host", () => {
  it("has no import(), fetch, process, timers, module loading beyond §21.2's modules or Node/Web globals", async () => {
    const names = [
      "process",
      "fetch",
      "setTimeout",
      "setInterval",
      "setImmediate",
      "queueMicrotask",
      "module",
      "exports",
      "global",
      "Buffer",
      "std",
      "os",
      "performance",
      "XMLHttpRequest",
      "WebSocket",
      "importScripts",
      "WebAssembly",
      "Deno",
      "Bun",
    ];
    const r = await body(`return [${names.map((n) => `typeof ${n}`).join(", ")}]`);
    expect(r).toMatchObject({ ok: true, value: names.map(() => "undefined") });
    const noFs = { errorCode: "SANDBOX_ERROR", error: "module 'fs' is not available (available: dayjs, lodash, uuid)" };
    expect(failure(await body('return require("fs")'))).toEqual(noFs);
    expect(failure(await body('return await import("fs")'))).toEqual({ errorCode: "SANDBOX_ERROR", error: "could not load module 'fs'" });
    expect(failure(await body('return fetch("http://169.254.169.254/")'))).toEqual({
      errorCode: "SANDBOX_ERROR",
      error: "'fetch' is not defined",
    });
    expect(failure(await body("return process.env"))).toEqual({ errorCode: "SANDBOX_ERROR", error: "'process' is not defined" });
    expect(failure(await body("setTimeout(() => {}, 10)"))).toEqual({ errorCode: "SANDBOX_ERROR", error: "'setTimeout' is not defined" });
    expect(failure(await body('import fs from "fs"'))).toEqual(noFs);
  });

  it("puts nothing on globalThis but ECMAScript's built-ins, console, require and the variables", async () => {
    const builtins = [
      "Error",
      "EvalError",
      "RangeError",
      "ReferenceError",
      "SyntaxError",
      "TypeError",
      "URIError",
      "InternalError",
      "AggregateError",
      "Array",
      "Object",
      "Function",
      "Iterator",
      "parseInt",
      "parseFloat",
      "isNaN",
      "isFinite",
      "decodeURI",
      "decodeURIComponent",
      "encodeURI",
      "encodeURIComponent",
      "escape",
      "unescape",
      "Infinity",
      "NaN",
      "undefined",
      "eval",
      "Number",
      "Boolean",
      "String",
      "Math",
      "Reflect",
      "Symbol",
      "globalThis",
      "BigInt",
      "Date",
      "RegExp",
      "JSON",
      "Proxy",
      "Map",
      "Set",
      "WeakMap",
      "WeakSet",
      "ArrayBuffer",
      "SharedArrayBuffer",
      "Uint8ClampedArray",
      "Int8Array",
      "Uint8Array",
      "Int16Array",
      "Uint16Array",
      "Int32Array",
      "Uint32Array",
      "BigInt64Array",
      "BigUint64Array",
      "Float16Array",
      "Float32Array",
      "Float64Array",
      "DataView",
      "Promise",
      "WeakRef",
      "FinalizationRegistry",
    ];
    const r = await body("return Object.getOwnPropertyNames(globalThis).concat(Object.getOwnPropertySymbols(globalThis).map(String))", {
      globals,
    });
    expect(r.ok).toBe(true);
    const extra = (r.ok ? (r.value as string[]) : []).filter((n) => !builtins.includes(n) && n !== "Symbol(Symbol.toStringTag)");
    expect(extra.sort()).toEqual(["console", "require", ...Object.keys(globals)].sort());
    expect(await body("return Object.keys(console).sort()")).toMatchObject({ ok: true, value: ["error", "info", "log", "warn"] });
  });

  it("passes host values in as JSON data, never as host objects", async () => {
    const hostile = {
      when: new Date(0),
      fn: () => "host",
      map: new Map([["k", 1]]),
      big: 5n,
      nested: { u: undefined, arr: [undefined, () => 1] },
    };
    const r = await body("return [when, typeof fn, map, big, nested, Object.getPrototypeOf(nested) === Object.prototype]", {
      globals: { v: hostile, ...hostile },
    });
    expect(r).toMatchObject({ ok: true, value: ["1970-01-01T00:00:00.000Z", "undefined", {}, "5", { arr: [null, null] }, true] });
  });

  it("never puts a variable's value in its own error messages", async () => {
    const secret = globals.secrets.API_KEY;
    for (const source of [
      "while (true) {}",
      "let a = []; while (true) a.push(new Array(1e6).fill(1))",
      "return (",
      "return secrets.API_KEY.x.y",
      "await new Promise(() => {})",
    ]) {
      const r = await body(source, { globals, timeLimitMs: 100 });
      expect(r.ok).toBe(false);
      expect(JSON.stringify(r)).not.toContain(secret);
    }
  });
});

describe("limits", () => {
  it("stops an endless loop at the deadline with SANDBOX_TIMEOUT naming the limit, blocking the event loop no longer than that", async () => {
    let timerFiredAt = 0;
    const started = performance.now();
    setTimeout(() => (timerFiredAt = performance.now()), 0);
    const r = await body("while (true) {}", { timeLimitMs: 200 });
    const elapsed = performance.now() - started;
    expect(failure(r)).toEqual({ errorCode: "SANDBOX_TIMEOUT", error: "script exceeded time limit of 200 ms" });
    expect(elapsed).toBeGreaterThanOrEqual(200);
    expect(elapsed).toBeLessThan(200 + 150);
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(timerFiredAt - started).toBeLessThan(200 + 150);
    await stillWorks();
  }, 15_000);

  it("names the default limit, 5000 ms, in the timeout message", async () => {
    const started = performance.now();
    expect(failure(await body("for (;;) {}"))).toEqual({ errorCode: "SANDBOX_TIMEOUT", error: "script exceeded time limit of 5000 ms" });
    expect(performance.now() - started).toBeLessThan(5000 + 300);
  }, 15_000);

  it("cannot be caught, and covers awaiting (a microtask loop) and C built-ins (a catastrophic regex)", async () => {
    const cases = [
      "try { while (true) {} } catch (e) {} return 'escaped'",
      "for (;;) await null",
      "const p = () => Promise.resolve().then(p); await p()",
      "return /(a+)+b/.test('a'.repeat(40))",
      "return Array.from({ length: 3e6 }, (_, i) => (i * 7919) % 1000003).sort().length",
    ];
    for (const source of cases) {
      const started = performance.now();
      expect(failure(await body(source, { timeLimitMs: 150 }))).toEqual({
        errorCode: "SANDBOX_TIMEOUT",
        error: "script exceeded time limit of 150 ms",
      });
      expect(performance.now() - started).toBeLessThan(150 + 500); // stopped at its deadline (the margin covers a loaded machine)
    }
    await stillWorks();
  }, 15_000);

  it("stops memory bombs with SANDBOX_MEMORY while the host's RSS stays bounded, and the process keeps working", async () => {
    const bombs = [
      "let a = []; while (true) a.push(new Array(1e6).fill(1))",
      'let s = "x"; while (true) s = s.repeat(2)',
      'let s = "xy"; while (true) { s = s + s; s.indexOf("z") }', // concatenation, flattened
      "let b = []; while (true) b.push({ x: Math.random(), y: [1, 2, 3] })",
      "let a = []; try { while (true) a.push(new Array(1e6).fill(1)) } catch (e) { a = null; const b = []; while (true) b.push({ x: 1 }) }",
      "return new ArrayBuffer(2 ** 30).byteLength",
      "return new Uint8Array(100 * 1024 * 1024).length",
    ];
    await expectMemoryCapped(bombs);
  }, 60_000);

  it("holds the cap with the WebAssembly memory alone (QuickJS's own accounting off)", async () => {
    // the instance's memory is at most 16 MiB (the module's floor) + 64 MiB
    await expectMemoryCapped(
      [
        "let a = []; while (true) a.push(new Array(1e6).fill(1))",
        'let s = "x"; while (true) s = s.repeat(2)',
        "let b = []; while (true) b.push({ x: Math.random() })",
      ],
      { engineMemoryLimit: false },
    );
  }, 60_000);

  it("names the configured memory limit, and lets a script use memory below it", async () => {
    expect(failure(await body("let a = []; while (true) a.push(new Array(1e5).fill(1))", { memoryLimitMib: 8 }))).toEqual({
      errorCode: "SANDBOX_MEMORY",
      error: "script exceeded memory limit of 8 MiB",
    });
    expect(await body("const a = new Uint8Array(48 * 1024 * 1024); const s = 'x'.repeat(8e6); return a.length + s.length")).toMatchObject({
      ok: true,
      value: 48 * 1024 * 1024 + 8e6,
    });
  }, 30_000);

  it("fails a runaway recursion with SANDBOX_ERROR stack overflow, catchable inside, and keeps working", async () => {
    expect(failure(await body("function f(n) { return f(n + 1) + 1 } return f(0)"))).toEqual({
      errorCode: "SANDBOX_ERROR",
      error: "stack overflow",
    });
    const caught = await body("let d = 0; function f() { d++; f() } try { f() } catch (e) { return [d > 300, e.message] }");
    expect(caught).toMatchObject({ ok: true, value: [true, "stack overflow"] });
    // Deep structures that exhaust the host's stack inside a C built-in end the same way
    expect(failure(await body("let o = {}; for (let i = 0; i < 1e5; i++) o = { a: o }; return JSON.stringify(o).length"))).toEqual({
      errorCode: "SANDBOX_ERROR",
      error: "stack overflow",
    });
    expect(failure(await body("let o = {}; for (let i = 0; i < 1e5; i++) o = { a: o }; return o"))).toEqual({
      errorCode: "SANDBOX_ERROR",
      error: "stack overflow",
    });
    await stillWorks();
  });

  it("fails a plain throw while much memory is in use as SANDBOX_ERROR, not as the memory limit", async () => {
    expect(failure(await body('const a = new Uint8Array(56 * 1024 * 1024); throw new Error("after allocating")'))).toEqual({
      errorCode: "SANDBOX_ERROR",
      error: "after allocating",
    });
  });

  it("costs a few milliseconds per evaluation (a fresh WebAssembly instance each time)", async () => {
    const times: number[] = [];
    for (let i = 0; i < 60; i++) {
      const started = performance.now();
      await runSandboxed({ kind: "expression", source: "settings.chainId === 31337", globals });
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    const p50 = times[times.length >> 1] ?? Infinity;
    expect(p50).toBeLessThan(25);
  });
});

describe("expressions and branch", () => {
  it("evaluates one expression (a trailing comment is fine); a statement list is a syntax error", async () => {
    expect(await runSandboxed({ kind: "expression", source: "fetch1.data.status === 200 // ok", globals })).toMatchObject({
      ok: true,
      value: true,
    });
    expect(await runSandboxed({ kind: "expression", source: "{ a: 1 }", globals })).toMatchObject({ ok: true, value: { a: 1 } });
    expect(await runSandboxed({ kind: "expression", source: "a; b", globals })).toMatchObject({ ok: false, errorCode: "SANDBOX_ERROR" });
  });

  it("branch: the first expression whose value is the boolean true wins; truthy values do not count; later ones do not run", async () => {
    const r = await runBranch({
      expressions: ["fetch1.data.status > 500", "'true'", "1", "settings.chainId === 31337", "notDefined()"],
      globals,
    });
    expect(r).toEqual({ ok: true, value: 3, log: "" });
    expect(await runBranch({ expressions: ["false", "null", "[true]"], globals })).toEqual({ ok: true, value: null, log: "" });
  });

  it("branch: a throw or syntax error in a reached expression fails SANDBOX_ERROR; an endless one times out", async () => {
    expect(failure(await runBranch({ expressions: ["false", "nope.x"], globals }))).toEqual({
      errorCode: "SANDBOX_ERROR",
      error: "'nope' is not defined",
    });
    expect(await runBranch({ expressions: ["false", "(("], globals })).toMatchObject({ ok: false, errorCode: "SANDBOX_ERROR" });
    expect(failure(await runBranch({ expressions: ["(() => { while (true) {} })()"], globals, timeLimitMs: 100 }))).toEqual({
      errorCode: "SANDBOX_TIMEOUT",
      error: "script exceeded time limit of 100 ms",
    });
    await stillWorks();
  });
});

describe("filter", () => {
  const items = Array.from({ length: 10_000 }, (_, i) => ({ n: i, tags: i % 2 ? ["odd"] : ["even"] }));

  it("tells a function body (contains the keyword return) from an expression", () => {
    expect(isFunctionBody("return value > 1")).toBe(true);
    expect(isFunctionBody("if (value) { return true }")).toBe(true);
    expect(isFunctionBody("value.returned > 1")).toBe(false);
    expect(isFunctionBody("value > 1")).toBe(false);
  });

  it("evaluates one compiled predicate over 10,000 elements quickly, with value, index and the globals", async () => {
    const started = performance.now();
    const r = await runFilter({ source: "value.n % 3 === 0 && index < 9000 && settings.chainId === 31337", items, globals });
    const elapsed = performance.now() - started;
    expect(r.ok && r.value.length).toBe(3000);
    expect(r.ok && r.value[1]).toBe(items[3]); // the caller's own elements
    expect(elapsed).toBeLessThan(1000);

    const asBody = await runFilter({ source: 'if (value.tags[0] === "odd") return true; return globalThis.index === 0', items, globals });
    expect(asBody.ok && asBody.value.length).toBe(5001);
    expect(asBody.ok && asBody.value[0]).toBe(items[0]);
  });

  it("keeps only elements whose result is the boolean true, in order", async () => {
    const r = await runFilter({ source: "value", items: [true, 1, "true", null, { a: 1 }, true, false] });
    expect(r).toEqual({ ok: true, value: [true, true], log: "" });
    expect(await runFilter({ source: "true", items: [] })).toEqual({ ok: true, value: [], log: "" });
  });

  it("fails SANDBOX_ERROR on a throw, and SANDBOX_TIMEOUT when the whole pass exceeds the one deadline", async () => {
    expect(failure(await runFilter({ source: "value.n.x.y", items }))).toEqual({
      errorCode: "SANDBOX_ERROR",
      error: "cannot read property 'y' of undefined",
    });
    expect(
      failure(await runFilter({ source: "{ let t = 0; for (let i = 0; i < 1e5; i++) t += i; return t > 0 }", items, timeLimitMs: 200 })),
    ).toEqual({ errorCode: "SANDBOX_TIMEOUT", error: "script exceeded time limit of 200 ms" });
    await stillWorks();
  });

  it("logs from the predicate into the one log", async () => {
    const r = await runFilter({ source: "console.log(index); return value > 1", items: [1, 2, 3] });
    expect(r).toEqual({ ok: true, value: [2, 3], log: "0\n1\n2" });
  });
});
