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
import { onChange, readSummary } from "./execution";
import { isTerminal, type StatusSummary } from "./schemas";
import { RELEASE_WAIT_MS, type StreamLease } from "./stream-slots";
import { streamRead } from "./stream-admission";

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
  const startedAt = Date.now();
  let frames = 0;
  let lastStatus: StatusSummary["status"] | undefined;
  let lastWriteAt = startedAt;
  let nextPollAt = startedAt + options.intervalMs;
  let notified = false;
  let stopped = false;
  let wake: (() => void) | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  /** The body's controller, to close it when the lease is lost. */
  let body: ReadableStreamDefaultController<Uint8Array> | undefined;
  /** Whether a read is pending, and when the last one ended (the lease's heartbeat asks). */
  let reading = false;
  let lastReadAt: number | undefined;
  let released: Promise<void> = Promise.resolve();

  let unsubscribe = () => {};
  const clientGone = () => {
    void stop();
    if (body) close(body);
  };
  /** Ends the work and frees the slot; resolves once the slot is free (or after RELEASE_WAIT_MS at most). */
  const stop = (): Promise<void> => {
    if (stopped) return released;
    stopped = true;
    unsubscribe();
    gone?.removeEventListener("abort", clientGone);
    if (timer) clearTimeout(timer);
    wake?.();
    if (lease) {
      let waited: ReturnType<typeof setTimeout> | undefined;
      released = Promise.race([lease.release(), new Promise<void>((resolve) => (waited = setTimeout(resolve, RELEASE_WAIT_MS)))]).finally(
        () => clearTimeout(waited),
      );
    }
    return released;
  };
  /** The server ends the stream: the slot is freed first, so a client that sees the end may open another. */
  const end = async (ctrl: ReadableStreamDefaultController<Uint8Array>) => {
    await stop();
    close(ctrl);
  };
  gone?.addEventListener("abort", clientGone, { once: true });
  lease?.watch({
    lastReadAt: () => (reading ? Date.now() : lastReadAt),
    lost: () => {
      if (stopped) return;
      void stop();
      if (body) close(body);
    },
  });
  const send = (ctrl: ReadableStreamDefaultController<Uint8Array>, summary: StatusSummary) => {
    frames += 1;
    lastStatus = summary.status;
    lastWriteAt = Date.now();
    ctrl.enqueue(frame(frames, summary));
    if (isTerminal(summary.status)) return end(ctrl);
  };
  /** Sleeps until `at` or a notification, whichever comes first. */
  const sleepUntil = (at: number) =>
    new Promise<void>((resolve) => {
      if (notified || stopped) return resolve();
      wake = resolve;
      timer = setTimeout(resolve, Math.max(0, at - Date.now()));
    }).finally(() => {
      wake = undefined;
      if (timer) clearTimeout(timer);
    });

  return new ReadableStream<Uint8Array>(
    {
      start(ctrl) {
        body = ctrl;
      },
      async pull(ctrl) {
        reading = true;
        try {
          await next(ctrl);
        } finally {
          reading = false;
          lastReadAt = Date.now();
        }
      },
      cancel() {
        return stop();
      },
    },
    // Pull only when the client reads: no work for a body nobody consumes.
    { highWaterMark: 0 },
  );

  /** One pull: the first frame, or the wait for the next frame, keep-alive or end. */
  async function next(controller: ReadableStreamDefaultController<Uint8Array>) {
    if (stopped) return;
    if (frames === 0) {
      // Subscribed on the first read, not before: a body that is never sent (HEAD, a 429) leaves no listener.
      unsubscribe = onChange(first.workflowId, first.id, () => {
        notified = true;
        wake?.();
      });
      return send(controller, first);
    }
    while (!stopped) {
      const endAt = startedAt + options.maxMs;
      const keepaliveAt = lastWriteAt + options.keepaliveMs;
      await sleepUntil(Math.min(nextPollAt, keepaliveAt, endAt));
      if (stopped) return;
      const now = Date.now();
      if (now >= endAt) return end(controller);
      if (notified || now >= nextPollAt) {
        notified = false;
        nextPollAt = now + options.intervalMs;
        let found: Awaited<ReturnType<typeof readSummary>>;
        try {
          found = await streamRead(owner, () => readSummary(first.workflowId, first.id));
        } catch {
          found = undefined; // errors after the stream began are not reported in-band: it closes
        }
        if (stopped) return;
        if (!found || found.owner.toLowerCase() !== owner.toLowerCase()) return end(controller);
        if (found.summary.status !== lastStatus) return send(controller, found.summary);
      }
      if (Date.now() - lastWriteAt >= options.keepaliveMs) {
        lastWriteAt = Date.now();
        return controller.enqueue(KEEP_ALIVE);
      }
    }
  }
}
