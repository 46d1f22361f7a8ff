/**
 * Load (issue 21, API.md §18.4): `npm run bench:load` (BENCH_ONLY=load), called from bench/run.ts with its server
 * and runtime. One owner, one workflow: a manual trigger and one customCode node, runs in this process (the
 * in-process bus and runner, RUNNER_CONCURRENCY slots of which one owner holds at most half).
 *
 *   requests per run       the DynamoDB requests of one asynchronous trigger without Idempotency-Key, from the
 *                          request to the run's last write (the rate limiter's left out), in order (goal ≤ 5)
 *   ceiling                that same request mix (the rate limiter's write included, as the load makes it)
 *                          replayed directly, one run's requests in order, BENCH_LOAD_C runs at a time on
 *                          execution items of their own (conditions dropped): runs per second
 *   async load             BENCH_LOAD_N asynchronous triggers, BENCH_LOAD_C at a time, until every run has ended:
 *                          executions per second against the ceiling (goal ≥ 0.5x), answers (goal: no 5xx), count
 *                          updates tried per execution claimed (goal ~1)
 *   scripts under load     another owner's one-line expressions through the sandbox pool, one every ~2 ms while the
 *                          async load runs  vs  the same quiet (goal: ≤ 1 ms p50)
 *   blocking load          BENCH_LOAD_N blocking triggers, BENCH_LOAD_C at a time: p50/p99 against the p50 of one
 *                          blocking trigger alone (goal: p99 ≤ 10x)
 *
 *   BENCH_LOAD_N (default 300), BENCH_LOAD_C (default 20), BENCH_LOAD_COUNT_ROUNDS (default 10).
 */
import { ulid } from "ulid";
import { currentBus, setBus } from "../shared/execution/bus/install";
import { createInProcessBus } from "../shared/execution/bus/in-process";
import { withRunner } from "../shared/execution/runner";
import { createOneNodeWorkflow, newOwner, note, type BenchContext, type Owner } from "./workflows";
import { sameWriteEveryTime, withIdReplaced } from "./replay";
import { stat } from "./stats";
import { SandboxSession } from "../shared/sandbox/session";
import { sandboxPool } from "../shared/sandbox/pool";
import { setRuntime, type Runtime } from "../shared/current-runtime";
import { claimStats } from "../shared/workflow/claim";

const REQUEST_GOAL = 5;
const THROUGHPUT_GOAL = 0.5;
const BLOCKING_GOAL = 10;

export async function benchLoad(ctx: BenchContext): Promise<void> {
  const n = Number(process.env.BENCH_LOAD_N ?? 300);
  const c = Number(process.env.BENCH_LOAD_C ?? 20);
  const countRounds = Number(process.env.BENCH_LOAD_COUNT_ROUNDS ?? 10);
  const began = performance.now();
  const previousBus = currentBus();
  const bus = setBus(withRunner(createInProcessBus()));
  try {
    const who = await newOwner(ctx.base, "21");
    const workflowId = await createOneNodeWorkflow(ctx.base, who);
    const trigger = (blocking: boolean) => triggerOnce(ctx.base, who, workflowId, blocking);

    // 1. The requests of one asynchronous run.
    for (let i = 0; i < 3; i++) await trigger(false).then(() => bus.idle());
    const rounds: Recorded[] = [];
    for (let i = 0; i < countRounds; i++)
      rounds.push(
        await recordRun(
          ctx.runtime,
          () => trigger(false),
          () => bus.idle(),
        ),
      );
    const counted = rounds.filter((r) => r.requests.length > 0).sort((a, b) => a.counted.length - b.counted.length)[
      Math.floor(rounds.length / 2)
    ]!;
    const perRun = counted.counted.length;
    const requestVerdict = `${perRun} requests per run (goal ≤ ${REQUEST_GOAL}: ${perRun <= REQUEST_GOAL ? "met" : "NOT met"})`;
    console.log(`an asynchronous one-node run's DynamoDB requests (rate limiter left out), in order:\n  ${counted.counted.join("\n  ")}`);
    console.log(`  → ${requestVerdict}; in ${countRounds} rounds: ${rounds.map((r) => r.counted.length).join(", ")}`);

    // 2. The ceiling: that mix issued directly, C runs at a time.
    const replayed = await replayRuns(ctx.runtime, counted, n, c);
    const ceiling = n / (replayed / 1000);

    // 3. Asynchronous load, and one-line scripts of another owner meanwhile (goal: ≤ 1 ms p50 under load).
    const quietScripts = await scriptTimes(200, () => false);
    let loading = true;
    const scriptsUnderLoad = scriptTimes(Number.MAX_SAFE_INTEGER, () => !loading);
    const before = { ...claimStats };
    const asyncAnswers = new Map<string, number>();
    const asyncStart = performance.now();
    await atConcurrency(n, c, async () => {
      const { status, body } = await trigger(false);
      const key = status === 202 ? "202" : `${status} ${String((body as { code?: string }).code)}`;
      asyncAnswers.set(key, (asyncAnswers.get(key) ?? 0) + 1);
    });
    const answeredAt = performance.now();
    await bus.idle();
    loading = false;
    const scripts = stat(await scriptsUnderLoad);
    const scriptsQuiet = stat(quietScripts);
    const asyncMs = performance.now() - asyncStart;
    const execsPerS = n / (asyncMs / 1000);
    const attempts = (claimStats.attempts - before.attempts) / Math.max(1, claimStats.claimed - before.claimed);
    const asyncFailures = [...asyncAnswers].filter(([k]) => Number(k.split(" ")[0]) >= 500).reduce((a, [, k]) => a + k, 0);

    // 4. Blocking: one alone, then the load.
    for (let i = 0; i < 5; i++) await trigger(true);
    const alone: number[] = [];
    for (let i = 0; i < 30; i++) alone.push((await trigger(true)).ms);
    const blockingAnswers = new Map<string, number>();
    const loaded: number[] = [];
    await atConcurrency(n, c, async () => {
      const { status, ms, body } = await trigger(true);
      loaded.push(ms);
      const key = `${status} ${String((body as { status?: string }).status ?? (body as { code?: string }).code)}`;
      blockingAnswers.set(key, (blockingAnswers.get(key) ?? 0) + 1);
    });
    await bus.idle();
    const one = stat(alone);
    const many = stat(loaded);
    const throughputRatio = execsPerS / ceiling;
    const blockingRatio = many.p99 / one.p50;
    const blockingFailures = [...blockingAnswers].filter(([k]) => Number(k.split(" ")[0]) >= 500).reduce((a, [, k]) => a + k, 0);

    const slots = ctx.runtime.config.runnerConcurrency;
    const perExecution = (perSecond: number) => ({ p50: 1000 / perSecond, p99: 1000 / perSecond });
    ctx.report(`async :trigger ×${n} at C=${c}, ms per execution`, perExecution(execsPerS), "its requests direct", perExecution(ceiling));
    note(ctx, `${execsPerS.toFixed(1)} vs ${ceiling.toFixed(1)} execs/s = ${throughputRatio.toFixed(2)}x (goal ≥ ${THROUGHPUT_GOAL}x)`);
    ctx.report("one-line script during the async load", scripts, "the same, quiet", scriptsQuiet);
    note(ctx, `p50 ${scripts.p50.toFixed(2)} ms (goal ≤ 1 ms: ${scripts.p50 <= 1 ? "met" : "NOT met"})`);
    ctx.report(`blocking :trigger ×${n} at C=${c}`, many, "one blocking :trigger alone", one);
    note(ctx, `p99 ${blockingRatio.toFixed(1)}x the p50 alone`);
    const lines = [
      `load, one owner, one one-node workflow, N=${n}, C=${c}, RUNNER_CONCURRENCY ${slots} (one owner: at most ${Math.ceil(slots / 2)}):`,
      `  requests per asynchronous run: ${requestVerdict}`,
      `  ceiling: the same ${counted.requests.length} requests per run (rate limiter included) issued directly, ${c} runs at a time: ${ceiling.toFixed(1)} runs/s (${(ceiling * counted.requests.length).toFixed(0)} requests/s)`,
      `  asynchronous: ${execsPerS.toFixed(1)} executions/s (all ${n} answered in ${(answeredAt - asyncStart).toFixed(0)} ms, all ended in ${asyncMs.toFixed(0)} ms) = ${throughputRatio.toFixed(2)}x the ceiling (goal ≥ ${THROUGHPUT_GOAL}x: ${throughputRatio >= THROUGHPUT_GOAL ? "met" : "NOT met"}); answers ${fmt(asyncAnswers)}; 5xx ${asyncFailures} (goal 0: ${asyncFailures === 0 ? "met" : "NOT met"})`,
      `  claim attempts per execution: ${attempts.toFixed(3)} (goal ~1)`,
      `  one-line script of another owner during the async load: p50 ${scripts.p50.toFixed(2)} ms, p99 ${scripts.p99.toFixed(2)} ms (quiet p50 ${scriptsQuiet.p50.toFixed(2)} ms; goal ≤ 1 ms p50: ${scripts.p50 <= 1 ? "met" : "NOT met"})`,
      `  blocking: alone p50 ${one.p50.toFixed(1)} ms (p99 ${one.p99.toFixed(1)}); at C=${c} p50 ${many.p50.toFixed(1)} ms, p99 ${many.p99.toFixed(1)} ms = ${blockingRatio.toFixed(1)}x the p50 alone (goal ≤ ${BLOCKING_GOAL}x: ${blockingRatio <= BLOCKING_GOAL ? "met" : "NOT met"}); answers ${fmt(blockingAnswers)}; 5xx ${blockingFailures}`,
      `  (at that ceiling ${c} blocking triggers at a time cannot average under ${c} / ceiling = ${((c / ceiling) * 1000).toFixed(0)} ms, ${(((c / ceiling) * 1000) / one.p50).toFixed(1)}x the p50 alone, whatever the service adds: Little's law)`,
      `  (load bench: ${((performance.now() - began) / 1000).toFixed(1)} s)`,
    ];
    console.log(lines.join("\n"));
  } finally {
    if (previousBus) setBus(previousBus);
  }
}

/**
 * One-line expressions through the sandbox pool, one every ~2 ms (another owner's session: its own fair share), until
 * `done()` or `max` of them: their times (ms).
 */
async function scriptTimes(max: number, done: () => boolean): Promise<number[]> {
  await sandboxPool().ready();
  const session = new SandboxSession("0xloadbench");
  const globals = { start: { data: { n: 1 } } };
  const times: number[] = [];
  while (times.length < max && !done()) {
    const t0 = performance.now();
    const r = await session.run({ kind: "expression", source: "start.data.n + 1 === 2", globals });
    if (!r.ok || r.value !== true) throw new Error(`sandbox: ${JSON.stringify(r)}`);
    times.push(performance.now() - t0);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  return times;
}

const fmt = (m: Map<unknown, number>) => [...m].map(([k, v]) => `${v}× ${String(k)}`).join(", ");

async function triggerOnce(base: string, who: Owner, workflowId: string, blocking: boolean) {
  const started = performance.now();
  const res = await fetch(`${base}/workflows/${workflowId}:trigger`, {
    method: "POST",
    headers: who.headers,
    body: JSON.stringify(blocking ? { triggerType: "manual", isBlocking: true } : { triggerType: "manual" }),
  });
  const body = (await res.json()) as Record<string, unknown>;
  return { status: res.status, body, ms: performance.now() - started };
}

/** `count` calls of `fn`, `concurrency` at a time. */
async function atConcurrency(count: number, concurrency: number, fn: () => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next += 1;
        await fn();
      }
    }),
  );
}

interface Recorded {
  /** Every command sent, in order (the rate limiter's included). */
  requests: object[];
  /** The counted ones (the rate limiter's left out), described. */
  counted: string[];
  executionId: string;
}

/** The commands the table client sends from the trigger until its run has ended (`settled`). */
async function recordRun(runtime: Runtime, trigger: () => Promise<{ body: unknown }>, settled: () => Promise<void>): Promise<Recorded> {
  const requests: object[] = [];
  const db = runtime.db;
  const recorder = { send: (command: never) => (requests.push(command), db.send(command)) } as unknown as Runtime["db"];
  setRuntime({ ...runtime, db: recorder });
  let executionId = "";
  try {
    executionId = String(((await trigger()).body as { executionId?: string }).executionId);
    await settled();
  } finally {
    setRuntime(runtime);
  }
  const counted = requests.filter((c) => !keysOf(c).some((k) => k.startsWith("RATE#"))).map((c) => describe(c, executionId));
  return { requests, counted, executionId };
}

/** The partition keys a command names (a transaction's items' too). */
function keysOf(command: object): string[] {
  const input = (command as { input: Record<string, unknown> }).input;
  const pk = (o: unknown) =>
    (o as { Key?: { pk?: string }; Item?: { pk?: string } } | undefined)?.Key?.pk ?? (o as { Item?: { pk?: string } })?.Item?.pk;
  const items = (input.TransactItems as Record<string, unknown>[] | undefined)?.map((t) => pk(Object.values(t)[0])) ?? [pk(input)];
  return items.filter((k): k is string => typeof k === "string");
}

/** `<Command> <what>`: what the command reads or writes, by its keys. */
function describe(command: object, executionId: string): string {
  const what = keysOf(command)
    .map((pk) =>
      pk.startsWith("CLAIMJOURNAL#")
        ? "claim journal"
        : pk.startsWith(`EXEC#${executionId}`)
          ? "step"
          : /^WF#[^#]+#EXEC$/.test(pk)
            ? "execution"
            : /^WF#[^#]+$/.test(pk)
              ? "workflow"
              : pk.split("#")[0],
    )
    .join(" + ");
  return `${command.constructor.name.replace(/Command$/, "")} ${what}`;
}

/**
 * The recorded run's commands replayed directly (conditions dropped, on a fresh execution id each run), `c` runs at
 * a time, `n` runs in all: the time it took (ms).
 */
async function replayRuns(runtime: Runtime, recorded: Recorded, n: number, c: number): Promise<number> {
  const commands = recorded.requests.map(sameWriteEveryTime);
  const run = async () => {
    const id = ulid();
    for (const command of commands) await runtime.db.send(withIdReplaced(command, recorded.executionId, id) as never);
  };
  await atConcurrency(Math.min(40, n), c, run); // warm-up
  const start = performance.now();
  await atConcurrency(n, c, run);
  return performance.now() - start;
}
