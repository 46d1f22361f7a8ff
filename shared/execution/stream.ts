/**
 * The live status stream of one execution (API.md §10.9) as a server-sent-events body. The first frame carries
 * the status read before the response began; then the record is polled (one strongly consistent GetItem of the
 * status fields per `interval`) and, in the process that records the run, woken at once by its notification.
 * A frame is sent per status change, not per change of the summary: a wait that ends while the execution stays
 * `waiting` (a signal, before the run resumes to `pending`) or a step recorded is no frame (§10.9, §17.1.3).
 * The body is pull-driven: nothing is read before a client reads, so a response that is never sent (a
 * rate-limited request whose handler already ran) costs nothing, and a client that goes away stops the polling.
 * The stream holds one of its owner's open-stream slots (stream-slots.ts): it tells the lease when it was last
 * read, and frees the slot whenever it ends: before the connection closes when the server ends it, and at once
 * when the client's connection closes (`gone`), whether or not the host ever started sending the body.
 * Its poll reads run in its owner's lanes (stream-admission.ts): many streams of one owner never take the pool.
 */
import { type StatusSummary } from "./schemas";
import { RELEASE_WAIT_MS, type StreamLease } from "./stream-slots";
import { streamRead } from "./stream-admission";
import { onChange } from "./execution-stored";
import { readSummary } from "./execution-read";
import { isTerminal } from "../engine/schemas";

export interface StreamOptions {
  /** Poll period (ms). */
  intervalMs: number;
  /** A `: keep-alive` comment after this long without a frame (ms). */
  keepaliveMs: number;
  /** The stream closes after this long (ms); the client may reconnect. */
  maxMs: number;
}

export const STREAM_HEADERS = {
  "Content-Type": "text/event-stream",
  "Cache-Control": "no-cache",
  Connection: "keep-alive",
  "X-Accel-Buffering": "no",
} as const;

const encoder = new TextEncoder();
const frame = (n: number, summary: StatusSummary) => encoder.encode(`id: ${n}\nevent: status\ndata: ${JSON.stringify(summary)}\n\n`);
const KEEP_ALIVE = encoder.encode(": keep-alive\n\n");
const close = (controller: ReadableStreamDefaultController<Uint8Array>) => {
  try {
    controller.close();
  } catch {
    // the client cancelled meanwhile
  }
};

/**
 * The SSE body for an execution whose current summary (already read, ownership checked) is `first`, holding
 * `lease` (its owner's open-stream slot) until it ends or `gone` (the client's connection) aborts.
 */
export function statusStream(
  owner: string,
  first: StatusSummary,
  options: StreamOptions,
  lease?: StreamLease,
  gone?: AbortSignal,
): ReadableStream<Uint8Array> {
  const stream = new StatusStream(owner, first, options, lease, gone);
  return new ReadableStream<Uint8Array>(
    {
      start: (ctrl) => stream.started(ctrl),
      pull: (ctrl) => stream.pull(ctrl),
      cancel: () => stream.stop(),
    },
    // Pull only when the client reads: no work for a body nobody consumes.
    { highWaterMark: 0 },
  );
}

/** The state of one status stream: what it sent, when it polls next, whether it stopped and its slot is free. */
class StatusStream {
  private readonly startedAt = Date.now();
  private frames = 0;
  private lastStatus: StatusSummary["status"] | undefined;
  private lastWriteAt = this.startedAt;
  private nextPollAt: number;
  private notified = false;
  private stopped = false;
  private wake: (() => void) | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** The body's controller, to close it when the client goes or the lease is lost. */
  private body: ReadableStreamDefaultController<Uint8Array> | undefined;
  /** Whether a read is pending, and when the last one ended (the lease's heartbeat asks). */
  private reading = false;
  private lastReadAt: number | undefined;
  private released: Promise<void> = Promise.resolve();
  private unsubscribe = () => {};

  constructor(
    private readonly owner: string,
    private readonly first: StatusSummary,
    private readonly options: StreamOptions,
    private readonly lease?: StreamLease,
    private readonly gone?: AbortSignal,
  ) {
    this.nextPollAt = this.startedAt + options.intervalMs;
    gone?.addEventListener("abort", this.clientGone, { once: true });
    lease?.watch({
      lastReadAt: () => (this.reading ? Date.now() : this.lastReadAt),
      lost: () => {
        if (this.stopped) return;
        void this.stop();
        if (this.body) close(this.body);
      },
    });
  }

  started(ctrl: ReadableStreamDefaultController<Uint8Array>) {
    this.body = ctrl;
  }

  async pull(ctrl: ReadableStreamDefaultController<Uint8Array>) {
    this.reading = true;
    try {
      await this.next(ctrl);
    } finally {
      this.reading = false;
      this.lastReadAt = Date.now();
    }
  }

  /** Ends the work and frees the slot; resolves once the slot is free (or after RELEASE_WAIT_MS at most). */
  stop(): Promise<void> {
    if (this.stopped) return this.released;
    this.stopped = true;
    this.unsubscribe();
    this.gone?.removeEventListener("abort", this.clientGone);
    if (this.timer) clearTimeout(this.timer);
    this.wake?.();
    if (this.lease) {
      let waited: ReturnType<typeof setTimeout> | undefined;
      this.released = Promise.race([
        this.lease.release(),
        new Promise<void>((resolve) => (waited = setTimeout(resolve, RELEASE_WAIT_MS))),
      ]).finally(() => clearTimeout(waited));
    }
    return this.released;
  }

  private readonly clientGone = () => {
    void this.stop();
    if (this.body) close(this.body);
  };

  /** The server ends the stream: the slot is freed first, so a client that sees the end may open another. */
  private async end(ctrl: ReadableStreamDefaultController<Uint8Array>) {
    await this.stop();
    close(ctrl);
  }

  private send(ctrl: ReadableStreamDefaultController<Uint8Array>, summary: StatusSummary) {
    this.frames += 1;
    this.lastStatus = summary.status;
    this.lastWriteAt = Date.now();
    ctrl.enqueue(frame(this.frames, summary));
    if (isTerminal(summary.status)) return this.end(ctrl);
  }

  /** Sleeps until `at` or a notification, whichever comes first. */
  private sleepUntil(at: number) {
    return new Promise<void>((resolve) => {
      if (this.notified || this.stopped) return resolve();
      this.wake = resolve;
      this.timer = setTimeout(resolve, Math.max(0, at - Date.now()));
    }).finally(() => {
      this.wake = undefined;
      if (this.timer) clearTimeout(this.timer);
    });
  }

  /** One pull: the first frame, or the wait for the next frame, keep-alive or end. */
  private async next(controller: ReadableStreamDefaultController<Uint8Array>) {
    if (this.stopped) return;
    if (this.frames === 0) {
      // Subscribed on the first read, not before: a body that is never sent (HEAD, a 429) leaves no listener.
      this.unsubscribe = onChange(this.first.workflowId, this.first.id, () => {
        this.notified = true;
        this.wake?.();
      });
      return this.send(controller, this.first);
    }
    while (!this.stopped) {
      const endAt = this.startedAt + this.options.maxMs;
      const keepaliveAt = this.lastWriteAt + this.options.keepaliveMs;
      await this.sleepUntil(Math.min(this.nextPollAt, keepaliveAt, endAt));
      if (this.stopped) return;
      const now = Date.now();
      if (now >= endAt) return this.end(controller);
      if (this.notified || now >= this.nextPollAt) {
        this.notified = false;
        this.nextPollAt = now + this.options.intervalMs;
        const found = await this.poll();
        if (this.stopped) return;
        if (!found || found.owner.toLowerCase() !== this.owner.toLowerCase()) return this.end(controller);
        if (found.summary.status !== this.lastStatus) return this.send(controller, found.summary);
      }
      if (Date.now() - this.lastWriteAt >= this.options.keepaliveMs) {
        this.lastWriteAt = Date.now();
        return controller.enqueue(KEEP_ALIVE);
      }
    }
  }

  /** The execution's summary now, read in its owner's lanes; undefined when the read fails. */
  private async poll(): Promise<Awaited<ReturnType<typeof readSummary>>> {
    try {
      return await streamRead(this.owner, () => readSummary(this.first.workflowId, this.first.id));
    } catch {
      return undefined; // errors after the stream began are not reported in-band: it closes
    }
  }
}
