/**
 * A sandbox worker: a worker thread that runs QuickJS evaluations for the pool (./pool.ts), one at a time,
 * so that no script ever runs on the thread that serves requests and drives executions (API.md §18.1).
 *
 * Instantiation is off the critical path: the worker creates the next fresh QuickJS instance as soon as it
 * has answered, and each instance serves exactly one evaluation (never reused: ./quickjs.ts says why).
 * The evaluation's deadline starts when it starts here, so time spent queued never counts against a limit.
 *
 * Loaded two ways: imported by the pool's module (a no-op on any thread that is not a sandbox worker, which
 * is what puts this code into a Lambda bundle), and started as a worker with `workerData.role` set.
 */
import { readlinkSync } from "node:fs";
import { setPriority } from "node:os";
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { createInstance, evaluate, type Evaluation, type Instance } from "./quickjs";

export const SANDBOX_WORKER_ROLE = "workflow-sandbox";

/** pool → worker */
export interface Job {
  id: number;
  evaluation: Evaluation;
}

/** worker → pool: `ready` whenever an instance is waiting (once loaded, then after each answer); the pool prefers such workers. */
export type Reply = { type: "ready" } | { type: "answer"; id: number; answer: ReturnType<typeof evaluate>; elapsedMs: number };

interface WorkerData {
  role: string;
  /** The memory and log limits instances are created ahead for (`sandbox_memory_limit_mib`, `max_step_log_bytes`). */
  memoryLimitMib: number;
  logLimitBytes: number;
}

const now = performance.now.bind(performance);

/**
 * Runs this thread at the lowest CPU priority (nice 19), where the OS allows it (Linux: a thread is a task
 * with its own nice value, `/proc/thread-self` names it). Scripts then use only CPU that the thread serving
 * requests, the engine and the database do not: a core spinning in `while (true) {}` no longer slows them.
 */
function yieldCpuToOthers(): void {
  try {
    const threadId = Number(readlinkSync("/proc/thread-self").split("/").pop());
    if (Number.isInteger(threadId) && threadId > 0) setPriority(threadId, 19);
  } catch {
    // not Linux, or not permitted: the pool's per-owner share still bounds what one owner takes
  }
}

function serve(port: NonNullable<typeof parentPort>, data: WorkerData): void {
  yieldCpuToOthers();
  // The instance created ahead, once it exists (taken synchronously: no await between a job and its start).
  let waiting: Instance | undefined;
  let ahead: Promise<Instance | undefined> = Promise.resolve(undefined);
  const prepare = () => {
    ahead = createInstance(data.memoryLimitMib, data.logLimitBytes).then(
      (instance) => {
        waiting = instance;
        port.postMessage({ type: "ready" } satisfies Reply);
        return instance;
      },
      () => undefined, // created on demand instead
    );
  };
  port.on("message", async (job: Job) => {
    const { limits } = job.evaluation;
    const usual = limits.memoryLimitMib === data.memoryLimitMib;
    let reply: Reply;
    try {
      let instance = usual ? (waiting ?? (await ahead)) : undefined;
      instance ??= await createInstance(limits.memoryLimitMib);
      if (instance === waiting) waiting = undefined;
      const started = now();
      const answer = evaluate(instance, job.evaluation);
      reply = { type: "answer", id: job.id, answer, elapsedMs: now() - started };
    } catch (e) {
      const error = `the sandbox failed: ${e instanceof Error ? e.message : String(e)}`;
      reply = { type: "answer", id: job.id, answer: { ok: false, errorCode: "SANDBOX_ERROR", error, log: "" }, elapsedMs: 0 };
    }
    port.postMessage(reply);
    if (usual) prepare();
  });
  prepare();
}

const data = workerData as Partial<WorkerData> | undefined;
if (
  !isMainThread &&
  parentPort &&
  data?.role === SANDBOX_WORKER_ROLE &&
  typeof data.memoryLimitMib === "number" &&
  typeof data.logLimitBytes === "number"
) {
  serve(parentPort, data as WorkerData);
}
