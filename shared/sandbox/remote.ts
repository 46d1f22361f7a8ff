/**
 * The sandbox port on AWS (./port.ts): every evaluation is one synchronous invocation of the sandbox function
 * (functions/sandbox.ts, infra/sandbox.ts), a Lambda whose role grants nothing but logs, so a script that
 * escaped QuickJS finds no table, key or credential of the caller.
 *
 * What the in-process pool does stays here, in the caller: evaluations queue per owner and are served in turn
 * (./fair-queue.ts), at most `concurrency` invocations at once per instance and `perOwner` of them for one
 * owner; the running time the function reports is what the session charges to the execution's budget. The
 * time limit is enforced inside the function (QuickJS's interrupt) and here too: an answer that has not come
 * `graceMs` after the script's limit (a cold start, a hung instance) is given up as SANDBOX_TIMEOUT, and a
 * caller's signal (a simulation at its cap) abandons the invocation at once. An abandoned invocation runs on
 * in its instance until its own limit stops it; its answer is ignored. A throttled invocation (the function's
 * or the account's concurrency in use: Lambda refuses it before running anything) is sent again after a short
 * jittered wait for up to `graceMs`, each attempt with its own time limit; past that the answer is SANDBOX_ERROR
 * (busy) and nothing is charged, since the script never ran.
 */
import * as v from "valibot";
import type { Answer, Evaluation, SandboxErrorCode } from "./quickjs";
import type { Outcome, Sandbox } from "./port";
import { FairQueue } from "./fair-queue";
import { cutOffMessage, onCutOff } from "./cut-off";
import { SandboxReply } from "./protocol";

/** One invocation: the request's JSON text in, the function's result out (parsed), or a throw. */
export type Invoke = (payload: string, signal: AbortSignal) => Promise<unknown>;

export interface RemoteOptions {
  /** Invocations in flight at once from this instance. */
  concurrency: number;
  /** Invocations one owner may have in flight at once. */
  perOwner: number;
  /** How long past its script's time limit an answer may take (a cold start of the function included). */
  graceMs: number;
}

function defaultRemoteOptions(env: Record<string, string | undefined> = process.env): RemoteOptions {
  const concurrency = Number(env.SANDBOX_CONCURRENCY) || 8;
  return {
    concurrency,
    perOwner: Number(env.SANDBOX_WORKERS_PER_OWNER) || Math.max(1, Math.floor(concurrency / 2)),
    graceMs: 3_000,
  };
}

interface Pending {
  owner: string;
  evaluation: Evaluation;
  signal?: AbortSignal;
  /** Unties the evaluation from its caller's signal (`onCutOff`). */
  release?: () => void;
  /** Set while its invocation is in flight. */
  inFlight?: AbortController;
  resolve: (outcome: Outcome) => void;
}

const failure = (errorCode: SandboxErrorCode, error: string): Answer => ({ ok: false, errorCode, error, log: "" });

const THROTTLE_BACKOFF_MS = 25;
const THROTTLE_BACKOFF_CAP_MS = 400;
const THROTTLED = Symbol("throttled");
const SANDBOX_BUSY = "the sandbox is busy (every instance is in use); the script did not run";
/** Lambda's refusal for concurrency (HTTP 429): nothing ran, so the same invocation may go again. */
const isThrottle = (err: unknown) => (err as { name?: string }).name === "TooManyRequestsException";
/** Waits `ms`: true, or false as soon as `signal` aborts. */
const pause = (ms: number, signal: AbortSignal) =>
  new Promise<boolean>((resolve) => {
    if (signal.aborted) return resolve(false);
    const onAbort = () => (clearTimeout(timer), resolve(false));
    const timer = setTimeout(() => (signal.removeEventListener("abort", onAbort), resolve(true)), ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });

export class RemoteSandbox implements Sandbox {
  private readonly fair: FairQueue<Pending>;
  private inFlight = 0;

  constructor(
    private readonly invoke: Invoke,
    readonly options: RemoteOptions = defaultRemoteOptions(),
  ) {
    this.fair = new FairQueue(options.perOwner);
  }

  evaluate(owner: string, evaluation: Evaluation, signal?: AbortSignal): Promise<Outcome> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve({ answer: failure("SANDBOX_TIMEOUT", cutOffMessage(signal)), elapsedMs: 0 });
      const job: Pending = { owner, evaluation, resolve };
      job.signal = signal;
      job.release = onCutOff(signal, () => this.cutOff(job));
      this.fair.push(job);
      this.dispatch();
    });
  }

  /** Invocations `owner` has in flight now (at most `perOwner`). */
  runningFor(owner: string): number {
    return this.fair.runningFor(owner);
  }

  private dispatch(): void {
    while (this.inFlight < this.options.concurrency) {
      const job = this.fair.take();
      if (!job) return;
      void this.run(job);
    }
  }

  private async run(job: Pending): Promise<void> {
    this.inFlight++;
    // Aborted by a caller's cut-off (./port.ts); each attempt also has a timer of its own.
    const cut = (job.inFlight = new AbortController());
    const payload = JSON.stringify({ evaluation: job.evaluation });
    const busyUntil = performance.now() + this.options.graceMs;
    let outcome: Outcome | undefined;
    try {
      for (let attempt = 0; !outcome; attempt++) {
        const answered = await this.attempt(job, payload, cut.signal);
        if (answered !== THROTTLED) outcome = answered;
        // Lambda refused it before running anything: send it again after a jittered wait, within the grace.
        else if (performance.now() >= busyUntil) outcome = { answer: failure("SANDBOX_ERROR", SANDBOX_BUSY), elapsedMs: 0 };
        else if (!(await pause(Math.random() * Math.min(THROTTLE_BACKOFF_CAP_MS, THROTTLE_BACKOFF_MS * 2 ** attempt), cut.signal)))
          outcome = { answer: failure("SANDBOX_TIMEOUT", cutOffMessage(job.signal!)), elapsedMs: 0 };
      }
    } finally {
      this.inFlight--;
      this.fair.finish(job.owner);
    }
    this.settle(job, outcome);
    this.dispatch();
  }

  /** One invocation, given up `graceMs` after the script's limit or when cut off; THROTTLED when Lambda refused it. */
  private async attempt(job: Pending, payload: string, cut: AbortSignal): Promise<Outcome | typeof THROTTLED> {
    const { timeLimitMs } = job.evaluation.limits;
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort("timeout"), timeLimitMs + this.options.graceMs);
    const started = performance.now();
    try {
      const reply = v.parse(SandboxReply, await this.invoke(payload, AbortSignal.any([cut, timeout.signal])));
      return { answer: reply.answer, elapsedMs: reply.elapsedMs };
    } catch (err) {
      if (job.signal?.aborted)
        return { answer: failure("SANDBOX_TIMEOUT", cutOffMessage(job.signal)), elapsedMs: performance.now() - started };
      if (timeout.signal.aborted)
        return { answer: failure("SANDBOX_TIMEOUT", `script exceeded time limit of ${timeLimitMs} ms`), elapsedMs: timeLimitMs };
      if (isThrottle(err)) return THROTTLED;
      return { answer: failure("SANDBOX_ERROR", "the sandbox failed"), elapsedMs: 0 };
    } finally {
      clearTimeout(timer);
    }
  }

  private cutOff(job: Pending): void {
    if (this.fair.remove(job)) return this.settle(job, { answer: failure("SANDBOX_TIMEOUT", cutOffMessage(job.signal!)), elapsedMs: 0 });
    job.inFlight?.abort("cut off"); // run() answers with the signal's reason
  }

  private settle(job: Pending, outcome: Outcome): void {
    job.release?.();
    job.resolve(outcome);
  }
}
