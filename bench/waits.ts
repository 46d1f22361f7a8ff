/**
 * The `await` node's benchmarks (API.md §17.1), part of `npm run bench` (`BENCH_ONLY=waits`), over the real server:
 *
 *   signal → next node starts     POST :signal on a waiting run of [await → customCode], from the request until the
 *                                 customCode step's startAt (the resume: the conditional hand-back, the sealed state
 *                                 read and opened, the ended wait's step read)  vs  a blocking :trigger of
 *                                 [customCode], from the request until that step's startAt (the claim and the start)
 *   DynamoDB requests             of the suspension (from the await node's turn to `waiting`) and of the signal
 *                                 (the end, the resume, the rest of the run, the answer), counted by command
 *
 *   BENCH_WAIT_ROUNDS (default min(40, BENCH_ROUNDS)). Goal: signal → next node ≤ 50 ms p50 locally.
 */
import type { BenchContext } from "./workflows";
import { newOwner, type Owner } from "./workflows";
import { interleaved, type Round } from "./stats";
import { setRuntime, type Runtime } from "../shared/current-runtime";

const SIGNAL_GOAL_MS = 50;

export async function benchWaits(ctx: BenchContext): Promise<void> {
  const rounds = Number(process.env.BENCH_WAIT_ROUNDS ?? Math.min(40, Number(process.env.BENCH_ROUNDS ?? 40)));
  const who = await newOwner(ctx.base, "7");
  const code = { id: "after", name: "after", type: "customCode", config: { source: "return 1" } };
  const waitingFlow = await create(ctx, who, [{ id: "gate", name: "gate", type: "await", config: { channel: "api" } }, code]);
  const plainFlow = await create(ctx, who, [code]);

  const counter = requestCounter(ctx.runtime);
  let suspendKinds: string[] = [];
  let signalKinds: string[] = [];
  const signalToNode: Round = async () => {
    counter.start();
    const started = await post(ctx, who, `/workflows/${waitingFlow}:trigger`, { triggerType: "manual", isBlocking: true });
    suspendKinds = counter.stop();
    if (started.status !== "waiting") throw new Error(`expected waiting, got ${JSON.stringify(started)}`);
    counter.start();
    const at = Date.now();
    const done = await post(ctx, who, `/executions/${started.executionId}:signal?workflowId=${waitingFlow}`, { decision: "approve" });
    signalKinds = counter.stop();
    if (done.status !== "success") throw new Error(`signal: ${JSON.stringify(done).slice(0, 300)}`);
    const after = (done.steps as { id: string; startAt: number }[]).find((s) => s.id === "after")!;
    return after.startAt - at;
  };
  const triggerToNode: Round = async () => {
    const at = Date.now();
    const started = await post(ctx, who, `/workflows/${plainFlow}:trigger`, { triggerType: "manual", isBlocking: true });
    if (started.status !== "success") throw new Error(`trigger: ${JSON.stringify(started)}`);
    const read = await get(ctx, who, `/executions/${started.executionId}?workflowId=${plainFlow}`);
    const after = (read.steps as { id: string; startAt: number }[]).find((s) => s.id === "after")!;
    return after.startAt - at;
  };
  const [signal, trigger] = await interleaved(rounds, [signalToNode, triggerToNode]).finally(() => setRuntime(ctx.runtime));
  ctx.report("signal → next node starts", signal, "trigger → first node starts", trigger);
  ctx.rows[ctx.rows.length - 1]!.push(
    `p50 ${signal.p50.toFixed(1)} ms, goal ≤ ${SIGNAL_GOAL_MS} ms: ${signal.p50 <= SIGNAL_GOAL_MS ? "met" : "NOT met"}`,
  );
  console.log(
    `a wait's suspension: ${suspendKinds.length} DynamoDB requests for the whole blocking trigger to \`waiting\`: ${suspendKinds.join(", ")}`,
  );
  console.log(`a signal to the end of the run: ${signalKinds.length} DynamoDB requests: ${signalKinds.join(", ")}`);
}

async function create(ctx: BenchContext, who: Owner, nodes: unknown[]): Promise<string> {
  const res = await fetch(`${ctx.base}/workflows`, {
    method: "POST",
    headers: who.headers,
    body: JSON.stringify({ smartWalletAddress: who.wallet, trigger: { id: "t", name: "start", type: "manual", config: {} }, nodes }),
  });
  const body = (await res.json()) as { id: string };
  if (res.status !== 201) throw new Error(`create: ${res.status} ${JSON.stringify(body)}`);
  return body.id;
}

async function post(ctx: BenchContext, who: Owner, path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(ctx.base + path, { method: "POST", headers: who.headers, body: JSON.stringify(body) });
  return (await res.json()) as Record<string, unknown>;
}

async function get(ctx: BenchContext, who: Owner, path: string): Promise<Record<string, unknown>> {
  const res = await fetch(ctx.base + path, { headers: who.headers });
  return (await res.json()) as Record<string, unknown>;
}

/** Counts the DynamoDB commands the runtime sends between start() and stop() (the bench's own reads excluded by timing). */
function requestCounter(runtime: Runtime) {
  let kinds: string[] | undefined;
  const recorder = {
    send: (command: object) => {
      kinds?.push(command.constructor.name.replace(/Command$/, ""));
      return runtime.db.send(command as never);
    },
  };
  setRuntime({ ...runtime, db: recorder as unknown as Runtime["db"] });
  return {
    start: () => void (kinds = []),
    stop: () => {
      const seen = kinds ?? [];
      kinds = undefined;
      return seen;
    },
  };
}
