/**
 * The child side of the Lambda harness (tests/support/lambda-host.ts): a stand-in for the Node.js Lambda runtime.
 * It imports a bundled entry point, and for each `invoke` message calls the handler as the runtime does: with the
 * event and a context (`getRemainingTimeInMillis` counting down), or, for a handler wrapped by
 * `awslambda.streamifyResponse`, with a response stream whose bytes go to the host as they are written (the
 * Function URL contract: `HttpResponseStream.from` writes the JSON prelude and 8 NUL bytes before the body).
 * A buffered result whose serialized envelope passes Lambda's 6 MB limit fails the invocation, as on Lambda.
 *
 * As on Lambda, nothing but the handler's own work keeps the process alive while it runs (the IPC channel is
 * unref'd): if its event loop empties before the handler settles, the process exits, which the host reports as
 * Runtime.NodeJsExit. Between invocations the host freezes the process (SIGSTOP): no timer or promise runs.
 */
import { Writable } from "node:stream";

const STREAMING = Symbol.for("lambda-harness.streaming");
/** Lambda's limit on a synchronous invocation's response payload (the serialized envelope). */
const RESPONSE_LIMIT = 6_291_456;
globalThis.awslambda = {
  streamifyResponse: (handler) => Object.assign(handler, { [STREAMING]: true }),
  HttpResponseStream: {
    from(stream, metadata) {
      stream.write(JSON.stringify(metadata));
      stream.write(new Uint8Array(8));
      return stream;
    },
  },
};

const send = (message) => new Promise((resolve) => process.send(message, resolve));
const { handler } = await import(process.argv[2]);

process.on("message", async (message) => {
  if (message.type !== "invoke") return;
  const { id, event, timeoutMs, functionName } = message;
  const deadline = Date.now() + timeoutMs;
  const context = {
    awsRequestId: id,
    functionName,
    functionVersion: "$LATEST",
    memoryLimitInMB: "1024",
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
  };
  process.channel.unref();
  try {
    if (handler[STREAMING]) {
      const stream = new Writable({
        write(chunk, _encoding, done) {
          send({ type: "chunk", id, data: Buffer.from(chunk).toString("base64") }).then(() => done());
        },
      });
      await handler(event, stream, context);
      await new Promise((resolve) => (stream.writableFinished ? resolve() : stream.on("finish", resolve)));
      process.channel.ref();
      await send({ type: "result", id, result: null });
    } else {
      const result = await handler(event, context);
      process.channel.ref();
      // As Lambda does: the envelope is serialized, and one above the limit is an error (API Gateway answers 500).
      const bytes = Buffer.byteLength(JSON.stringify(result ?? null));
      if (bytes > RESPONSE_LIMIT) {
        await send({
          type: "error",
          id,
          error: `Response payload size exceeded maximum allowed payload size (${RESPONSE_LIMIT} bytes): ${bytes}`,
        });
        return;
      }
      await send({ type: "result", id, result: result ?? null, bytes });
    }
  } catch (error) {
    process.channel.ref();
    await send({ type: "error", id, error: String(error?.stack ?? error) });
  }
});
await send({ type: "ready" });
