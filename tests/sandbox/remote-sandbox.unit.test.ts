/**
 * The sandbox port on AWS (shared/sandbox/remote.ts) keeps the pool's dispatch in the caller: owners served in
 * turn, one owner within its share of the invocations in flight, the function's running time charged (not the
 * round trip), the time limit given up after its grace, and a caller's cut-off abandoning the invocation. The
 * function is stood in for by an invoke that answers after a delay.
 */
import { describe, expect, it } from "vitest";
import { RemoteSandbox, type Invoke } from "../../shared/sandbox/remote";
import type { Evaluation } from "../../shared/sandbox/quickjs";

const evaluation = (source: string, timeLimitMs = 5_000): Evaluation => ({
  op: "run",
  kind: "expression",
  source,
  globalsJson: "{}",
  limits: { timeLimitMs, memoryLimitMib: 64, logLimitBytes: 65_536 },
});
const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(timer), reject(new Error("aborted"))));
  });

/** Answers `source` after `delay(source)` ms, reporting 1 ms of running time; records the order of calls. */
function fakeFunction(delay: (source: string) => number = () => 20) {
  const calls: string[] = [];
  const invoke: Invoke = async (payload, signal) => {
    const { evaluation: e } = JSON.parse(payload) as { evaluation: Evaluation & { source: string } };
    calls.push(e.source);
    await sleep(delay(e.source), signal);
    return { answer: { ok: true, raw: JSON.stringify(e.source), log: "" }, elapsedMs: 1 };
  };
  return { invoke, calls };
}

describe("the sandbox function's invoker", () => {
  it("serves owners in turn: with one invocation in flight, A's backlog and B's evaluations alternate", async () => {
    const fn = fakeFunction();
    const remote = new RemoteSandbox(fn.invoke, { concurrency: 1, perOwner: 1, graceMs: 1_000 });
    await Promise.all([
      ...[0, 1, 2, 3].map((i) => remote.evaluate("A", evaluation(`A${i}`))),
      ...[0, 1].map((i) => remote.evaluate("B", evaluation(`B${i}`))),
    ]);
    expect(fn.calls).toEqual(["A0", "B0", "A1", "B1", "A2", "A3"]);
  });

  it("one owner holds at most its share, so another owner's evaluation is invoked at once", async () => {
    const fn = fakeFunction((s) => (s.startsWith("A") ? 500 : 5));
    const remote = new RemoteSandbox(fn.invoke, { concurrency: 4, perOwner: 2, graceMs: 1_000 });
    const a = [0, 1, 2, 3].map((i) => remote.evaluate("A", evaluation(`A${i}`)));
    expect(remote.runningFor("A")).toBe(2);
    const started = performance.now();
    const b = await remote.evaluate("B", evaluation("B0"));
    expect(performance.now() - started).toBeLessThan(200);
    expect(b).toEqual({ answer: { ok: true, raw: '"B0"', log: "" }, elapsedMs: 1 }); // the function's running time
    await Promise.all(a);
  });

  it("sends a throttled invocation again until it runs, each attempt with its own limit, and answers busy after the grace", async () => {
    const throttle = () => Object.assign(new Error("Rate Exceeded."), { name: "TooManyRequestsException" });
    const fn = fakeFunction(() => 5);
    let refusals = 3;
    const sometimes: Invoke = (payload, signal) => (refusals-- > 0 ? Promise.reject(throttle()) : fn.invoke(payload, signal));
    const remote = new RemoteSandbox(sometimes, { concurrency: 1, perOwner: 1, graceMs: 1_000 });
    expect(await remote.evaluate("A", evaluation("A0"))).toEqual({ answer: { ok: true, raw: '"A0"', log: "" }, elapsedMs: 1 });
    expect(fn.calls).toEqual(["A0"]);

    // Throttled for 300 ms, then the script takes 250 ms of its 300: it runs to its end.
    const slow = fakeFunction(() => 250);
    const throttledUntil = performance.now() + 300;
    const late: Invoke = (payload, signal) =>
      performance.now() < throttledUntil ? Promise.reject(throttle()) : slow.invoke(payload, signal);
    const lateRemote = new RemoteSandbox(late, { concurrency: 1, perOwner: 1, graceMs: 1_000 });
    expect((await lateRemote.evaluate("A", evaluation("A3", 300))).answer).toMatchObject({ ok: true });

    // Refused for longer than the grace: busy, and nothing charged, since the script never ran.
    const always = new RemoteSandbox(() => Promise.reject(throttle()), { concurrency: 1, perOwner: 1, graceMs: 100 });
    const outcome = await always.evaluate("A", evaluation("A1", 200));
    expect(outcome).toEqual({
      answer: { ok: false, errorCode: "SANDBOX_ERROR", error: expect.stringContaining("busy"), log: "" },
      elapsedMs: 0,
    });

    // A caller's cut-off while it waits for a slot ends the wait at once.
    const cutOff = new AbortController();
    const waiting = always.evaluate("A", evaluation("A4", 5_000), cutOff.signal);
    setTimeout(() => cutOff.abort("simulation cap"), 20);
    expect((await waiting).answer).toMatchObject({ ok: false, errorCode: "SANDBOX_TIMEOUT" });

    const failing = new RemoteSandbox(() => Promise.reject(new Error("AccessDenied")), { concurrency: 1, perOwner: 1, graceMs: 100 });
    expect((await failing.evaluate("A", evaluation("A2"))).answer).toMatchObject({ ok: false, errorCode: "SANDBOX_ERROR" });
  });

  it("gives an answer up as SANDBOX_TIMEOUT once the script's limit and the grace have passed", async () => {
    const remote = new RemoteSandbox(fakeFunction(() => 5_000).invoke, { concurrency: 1, perOwner: 1, graceMs: 100 });
    const started = performance.now();
    const outcome = await remote.evaluate("A", evaluation("slow", 100));
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(outcome).toEqual({
      answer: { ok: false, errorCode: "SANDBOX_TIMEOUT", error: "script exceeded time limit of 100 ms", log: "" },
      elapsedMs: 100,
    });
  });

  it("a caller's cut-off ends a queued and an invoked evaluation with its reason", async () => {
    const remote = new RemoteSandbox(fakeFunction(() => 5_000).invoke, { concurrency: 1, perOwner: 1, graceMs: 1_000 });
    const cut = new AbortController();
    const invoked = remote.evaluate("A", evaluation("first"), cut.signal);
    const queued = remote.evaluate("A", evaluation("second"), cut.signal);
    cut.abort(new Error("simulation time limit of 25000 ms reached"));
    for (const outcome of await Promise.all([invoked, queued]))
      expect(outcome.answer).toEqual({
        ok: false,
        errorCode: "SANDBOX_TIMEOUT",
        error: "simulation time limit of 25000 ms reached",
        log: "",
      });
  });

  it("answers SANDBOX_ERROR when the function fails or answers something else", async () => {
    const failing = new RemoteSandbox(() => Promise.reject(new Error("Lambda Invoke answered 429")));
    expect((await failing.evaluate("A", evaluation("1"))).answer).toMatchObject({ ok: false, errorCode: "SANDBOX_ERROR" });
    const odd = new RemoteSandbox(() => Promise.resolve({ answer: { ok: "yes" } }));
    expect((await odd.evaluate("A", evaluation("1"))).answer).toMatchObject({ ok: false, errorCode: "SANDBOX_ERROR" });
  });
});
