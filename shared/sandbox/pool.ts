/**
 * The sandbox pool (API.md §18.1): worker threads that run every JavaScript evaluation, so the thread that
 * serves HTTP, drives executions and watches the chain never waits on a script.
 *
 * - Fair dispatch: evaluations queue per owner, and owners are served in turn (the owner served least
 *   recently goes next). One owner runs at most `perOwner` evaluations at once (half the cores by default),
 *   so whatever one owner queues, a worker is free for another owner or frees within one evaluation's turn.
 *   Time spent queued is not running time: the deadline starts in the worker (./worker.ts).
 * - A worker that has not answered `graceMs` after its script's own time limit (the interrupt handler could
 *   not stop it) is terminated and replaced; so is a worker whose evaluation is cut off by its caller's
 *   signal (a simulation at its cap) or that died (its own V8 heap is bounded by `resourceLimits`; QuickJS's
 *   memory is a WebAssembly memory outside that heap, bounded by ./quickjs.ts).
 * - Idle workers are unref'd, so the pool never keeps a process (or a Lambda invocation) alive by itself;
 *   a busy one is ref'd until it answers, so an awaited evaluation is never abandoned by an empty event loop.
 *
 * Workers start with an empty environment. On AWS the functions that run scripts do not use this pool: they
 * invoke the sandbox function (./remote.ts); locally (`npm start`, tests) this pool is the sandbox port.
 *
 * Workers load ./worker.ts: in a bundle, the bundle itself is the worker's script (./worker.ts is part of it,
 * and starts only on a sandbox worker thread); from source (tsx, vitest), a bundle of ./worker.ts made once per
 * process with esbuild.
 */
import { createHash } from "node:crypto";
import { existsSync, renameSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { isMainThread, Worker, workerData, type WorkerOptions } from "node:worker_threads";
import type { Answer, Evaluation, SandboxErrorCode } from "./quickjs";
import { SANDBOX_WORKER_ROLE, type Job, type Reply } from "./worker";
import { FairQueue } from "./fair-queue";
import { cutOffMessage, onCutOff } from "./cut-off";
import { installedSandbox, type Outcome, type Sandbox } from "./port";

export interface PoolOptions {
  /** Worker threads, each running one evaluation at a time. */
  workers: number;
  /** Evaluations one owner may run at once. */
  perOwner: number;
  /** Memory and log limits the workers create instances ahead for (`sandbox_memory_limit_mib`, `max_step_log_bytes`). */
  memoryLimitMib: number;
  logLimitBytes: number;
  /** How long past its script's time limit a worker may take to answer before it is replaced. */
  graceMs: number;
  /** V8 heap of each worker (its own objects, the variables' JSON text), in MiB. */
  heapMib: number;
}

/** The sizing used when the host sets none: see docs/isolation.md ("The sandbox pool"). */
export function defaultPoolOptions(env: Record<string, string | undefined> = process.env): PoolOptions {
  const memoryMib = Number(env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE) || totalmem() / 1_048_576;
  // Each worker may hold ~64 MiB of V8 heap in use plus QuickJS's 16 MiB floor and 64 MiB heap, and one
  // instance created ahead: budget ~256 MiB a worker, and leave half of the memory to the host.
  const byMemory = Math.floor(memoryMib / 2 / 256);
  const auto = Math.max(2, Math.min(8, availableParallelism() * 2, byMemory));
  const workers = Number(env.SANDBOX_WORKERS) || auto;
  return {
    workers,
    // Half the cores (and half the workers): however hard one owner's scripts spin, at least half the machine's
    // CPU stays with the serving thread, the database and other owners (measured: with one owner on both cores
    // of this machine, a neighbour's requests took 2x as long even at nice 19; with one core, 1.1x).
    perOwner:
      Number(env.SANDBOX_WORKERS_PER_OWNER) || Math.max(1, Math.min(Math.floor(workers / 2), Math.floor(availableParallelism() / 2))),
    memoryLimitMib: Number(env.SANDBOX_MEMORY_LIMIT_MIB) || 64,
    logLimitBytes: Number(env.MAX_STEP_LOG_BYTES) || 65_536,
    graceMs: 1_000,
    heapMib: 256,
  };
}

interface Pending {
  id: number;
  owner: string;
  evaluation: Evaluation;
  signal?: AbortSignal;
  /** Unties the evaluation from its caller's signal (`onCutOff`). */
  release?: () => void;
  resolve: (outcome: Outcome) => void;
}

interface Slot {
  worker: Worker;
  /** Loaded: it may be sent an evaluation. */
  ready: boolean;
  /** An instance is waiting in it, so an evaluation starts without instantiating. */
  warm: boolean;
  /** Its worker died (it is being replaced). */
  dead?: boolean;
  job?: Pending;
  startedAt: number;
  timer?: NodeJS.Timeout;
}

const now = performance.now.bind(performance);
const failure = (errorCode: SandboxErrorCode, error: string): Answer => ({ ok: false, errorCode, error, log: "" });

export class SandboxPool implements Sandbox {
  private readonly slots: Slot[] = [];
  /** Queued evaluations, served in turn across owners. */
  private readonly fair: FairQueue<Pending>;
  private nextId = 1;
  private failedStarts = 0;
  private closed = false;

  constructor(readonly options: PoolOptions) {
    this.fair = new FairQueue(options.perOwner);
    for (let i = 0; i < options.workers; i++) this.slots.push(this.spawn());
  }

  /** Runs one evaluation for `owner`; never rejects. `signal` cuts it off (queued or running) with its reason. */
  evaluate(owner: string, evaluation: Evaluation, signal?: AbortSignal): Promise<Outcome> {
    return new Promise((resolve) => {
      if (this.closed) return resolve({ answer: failure("SANDBOX_ERROR", "the sandbox is shut down"), elapsedMs: 0 });
      if (signal?.aborted) return resolve({ answer: failure("SANDBOX_TIMEOUT", cutOffMessage(signal)), elapsedMs: 0 });
      const job: Pending = { id: this.nextId++, owner, evaluation, resolve };
      job.signal = signal;
      job.release = onCutOff(signal, () => this.cutOff(job));
      this.fair.push(job);
      this.dispatch();
    });
  }

  /** Evaluations queued and running, by owner (for tests and the bench). */
  stats(): { workers: number; busy: number; queued: number } {
    return { workers: this.slots.length, busy: this.slots.filter((s) => s.job).length, queued: this.fair.queued };
  }

  /** Resolves once every worker has loaded (a host may wait for it before serving; evaluations queue meanwhile). */
  async ready(timeoutMs = 30_000): Promise<void> {
    const until = now() + timeoutMs;
    while (!this.closed && this.slots.some((s) => !s.ready) && now() < until) await new Promise((r) => setTimeout(r, 20));
  }

  /** Evaluations `owner` is running now (at most `perOwner`). */
  runningFor(owner: string): number {
    return this.fair.runningFor(owner);
  }

  /** Tests only: the workers running an evaluation of `owner` (a test terminates one to show the pool recovers). */
  busyWorkersForTests(owner: string): Worker[] {
    return this.slots.filter((s) => s.job?.owner === owner).map((s) => s.worker);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.fair.drain()) this.settle(job, failure("SANDBOX_ERROR", "the sandbox is shut down"), 0);
    await Promise.all(
      this.slots.map((slot) => {
        if (slot.job) this.settle(slot.job, failure("SANDBOX_ERROR", "the sandbox is shut down"), now() - slot.startedAt);
        clearTimeout(slot.timer);
        return slot.worker.terminate();
      }),
    );
  }

  private dispatch(): void {
    for (const warmOnly of [true, false]) {
      for (const slot of this.slots) {
        if (!slot.ready || slot.job || (warmOnly && !slot.warm)) continue;
        const job = this.fair.take();
        if (!job) return;
        this.start(slot, job);
      }
    }
  }

  private start(slot: Slot, job: Pending): void {
    slot.job = job;
    slot.warm = false;
    slot.startedAt = now();
    slot.worker.ref();
    slot.timer = setTimeout(() => this.expire(slot), job.evaluation.limits.timeLimitMs + this.options.graceMs);
    slot.worker.postMessage({ id: job.id, evaluation: job.evaluation } satisfies Job);
  }

  /** Frees the slot's share and stops its timer; the slot's worker stays as it is. */
  private release(slot: Slot): Pending | undefined {
    const job = slot.job;
    if (!job) return undefined;
    slot.job = undefined;
    clearTimeout(slot.timer);
    this.fair.finish(job.owner);
    slot.worker.unref();
    return job;
  }

  private settle(job: Pending, answer: Answer, elapsedMs: number): void {
    job.release?.();
    job.resolve({ answer, elapsedMs });
  }

  private onReply(slot: Slot, reply: Reply): void {
    if (reply.type === "ready") {
      slot.ready = true;
      slot.warm = true;
      this.failedStarts = 0;
    } else if (slot.job?.id === reply.id) {
      const job = this.release(slot)!;
      this.settle(job, reply.answer, reply.elapsedMs);
    }
    this.dispatch();
  }

  /** The script outlived its own limit by the grace: its worker is replaced. */
  private expire(slot: Slot): void {
    const job = slot.job;
    if (!job) return;
    const { timeLimitMs } = job.evaluation.limits;
    this.replace(slot, failure("SANDBOX_TIMEOUT", `script exceeded time limit of ${timeLimitMs} ms`), timeLimitMs);
  }

  private cutOff(job: Pending): void {
    const message = cutOffMessage(job.signal!);
    if (this.fair.remove(job)) return this.settle(job, failure("SANDBOX_TIMEOUT", message), 0);
    const slot = this.slots.find((s) => s.job === job);
    if (slot) this.replace(slot, failure("SANDBOX_TIMEOUT", message), now() - slot.startedAt);
  }

  /** Ends the slot's evaluation with `answer`, terminates its worker and starts a new one in its place. */
  private replace(slot: Slot, answer: Answer, elapsedMs: number): void {
    const job = this.release(slot);
    void slot.worker.terminate();
    const at = this.slots.indexOf(slot);
    if (at >= 0 && !this.closed) this.slots[at] = this.spawn();
    if (job) this.settle(job, answer, elapsedMs);
    this.dispatch();
  }

  private spawn(): Slot {
    const slot: Slot = { worker: startWorker(this.options), ready: false, warm: false, startedAt: 0 };
    slot.worker.unref();
    slot.worker.on("message", (reply: Reply) => this.onReply(slot, reply));
    slot.worker.on("error", (err: Error & { code?: string }) => {
      if (!this.slots.includes(slot)) return;
      const outOfMemory = err.code === "ERR_WORKER_OUT_OF_MEMORY";
      const limit = slot.job?.evaluation.limits.memoryLimitMib ?? this.options.memoryLimitMib;
      this.died(
        slot,
        outOfMemory
          ? failure("SANDBOX_MEMORY", `script exceeded memory limit of ${limit} MiB`)
          : failure("SANDBOX_ERROR", "the sandbox failed"),
      );
    });
    slot.worker.on("exit", () => {
      if (this.slots.includes(slot) && !this.closed) this.died(slot, failure("SANDBOX_ERROR", "the sandbox failed"));
    });
    return slot;
  }

  /** A worker that died: its evaluation fails; a worker that never became ready makes the pool wait a little. */
  private died(slot: Slot, answer: Answer): void {
    if (slot.dead) return; // "error" and then "exit" for one death
    slot.dead = true;
    if (slot.ready) return this.replace(slot, answer, now() - slot.startedAt);
    // A worker that could not even start: after as many failures as workers (a broken install), fail what
    // waits; and start the next one a second later instead of spinning on restarts.
    if (++this.failedStarts >= this.options.workers)
      for (const job of this.fair.drain()) this.settle(job, failure("SANDBOX_ERROR", "the sandbox could not start"), 0);
    setTimeout(() => {
      if (this.slots.includes(slot) && !this.closed) this.replace(slot, answer, 0);
    }, 1_000).unref();
  }
}

/**
 * What a sandbox worker is started with. Its environment is empty (not a copy of the process's): no script
 * that escaped QuickJS finds the host's credentials or settings in `process.env` of its thread.
 */
export function workerOptions(options: PoolOptions): WorkerOptions {
  const workerData = { role: SANDBOX_WORKER_ROLE, memoryLimitMib: options.memoryLimitMib, logLimitBytes: options.logLimitBytes };
  const resourceLimits = { maxOldGenerationSizeMb: options.heapMib, maxYoungGenerationSizeMb: 32 };
  return { workerData, resourceLimits, env: {} };
}

function startWorker(options: PoolOptions): Worker {
  const here = import.meta.url;
  // In a bundle, the bundle itself is the worker's script; from source (npm start, tests), the worker's own
  // modules bundled once per process: a TypeScript loader in every worker would cost ~120 MiB each.
  const script = here.endsWith(".ts") ? workerBundle(here) : new URL(here);
  return new Worker(script, workerOptions(options));
}

let bundled: string | undefined;

/**
 * ./worker.ts and what it imports, bundled with esbuild (development hosts only), in the temporary directory
 * under a name that is the hash of its content: processes running the same code share one file.
 */
function workerBundle(from: string): string {
  if (bundled && existsSync(bundled)) return bundled;
  const esbuild = createRequire(from)("esbuild") as typeof import("esbuild");
  const [output] = esbuild.buildSync({
    entryPoints: [fileURLToPath(new URL("./worker.ts", from))],
    outfile: "worker.mjs",
    write: false,
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    logLevel: "silent",
  }).outputFiles;
  const file = join(tmpdir(), `workflow-sandbox-${createHash("sha256").update(output!.contents).digest("hex").slice(0, 16)}.mjs`);
  if (!existsSync(file)) {
    const partial = `${file}.${process.pid}.tmp`;
    writeFileSync(partial, output!.contents);
    renameSync(partial, file); // atomic: another process never loads half a file
  }
  bundled = file;
  return file;
}

const isSandboxWorker = () => !isMainThread && (workerData as { role?: unknown } | undefined)?.role === SANDBOX_WORKER_ROLE;

let shared: SandboxPool | undefined;

/** The process's pool, created on first use. */
export function sandboxPool(): SandboxPool {
  // A sandbox worker loads the whole bundle it was started from: it must never start workers of its own.
  if (isSandboxWorker()) throw new Error("the sandbox pool cannot be used inside a sandbox worker");
  shared ??= new SandboxPool(defaultPoolOptions());
  return shared;
}

/**
 * The sandbox evaluations go to: the one the host's wiring installed, else (tools and tests without a host)
 * this process's pool. A Lambda function never falls back to its own workers: they would run scripts next to
 * its credentials, so one that names no sandbox port fails instead.
 */
export function currentSandbox(): Sandbox {
  const sandbox = installedSandbox();
  if (sandbox) return sandbox;
  if (process.env.AWS_LAMBDA_FUNCTION_NAME)
    throw new Error("no sandbox installed: a Lambda function evaluates through the sandbox function (awsSandbox)");
  return sandboxPool();
}
