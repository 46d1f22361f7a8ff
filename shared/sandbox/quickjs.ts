/**
 * The JavaScript sandbox (API.md §8.4.6 customCode, §8.4.7 branch, §8.4.8 filter; limits §4.1).
 *
 * Scripts run in QuickJS compiled to WebAssembly (quickjs-emscripten, the release sync build with the
 * WebAssembly embedded in its JavaScript, so a Lambda bundle needs no separate .wasm file). Each evaluation
 * gets a FRESH WebAssembly instance with its own bounded `WebAssembly.Memory`, and drops it afterwards:
 *
 * - Memory: the instance's memory may grow to the module's own floor (16 MiB: static data, C stack, first
 *   heap; it refuses less) plus the limit, and no further: a WebAssembly memory cannot outgrow its maximum, so
 *   whatever QuickJS does, the host holds at most 16 MiB + the limit for it. QuickJS's own accounting
 *   (`setMemoryLimit`) is set to the limit as well and is usually what stops a script first, with a clean
 *   "out of memory"; the WebAssembly maximum is the cap that holds if that accounting misses something.
 *   A memory cannot shrink and an instance that ran out may be in any state, hence one instance per
 *   evaluation. It also means that nothing of one evaluation (another owner's secrets, say) is ever in the
 *   memory of the next, even for a script that found a way to read QuickJS's freed memory. The module is
 *   compiled once per process; an instance costs ~1.5 ms to create, a trivial evaluation ~2.5 ms (p50).
 * - Time: an interrupt handler stops the interpreter once the deadline passes (an uncatchable error); the
 *   deadline covers awaiting the returned promise. Microtasks are the only way to wait: there are no timers.
 * - No host: the context has ECMAScript's built-ins only. No module loader (so `import()` rejects), no
 *   `process`, `fetch`, timers, file system or environment. The §8.6 variables arrive as one JSON text parsed
 *   inside the VM (values, never host object handles), and `console.log/info/warn/error` write to a bounded
 *   log through one host function that only appends text.
 * - Modules (§21.2): `require` offers the vendored modules of ./modules.ts, whose source the VM asks the host
 *   for by name (a text, evaluated inside the VM on first use within the evaluation); leading `import`
 *   statements of a customCode source are rewritten to `require` before it is compiled. A module sees a
 *   `crypto.getRandomValues` filled by the host's CSPRNG (uuid's v4); scripts see neither.
 * - Deep recursion: QuickJS's stack limit is set low enough that ordinary recursion ends in a catchable
 *   "stack overflow"; a few C paths (a deeply nested JSON.stringify) may exhaust the host's stack first, which
 *   ends the evaluation the same way and only loses that (disposable) instance.
 *
 * String concatenation makes ropes, so `s = s + s` reaches QuickJS's longest string (2^30 - 1 characters,
 * "string too long", a catchable error: SANDBOX_ERROR) before it uses much memory; what flattens it (or
 * `repeat`) meets the memory limit.
 *
 * Nothing here logs, and no error message this module writes contains a variable's value (secrets may be
 * among them); messages the script itself throws are passed through, and the caller redacts them.
 */
import {
  newQuickJSWASMModuleFromVariant,
  newVariant,
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSRuntime,
  type QuickJSWASMModule,
} from "quickjs-emscripten-core";
import RELEASE_SYNC from "@jitl/quickjs-singlefile-mjs-release-sync";
import { randomBytes } from "node:crypto";
import { LOG_TRUNCATED_MARKER } from "./log-marker";
import { moduleSource, rewriteImports, unavailableModule } from "./modules";

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type SandboxErrorCode = "SANDBOX_ERROR" | "SANDBOX_TIMEOUT" | "SANDBOX_MEMORY";

export interface EvaluationLimits {
  /** Deadline for the whole evaluation, promise included (`sandbox_time_limit_ms`, or what is left of the execution's budget). */
  timeLimitMs: number;
  /** Heap the script may use (`sandbox_memory_limit_mib`). */
  memoryLimitMib: number;
  /** Console output kept, in UTF-8 bytes, the truncation marker included (`max_step_log_bytes`). */
  logLimitBytes: number;
  /** For tests only: leave QuickJS's own memory accounting off, to show that the WebAssembly cap holds alone. */
  engineMemoryLimit?: false;
}

/**
 * One evaluation, as it crosses to a sandbox worker: only texts, so nothing of the host (no object handle,
 * no prototype) reaches the VM. The §8.6 variables arrive as one JSON text parsed inside the VM.
 * - `run`: customCode (`function-body`: top-level `return` and `await`, a returned promise awaited) or one
 *   expression; answers the value's JSON text (§8.4.6's JSON-safety).
 * - `filter`: the source (an expression, or a function body when it contains `return`) once per element of
 *   `itemsJson`, with `value` and `index`; answers the matching indexes, comma-separated.
 * - `branch`: the expressions in order, stopping at the first boolean `true`; answers its index or -1.
 */
export type Evaluation = { limits: EvaluationLimits; globalsJson: string } & (
  | { op: "run"; kind: "function-body" | "expression"; source: string }
  | { op: "filter"; source: string; itemsJson: string }
  | { op: "branch"; expressions: readonly string[] }
);

export type Answer =
  { ok: true; raw: string | number; log: string } | { ok: false; errorCode: SandboxErrorCode; error: string; log: string };

/** Whether a filter expression is a function body: API.md §8.4.8 says so when it contains the keyword `return`. */
export const isFunctionBody = (source: string): boolean => /\breturn\b/.test(source);

/**
 * Runs one evaluation in `instance`, synchronously, under its deadline. The instance must be fresh and is
 * spent afterwards (never reused: see the module comment).
 */
export function evaluate(instance: Instance, evaluation: Evaluation): Answer {
  return run(instance, evaluation, (vm) => {
    switch (evaluation.op) {
      case "run": {
        const body = evaluation.kind === "function-body";
        let result = vm.call(body ? "body" : "expression", body ? rewriteImports(evaluation.source) : evaluation.source);
        if (evaluation.kind === "function-body") result = vm.settle(result);
        return vm.text(vm.call("finish", result));
      }
      case "filter":
        return vm.text(vm.call("filter", evaluation.source, isFunctionBody(evaluation.source), evaluation.itemsJson));
      case "branch":
        return vm.number(vm.call("branch", JSON.stringify(evaluation.expressions)));
    }
  });
}

// ---------------------------------------------------------------------------------------------------------
// The script side: evaluated first in every VM, before any user code, so it holds the genuine built-ins.
// It returns the operations the host calls; nothing of it is reachable from globalThis except `console` and
// `require`.

const BOOTSTRAP = String.raw`(function (hostLog, lineCap, hostModule, hostRandom, unavailable) {
  "use strict";
  const G = globalThis, parse = JSON.parse, stringify = JSON.stringify, keys = Object.keys;
  const define = Object.defineProperty, toStr = String, ErrorCtor = Error;
  const Fn = Function, AsyncFn = (async function () {}).constructor;
  const slice = Function.prototype.call.bind(String.prototype.slice);
  const bigints = (_key, v) => (typeof v === "bigint" ? toStr(v) : v);
  const safe = (f, fallback) => { try { return f(); } catch (e) { return fallback; } };
  const show = (x) => {
    switch (typeof x) {
      case "string": return x;
      case "undefined": return "undefined";
      case "bigint": return toStr(x) + "n";
      case "function": return "[Function" + safe(() => (x.name ? ": " + toStr(x.name) : ""), "") + "]";
      case "object":
        if (x === null) return "null";
        if (x instanceof ErrorCtor) return safe(() => toStr(x.name) + ": " + toStr(x.message), "Error");
        return safe(() => { const s = stringify(x, bigints); return s === undefined ? toStr(x) : s; }, "[object]");
      default: return safe(() => toStr(x), "?");
    }
  };
  let full = false;
  const write = function () {
    if (full) return;
    let line = "";
    for (let i = 0; i < arguments.length && line.length <= lineCap; i++) line += (i ? " " : "") + show(arguments[i]);
    full = hostLog(line.length > lineCap ? slice(line, 0, lineCap + 1) : line) === true;
  };
  const console = {};
  for (const level of ["log", "info", "warn", "error"]) {
    define(console, level, { value: function () { return write.apply(undefined, arguments); }, writable: true, configurable: true, enumerable: true });
  }
  const apply = Reflect.apply, Bytes = Uint8Array, byteAt = Function.prototype.call.bind(String.prototype.charCodeAt);
  // A module's crypto (uuid's v4 reads it): random bytes from the host, at most 65,536 a call as in WebCrypto.
  const crypto = {
    getRandomValues(view) {
      const bytes = new Bytes(view.buffer, view.byteOffset, view.byteLength);
      if (bytes.length > 65536) throw new ErrorCtor("getRandomValues: at most 65536 bytes");
      const text = hostRandom(bytes.length);
      for (let i = 0; i < bytes.length; i++) bytes[i] = byteAt(text, i);
      return view;
    },
  };
  const loaded = Object.create(null);
  const require = function require(name) {
    const key = toStr(name);
    if (loaded[key] !== undefined) return loaded[key].exports;
    const source = hostModule(key);
    if (typeof source !== "string") throw new ErrorCtor("module '" + key + "' " + unavailable);
    const module = { exports: {} };
    loaded[key] = module;
    try {
      apply(new Fn("module", "exports", "crypto", source), G, [module, module.exports, crypto]);
    } catch (e) {
      delete loaded[key];
      throw e;
    }
    return module.exports;
  };
  const asExpression = (source) => new Fn("return (" + source + "\n);");
  const setGlobal = (name, value) => define(G, name, { value, writable: true, configurable: true, enumerable: true });
  return {
    install(json) {
      const vars = parse(json), names = keys(vars);
      for (let i = 0; i < names.length; i++) setGlobal(names[i], vars[names[i]]);
      define(G, "console", { value: console, writable: true, configurable: true, enumerable: false });
      define(G, "require", { value: require, writable: true, configurable: true, enumerable: false });
    },
    body(source) { return new AsyncFn(source)(); },
    expression(source) { return asExpression(source)(); },
    finish(value) { const s = stringify(value, bigints); return s === undefined ? "null" : s; },
    filter(source, isBody, itemsJson) {
      const f = isBody ? new Fn(source) : asExpression(source), items = parse(itemsJson);
      let out = "";
      for (let i = 0; i < items.length; i++) {
        setGlobal("value", items[i]);
        setGlobal("index", i);
        if (f() === true) out += (out === "" ? "" : ",") + i;
      }
      return out;
    },
    branch(json) {
      const expressions = parse(json);
      for (let i = 0; i < expressions.length; i++) if (asExpression(expressions[i])() === true) return i;
      return -1;
    },
    describe(e) {
      if (e === null || (typeof e !== "object" && typeof e !== "function")) return stringify(["", safe(() => toStr(e), "")]);
      const name = safe(() => e.name, ""), message = safe(() => e.message, undefined);
      if (typeof message === "string") return stringify([typeof name === "string" ? name : "", message]);
      return stringify(["", safe(() => { const s = stringify(e, bigints); return s === undefined ? toStr(e) : s; }, "")]);
    },
  };
})`;

// ---------------------------------------------------------------------------------------------------------
// The host side.

const MIB = 1_048_576;
const PAGE = 65_536;
/** The module's own floor, in 64 KiB pages: it links only against a memory of at least 16 MiB. */
const BASE_PAGES = 256;
/** QuickJS's stack limit: ~700 frames of plain recursion, well inside Node's ~1 MB native stack. */
const MAX_STACK_BYTES = 128 * 1024;
/** An error QuickJS could not even allocate counts as the memory limit when the heap is this full. */
const NEARLY_FULL = 0.9;

// Real clock, taken at load: a test's fake timers must not stop the deadline.
const now = performance.now.bind(performance);

/** A value the script threw (or a promise rejection), still inside the VM. */
class Thrown {
  constructor(readonly handle: QuickJSHandle) {}
}
/** The returned promise can never settle: nothing is left to run and there are no timers. */
class NeverSettled {}

// The project's TypeScript libs (ES2023, node) do not declare WebAssembly; these are the parts used here.
interface WasmMemory {
  readonly buffer: ArrayBuffer;
}
type WasmModule = object;
interface WasmApi {
  Memory: new (descriptor: { initial: number; maximum: number }) => WasmMemory;
  instantiate: (source: unknown, imports?: unknown) => Promise<unknown>;
}
const wasm: WasmApi = Reflect.get(globalThis, "WebAssembly");

/** A QuickJS instance with its own memory: created ahead, used for one evaluation, then dropped. */
export interface Instance {
  /** The memory limit it was created for (its WebAssembly maximum). */
  limitMib: number;
  module: QuickJSWASMModule;
  memory: WasmMemory;
  /** Its runtime and context, set up ahead (never used by an evaluation yet). */
  vm?: Vm;
}

const silent = (): void => {};
// Emscripten would print the abort of a dying instance to stderr; the result already says what happened.
const quiet = { print: silent, printErr: silent } as object;

const newMemory = (limitMib: number): WasmMemory =>
  new wasm.Memory({ initial: BASE_PAGES, maximum: BASE_PAGES + Math.ceil((limitMib * MIB) / PAGE) });

let compiled: Promise<WasmModule | undefined> | undefined;

/**
 * The compiled QuickJS module, once per process, so that a fresh instance costs an instantiation (~1 ms)
 * rather than a compilation, and runs code V8 has already optimised. The single-file build keeps its bytes
 * to itself, so one throwaway instance is created the ordinary way while `WebAssembly.instantiate` is
 * wrapped to keep the module it compiles (recognised by the memory it imports, which is ours); the wrapper
 * only observes and is removed as soon as that instance exists. Undefined if that fails: every instance then
 * compiles its own copy, which is slower but no less isolated.
 */
function compiledModule(): Promise<WasmModule | undefined> {
  compiled ??= (async () => {
    const memory = newMemory(0);
    const original = wasm.instantiate;
    let captured: WasmModule | undefined;
    const observer = async (source: unknown, imports?: unknown): Promise<unknown> => {
      const result = await original.call(wasm, source, imports);
      const own =
        typeof imports === "object" &&
        imports !== null &&
        Object.values(imports).some((ns) => typeof ns === "object" && ns !== null && Object.values(ns).includes(memory));
      if (own && typeof result === "object" && result !== null && "module" in result) captured = result.module as WasmModule;
      return result;
    };
    wasm.instantiate = observer;
    try {
      await newQuickJSWASMModuleFromVariant(newVariant(RELEASE_SYNC, { wasmMemory: memory as never, emscriptenModule: quiet }));
    } catch {
      // instances compile their own
    } finally {
      if (wasm.instantiate === observer) wasm.instantiate = original;
    }
    return captured;
  })();
  return compiled;
}

/**
 * A fresh instance of QuickJS with its own memory, bounded by the floor plus the limit. With `logLimitBytes`,
 * its runtime and context are set up too (the bootstrap evaluated), so that an evaluation with that log
 * limit only installs its variables and runs.
 */
export async function createInstance(limitMib: number, logLimitBytes?: number): Promise<Instance> {
  const wasmModule = await compiledModule();
  const memory = newMemory(limitMib);
  const variant = newVariant(RELEASE_SYNC, {
    wasmMemory: memory as never,
    ...(wasmModule ? { wasmModule: wasmModule as never } : {}),
    emscriptenModule: quiet,
  });
  const instance: Instance = { limitMib, module: await newQuickJSWASMModuleFromVariant(variant), memory };
  if (logLimitBytes !== undefined) instance.vm = newVm(instance, logLimitBytes);
  return instance;
}

function newVm(instance: Instance, lineCap: number): Vm {
  const runtime = instance.module.newRuntime();
  runtime.setMaxStackSize(MAX_STACK_BYTES);
  return new Vm(runtime, runtime.newContext(), lineCap);
}

/**
 * The console log: lines joined with "\n", at most `limit` UTF-8 bytes, the marker included when truncated.
 * Note for the caller, who redacts secrets afterwards: the cut may leave the first bytes of a secret at the
 * end of the text, right before the marker.
 */
class LogBuffer {
  private text = "";
  private lines = 0;
  private bytes = 0;
  private truncated = false;
  constructor(private readonly limit: number) {}

  /** Appends one console line; true once the log is full (the script then stops sending). */
  add(line: string): boolean {
    if (this.truncated) return true;
    const piece = this.lines++ === 0 ? line : "\n" + line;
    this.text += piece;
    this.bytes += Buffer.byteLength(piece);
    if (this.bytes > this.limit) this.truncated = true;
    return this.truncated;
  }

  value(): string {
    if (!this.truncated) return this.text;
    const marker = Buffer.byteLength(LOG_TRUNCATED_MARKER);
    const buf = Buffer.from(this.text);
    let end = Math.max(0, this.limit - marker);
    while (end > 0 && ((buf[end] ?? 0) & 0xc0) === 0x80) end--; // never cut a UTF-8 sequence
    return buf.subarray(0, end).toString() + LOG_TRUNCATED_MARKER;
  }
}

/** One evaluation's VM: calls into the bootstrap's operations, turning script exceptions into `Thrown`. */
class Vm {
  private readonly api: QuickJSHandle;
  /** The evaluation's log (the VM is set up before the evaluation that uses it exists). */
  log: LogBuffer;
  constructor(
    readonly runtime: QuickJSRuntime,
    private readonly ctx: QuickJSContext,
    readonly lineCap: number,
  ) {
    this.log = new LogBuffer(lineCap);
    const hostLog = ctx.newFunction("log", (line) => (this.log.add(ctx.getString(line)) ? ctx.true : ctx.false));
    const hostModule = ctx.newFunction("module", (name) => {
      const source = moduleSource(ctx.getString(name));
      return source === undefined ? ctx.undefined : ctx.newString(source);
    });
    const hostRandom = ctx.newFunction("random", (count) => ctx.newString(randomBytes(ctx.getNumber(count)).toString("latin1")));
    const bootstrap = this.unwrap(ctx.evalCode(BOOTSTRAP, "sandbox.js"));
    const args = [hostLog, ctx.newNumber(lineCap), hostModule, hostRandom, ctx.newString(unavailableModule)];
    this.api = this.unwrap(ctx.callFunction(bootstrap, ctx.undefined, ...args));
  }

  call(op: string, ...args: (string | boolean | QuickJSHandle)[]): QuickJSHandle {
    const { ctx } = this;
    const handles = args.map((a) => (typeof a === "string" ? ctx.newString(a) : typeof a === "boolean" ? (a ? ctx.true : ctx.false) : a));
    return this.unwrap(ctx.callFunction(ctx.getProp(this.api, op), ctx.undefined, ...handles));
  }

  /** Runs pending jobs until the promise settles; the deadline's interrupt applies to them too. */
  settle(promise: QuickJSHandle): QuickJSHandle {
    for (;;) {
      const state = this.ctx.getPromiseState(promise);
      if (state.type === "fulfilled") return state.value;
      if (state.type === "rejected") throw new Thrown(state.error);
      const ran = this.runtime.executePendingJobs();
      if (ran.error) throw new Thrown(ran.error);
      if (ran.value === 0) throw new NeverSettled();
    }
  }

  text(handle: QuickJSHandle): string {
    return this.ctx.getString(handle);
  }

  number(handle: QuickJSHandle): number {
    return this.ctx.getNumber(handle);
  }

  /** `[name, message]` of a thrown value, or undefined when it cannot be read (an exhausted heap). */
  describe(thrown: QuickJSHandle): [string, string] | undefined {
    try {
      const parsed: unknown = JSON.parse(this.text(this.call("describe", thrown)));
      if (Array.isArray(parsed) && typeof parsed[0] === "string" && typeof parsed[1] === "string") return [parsed[0], parsed[1]];
    } catch {
      // fall through
    }
    return undefined;
  }

  private unwrap(result: { error?: QuickJSHandle; value?: QuickJSHandle }): QuickJSHandle {
    if (result.error) throw new Thrown(result.error);
    return result.value as QuickJSHandle;
  }
}

/** One evaluation in a fresh instance: `program` drives the VM, synchronously, under the deadline. */
function run(instance: Instance, evaluation: Evaluation, program: (vm: Vm) => string | number): Answer {
  const { timeLimitMs, memoryLimitMib, logLimitBytes } = evaluation.limits;
  let log = new LogBuffer(logLimitBytes);
  const fail = (errorCode: SandboxErrorCode, error: string): Answer => ({ ok: false, errorCode, error, log: log.value() });
  const timeout = () => fail("SANDBOX_TIMEOUT", `script exceeded time limit of ${timeLimitMs} ms`);
  const outOfMemory = () => fail("SANDBOX_MEMORY", `script exceeded memory limit of ${memoryLimitMib} MiB`);

  let vm: Vm | undefined;
  let interrupted = false;
  const deadline = now() + timeLimitMs;
  try {
    vm = instance.vm?.lineCap === logLimitBytes ? instance.vm : newVm(instance, logLimitBytes);
    instance.vm = undefined; // spent
    log = vm.log;
    const { runtime } = vm;
    if (evaluation.limits.engineMemoryLimit !== false) runtime.setMemoryLimit(memoryLimitMib * MIB);
    runtime.setInterruptHandler(() => (interrupted ||= now() > deadline));
    vm.call("install", evaluation.globalsJson);
    const raw = program(vm);
    if (interrupted || now() > deadline) return timeout();
    return { ok: true, raw, log: log.value() };
  } catch (e) {
    // The instance is dropped whatever happened (never reused), so a half-run VM is no concern here.
    const described = e instanceof Thrown && vm ? vm.describe(e.handle) : undefined;
    if (interrupted) return timeout();
    const heapFull = instance.memory.buffer.byteLength >= BASE_PAGES * PAGE + NEARLY_FULL * memoryLimitMib * MIB;
    if (described?.[0] === "InternalError" && described[1] === "out of memory") return outOfMemory();
    // An exhausted heap cannot build its error object: QuickJS throws null, or the description fails.
    if (heapFull && (described === undefined || (described[0] === "" && (described[1] === "null" || described[1] === ""))))
      return outOfMemory();
    if (now() > deadline) return timeout();
    if (described) return fail("SANDBOX_ERROR", described[1] || described[0] || "script threw");
    if (e instanceof NeverSettled) return fail("SANDBOX_ERROR", "the returned promise never settles");
    if (e instanceof RangeError && /call stack/i.test(e.message)) return fail("SANDBOX_ERROR", "stack overflow");
    if (e instanceof Thrown) return fail("SANDBOX_ERROR", "script threw a value that cannot be read");
    return fail("SANDBOX_ERROR", `the sandbox failed: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
  }
}
