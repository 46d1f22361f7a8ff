/**
 * A Lambda-faithful host for the bundled entry points (issue 19): each function is bundled as a deploy bundles
 * it (bench/lambda-bundle.ts) and runs in a child process of its own (./lambda-runtime.mjs), invoked with the
 * event payloads AWS sends, and frozen (SIGSTOP) between invocations as Lambda freezes an idle instance: work a
 * handler leaves running after its answer does not run until the next invocation, and an invocation whose event
 * loop empties before its handler settles fails as Runtime.NodeJsExit.
 */
import { createInterface } from "node:readline";
import { fork, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import type { APIGatewayProxyEventV2, SQSEvent } from "aws-lambda";
import { LAMBDA_BUILD_OPTIONS, ROOT } from "../../bench/lambda-bundle";

type Message =
  | { type: "ready" }
  | { type: "chunk"; id: string; data: string }
  | { type: "result"; id: string; result: unknown; bytes?: number }
  | { type: "error"; id: string; error: string };

export interface Invocation<T = unknown> {
  result: T;
  /** A streaming handler's bytes, in the order written (prelude and delimiter included). */
  body: Buffer;
  /** When each chunk arrived (ms since the invocation began). */
  arrivals: number[];
  /** A buffered result's serialized size (what Lambda measures against its 6 MB limit). */
  bytes: number;
}

export interface StreamedResponse {
  statusCode: number;
  headers: Record<string, string>;
  body: string;
  arrivals: number[];
}

export class LambdaHost {
  private readonly child: ChildProcess;
  private pending:
    | { id: string; resolve: (i: Invocation) => void; reject: (e: Error) => void; chunks: Buffer[]; arrivals: number[]; at: number }
    | undefined;
  private exited = false;
  private count = 0;
  /** What the function wrote on stdout and stderr, line by line (its log lines). */
  readonly output: string[] = [];
  /** Every chunk of the invocation in flight is also handed here as it arrives. */
  onChunk?: (chunk: Buffer) => void;

  private constructor(
    readonly name: string,
    child: ChildProcess,
    private readonly dir: string,
  ) {
    this.child = child;
    child.on("message", (m: Message) => this.receive(m));
    child.on("exit", (code, signal) => {
      this.exited = true;
      this.pending?.reject(new Error(`Runtime.NodeJsExit: the function's process exited (${signal ?? code}) before its handler settled`));
      this.pending = undefined;
    });
  }

  /** Bundles `functions/<name>.ts` and starts its instance (cold start) with this environment only. */
  static async start(name: string, env: Record<string, string>): Promise<LambdaHost> {
    const dir = mkdtempSync(join(tmpdir(), `lambda-${name}-`));
    const outfile = join(dir, `${name}.mjs`);
    await build({ ...LAMBDA_BUILD_OPTIONS, entryPoints: [join(ROOT, "functions", `${name}.ts`)], outfile, write: true, metafile: false });
    const child = fork(join(ROOT, "tests/support/lambda-runtime.mjs"), [outfile], {
      env: { PATH: process.env.PATH ?? "", NODE_ENV: "production", AWS_LAMBDA_FUNCTION_NAME: name, ...env },
      stdio: ["ignore", "pipe", "pipe", "ipc"],
      execArgv: [],
    });
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    await new Promise<void>((resolve, reject) => {
      child.once("message", (m: Message) => (m.type === "ready" ? resolve() : reject(new Error(`unexpected ${m.type}`))));
      child.once("exit", (code) => reject(new Error(`${name} did not start (${code}): ${stderr}`)));
    });
    const host = new LambdaHost(name, child, dir);
    for (const stream of [child.stdout!, child.stderr!]) createInterface({ input: stream }).on("line", (line) => host.output.push(line));
    host.freeze();
    return host;
  }

  get frozen(): boolean {
    return this.isFrozen;
  }
  private isFrozen = false;

  private freeze() {
    if (!this.exited) process.kill(this.child.pid!, "SIGSTOP");
    this.isFrozen = true;
  }

  private thaw() {
    if (!this.exited) process.kill(this.child.pid!, "SIGCONT");
    this.isFrozen = false;
  }

  private receive(m: Message) {
    const p = this.pending;
    if (!p || m.type === "ready" || m.id !== p.id) return;
    if (m.type === "chunk") {
      const chunk = Buffer.from(m.data, "base64");
      p.chunks.push(chunk);
      p.arrivals.push(Date.now() - p.at);
      this.onChunk?.(chunk);
      return;
    }
    this.pending = undefined;
    // Frozen as soon as the invocation ends, before anything it left behind can run on.
    this.freeze();
    if (m.type === "error") p.reject(new Error(m.error));
    else p.resolve({ result: m.result, body: Buffer.concat(p.chunks), arrivals: p.arrivals, bytes: m.bytes ?? 0 });
  }

  /** One invocation: thawed, the event handed over, frozen again once the handler settles. */
  invoke<T = unknown>(event: unknown, options: { timeoutMs?: number } = {}): Promise<Invocation<T>> {
    if (this.exited) return Promise.reject(new Error(`${this.name}: the instance is gone`));
    if (this.pending) return Promise.reject(new Error(`${this.name}: one invocation at a time per instance`));
    const id = `${this.name}-${++this.count}`;
    const timeoutMs = options.timeoutMs ?? 30_000;
    return new Promise<Invocation<T>>((resolve, reject) => {
      const timer = setTimeout(() => {
        if (this.pending?.id !== id) return;
        this.pending = undefined;
        this.freeze();
        reject(new Error(`Task timed out after ${timeoutMs} ms`));
      }, timeoutMs + 1_000);
      this.pending = {
        id,
        resolve: (i) => (clearTimeout(timer), resolve(i as Invocation<T>)),
        reject: (e) => (clearTimeout(timer), reject(e)),
        chunks: [],
        arrivals: [],
        at: Date.now(),
      };
      this.thaw();
      this.child.send({ type: "invoke", id, event, timeoutMs, functionName: this.name });
    });
  }

  /** A Function URL invocation of a streaming handler, its answer parsed from the prelude. */
  async stream(event: APIGatewayProxyEventV2, options: { timeoutMs?: number } = {}): Promise<StreamedResponse> {
    const { body, arrivals } = await this.invoke(event, options);
    const delimiter = body.indexOf(Buffer.alloc(8));
    if (delimiter < 0) throw new Error("the stream wrote no HTTP prelude");
    const prelude = JSON.parse(body.subarray(0, delimiter).toString()) as { statusCode: number; headers: Record<string, string> };
    return { statusCode: prelude.statusCode, headers: prelude.headers, body: body.subarray(delimiter + 8).toString(), arrivals };
  }

  async close(): Promise<void> {
    if (!this.exited) {
      this.thaw();
      this.child.kill("SIGKILL");
      await new Promise((resolve) => (this.exited ? resolve(undefined) : this.child.once("exit", resolve)));
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** An API Gateway HTTP API (payload 2.0) or Function URL event, as AWS sends it. */
export function httpEvent(
  method: string,
  rawPath: string,
  init: { body?: string; headers?: Record<string, string>; rawQueryString?: string; functionUrl?: boolean } = {},
): APIGatewayProxyEventV2 {
  const now = Date.now();
  const domainName = init.functionUrl ? "abcdefghij.lambda-url.us-east-1.on.aws" : "abc123.execute-api.us-east-1.amazonaws.com";
  return {
    version: "2.0",
    routeKey: init.functionUrl ? "$default" : "$default",
    rawPath,
    rawQueryString: init.rawQueryString ?? "",
    headers: { host: domainName, "user-agent": "vitest", "x-forwarded-for": "203.0.113.7", ...init.headers },
    requestContext: {
      accountId: init.functionUrl ? "anonymous" : "123456789012",
      apiId: init.functionUrl ? "abcdefghij" : "abc123",
      domainName,
      domainPrefix: domainName.split(".")[0]!,
      http: { method, path: rawPath, protocol: "HTTP/1.1", sourceIp: "203.0.113.7", userAgent: "vitest" },
      requestId: `req-${now}-${Math.random().toString(36).slice(2)}`,
      routeKey: "$default",
      stage: "$default",
      time: new Date(now).toUTCString(),
      timeEpoch: now,
    },
    ...(init.body !== undefined ? { body: init.body } : {}),
    isBase64Encoded: false,
  };
}

/** The runner queue's delivery of messages to the runner (an event source mapping's SQS event). */
export function sqsEvent(messages: { body: string; messageId?: string; groupId?: string; receiveCount?: number }[]): SQSEvent {
  return {
    Records: messages.map((m, i) => ({
      messageId: m.messageId ?? `msg-${Date.now()}-${i}`,
      receiptHandle: `receipt-${i}`,
      body: m.body,
      attributes: {
        ApproximateReceiveCount: String(m.receiveCount ?? 1),
        SentTimestamp: String(Date.now()),
        SenderId: "AIDAEVENTBRIDGE",
        ApproximateFirstReceiveTimestamp: String(Date.now()),
        ...(m.groupId ? { MessageGroupId: m.groupId } : {}),
      },
      messageAttributes: {},
      md5OfBody: "",
      eventSource: "aws:sqs",
      eventSourceARN: "arn:aws:sqs:us-east-1:123456789012:runner-queue",
      awsRegion: "us-east-1",
    })),
  };
}
