/**
 * The live status stream of one execution (API.md §10.9) as a server-sent-events body. The first frame carries
 * the status read before the response began; then the record is polled (one strongly consistent GetItem of the
 * status fields per `interval`) and, in the process that records the run, woken at once by its notification.
 * The body is pull-driven: nothing is read before a client reads, so a response that is never sent (a
 * rate-limited request whose handler already ran) costs nothing, and a client that goes away stops the polling.
 */
import { onChange, readSummary } from "./execution";
import type { StatusSummary } from "./schemas";

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

/** The SSE body for an execution whose current summary (already read, ownership checked) is `first`. */
export function statusStream(owner: string, first: StatusSummary, options: StreamOptions): ReadableStream<Uint8Array> {
  const startedAt = Date.now();
  let frames = 0;
  let last = "";
  let lastWriteAt = startedAt;
  let nextPollAt = startedAt + options.intervalMs;
  let notified = false;
  let stopped = false;
  let wake: (() => void) | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;

  let unsubscribe = () => {};
  const stop = () => {
    stopped = true;
    unsubscribe();
    if (timer) clearTimeout(timer);
    wake?.();
  };
  const send = (controller: ReadableStreamDefaultController<Uint8Array>, summary: StatusSummary) => {
    frames += 1;
    last = JSON.stringify(summary);
    lastWriteAt = Date.now();
    controller.enqueue(frame(frames, summary));
    if (summary.status !== "pending") {
      stop();
      controller.close();
    }
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
      async pull(controller) {
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
          if (now >= endAt) {
            stop();
            return controller.close();
          }
          if (notified || now >= nextPollAt) {
            notified = false;
            nextPollAt = now + options.intervalMs;
            let found: Awaited<ReturnType<typeof readSummary>>;
            try {
              found = await readSummary(first.workflowId, first.id);
            } catch {
              found = undefined; // errors after the stream began are not reported in-band: it closes
            }
            if (stopped) return;
            if (!found || found.owner.toLowerCase() !== owner.toLowerCase()) {
              stop();
              return controller.close();
            }
            if (JSON.stringify(found.summary) !== last) return send(controller, found.summary);
          }
          if (Date.now() - lastWriteAt >= options.keepaliveMs) {
            lastWriteAt = Date.now();
            return controller.enqueue(KEEP_ALIVE);
          }
        }
      },
      cancel() {
        stop();
      },
    },
    // Pull only when the client reads: no work for a body nobody consumes.
    { highWaterMark: 0 },
  );
}
